//go:build linux

package conn

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// offloadBatch builds a WriteBatch that exercises run building: runs of
// equal-sized datagrams to b (one ending in a shorter datagram, one with a
// longer datagram that must start a new run), datagrams to c interleaved, and
// sizes that do not coalesce. Every payload is unique: its index, then filler.
func offloadBatch(b, c netip.AddrPort) (out [][]byte, eps []Endpoint) {
	add := func(to netip.AddrPort, size int) {
		d := make([]byte, size)
		binary.BigEndian.PutUint32(d, uint32(len(out)))
		for i := 4; i < size; i++ {
			d[i] = byte(len(out) + i)
		}
		out = append(out, d)
		eps = append(eps, Endpoint{Remote: to})
	}
	for i := 0; i < 70; i++ { // more than maxSegments: two runs
		add(b, 1200)
	}
	add(b, 300) // ends the run
	add(b, 1200)
	add(b, 1200)
	add(b, 1400) // longer: a new run
	add(b, 1400)
	for i := 0; i < 10; i++ {
		add(c, 900)
		add(b, 1000)
	}
	for i := 0; i < 50; i++ { // 50 × 1300 > maxGSOBytes: split by size
		add(c, 1300)
	}
	return out, eps
}

// TestOffloadRoundTrip: with GSO and GRO, and without, every datagram arrives
// intact, in order per receiver, as its own datagram, read in batches smaller
// than the runs; with offload on, runs were coalesced on send and on receive.
func TestOffloadRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name, a, b string
		noOffload  bool
		noGSO      bool // a kernel without UDP_SEGMENT
	}{
		{"v4", "127.0.0.1:0", "127.0.0.1:0", false, false},
		{"v4-wildcard", "127.0.0.1:0", "0.0.0.0:0", false, false},
		{"v6", "[::1]:0", "[::1]:0", false, false},
		{"v4-off", "127.0.0.1:0", "127.0.0.1:0", true, false},
		{"v4-kernel-without-gso", "127.0.0.1:0", "127.0.0.1:0", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if udpCmsgsSwapped && !tc.noOffload {
				t.Skip("under qemu-user on a big-endian guest, UDP_SEGMENT and UDP_GRO control messages reach the kernel byte-swapped (see udpCmsgsSwapped)")
			}
			if tc.noGSO {
				probe := probeGSO
				probeGSO = func(int) error { return unix.ENOPROTOOPT }
				t.Cleanup(func() { probeGSO = probe })
			}
			a := listen(t, Options{Addr: netip.MustParseAddrPort(tc.a), NoOffload: tc.noOffload})
			b := listen(t, Options{Addr: netip.MustParseAddrPort(tc.b), NoOffload: tc.noOffload})
			c := listen(t, Options{Addr: netip.MustParseAddrPort(tc.a), NoOffload: tc.noOffload})
			toB := b.LocalAddr()
			if toB.Addr().IsUnspecified() {
				toB = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), toB.Port())
			}
			out, eps := offloadBatch(toB, c.LocalAddr())
			if err := a.WriteBatch(out, eps); err != nil {
				t.Fatal(err)
			}
			for _, rx := range []struct {
				c  *udpConn
				to netip.AddrPort
			}{{b, toB}, {c, c.LocalAddr()}} {
				var want [][]byte
				for i := range out {
					if eps[i].Remote == rx.to {
						want = append(want, out[i])
					}
				}
				got, _ := readN(t, rx.c, len(want), 7)
				for i := range want {
					if got[i].payload != string(want[i]) {
						t.Fatalf("to %v: datagram %d: %d bytes starting %x, want %d bytes starting %x",
							rx.to, i, len(got[i].payload), got[i].payload[:min(4, len(got[i].payload))], len(want[i]), want[i][:4])
					}
					if got[i].ep.Remote != a.LocalAddr() {
						t.Fatalf("datagram %d from %v, want %v", i, got[i].ep.Remote, a.LocalAddr())
					}
					if rx.c.pktinfo && !got[i].ep.Local.IsValid() {
						t.Fatalf("datagram %d: wildcard socket did not report Local", i)
					}
				}
			}
			sa, sb := a.Offload(), b.Offload()
			if tc.noOffload {
				if sa.GSO || sa.GRO || sa.GSOSends != 0 || sb.GRORuns != 0 || sa.GSOOff != "disabled" {
					t.Fatalf("offload off: sender %+v, receiver %+v", sa, sb)
				}
				return
			}
			if tc.noGSO {
				// Every datagram went alone, and arrived (above); GRO stays on.
				if sa.GSO || sa.GSOOff != "kernel" || sa.GSOSends != 0 || !sb.GRO {
					t.Fatalf("kernel without UDP_SEGMENT: sender %+v, receiver %+v", sa, sb)
				}
				return
			}
			if !sa.GSO {
				t.Skipf("kernel without UDP GSO (%s): only the fallback was tested", sa.GSOOff)
			}
			// Runs to b: 64+6 (size 1200, split at maxSegments), the two after
			// the short one, the 1400s; the 10 interleaved 1000s go alone.
			if sa.GSOSends < 4 || sa.GSODatagrams < 70 {
				t.Errorf("sender coalesced %d runs of %d datagrams, want ≥ 4 runs, ≥ 70 datagrams", sa.GSOSends, sa.GSODatagrams)
			}
			if sb.GRO && sb.GRORuns == 0 {
				t.Errorf("receiver with GRO got no coalesced run: %+v", sb)
			}
		})
	}
}

// TestGROCutTruncates: a datagram of a run larger than the caller's buffer is
// truncated to the buffer, as recvmmsg truncates, and the next one is intact.
func TestGROCutTruncates(t *testing.T) {
	var g groRuns
	g.init()
	for i := range 250 {
		g.bufs[0][i] = byte(i)
	}
	g.lens[0], g.segs[0], g.n = 250, 100, 1
	var o offload
	bufs := [][]byte{make([]byte, 60), make([]byte, 200), make([]byte, 200)}
	sizes := make([]int, 3)
	eps := make([]Endpoint, 3)
	if n := g.cut(bufs, sizes, eps, &o); n != 3 {
		t.Fatalf("cut returned %d datagrams, want 3", n)
	}
	if sizes[0] != 60 || sizes[1] != 100 || sizes[2] != 50 {
		t.Fatalf("sizes %v, want [60 100 50]", sizes)
	}
	if bufs[1][0] != 100 || bufs[2][0] != 200 || bufs[2][49] != 249 {
		t.Fatalf("datagrams 2 and 3 start %d and %d, want 100 and 200", bufs[1][0], bufs[2][0])
	}
	if !g.empty() || o.groRuns.Load() != 1 || o.groDgrams.Load() != 3 {
		t.Fatalf("after the run: empty %v, runs %d, datagrams %d", g.empty(), o.groRuns.Load(), o.groDgrams.Load())
	}
}

// putCmsg writes one control message at the start of b and returns where the
// next one starts, as the kernel lays them out (CMSG_SPACE).
func putCmsg(b []byte, level, typ int32, data []byte) int {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(len(data)))
	copy(b[unix.CmsgLen(0):], data)
	return unix.CmsgSpace(len(data))
}

// TestParseControlAfterOddMessage: the GRO size and the local address are found
// after a control message whose length is not a multiple of 8 — an 8-byte
// timestamp on a 32-bit kernel is 12+8 = 20 bytes, and the next header starts at
// 20 (CMSG_ALIGN rounds to the size of a long). parseControl used to round up to
// 8 and read the next header 4 bytes late on mips and arm; amd64 cannot show it,
// the cross run (scripts/crosstest.sh mips) does.
func TestParseControlAfterOddMessage(t *testing.T) {
	b := alignedBytes(128)
	n := putCmsg(b, unix.SOL_SOCKET, unix.SO_TIMESTAMP, make([]byte, 8))
	var seg [4]byte
	binary.NativeEndian.PutUint32(seg[:], 1200)
	n += putCmsg(b[n:], unix.IPPROTO_UDP, unix.UDP_GRO, seg[:])
	pi := unix.Inet4Pktinfo{Spec_dst: [4]byte{192, 0, 2, 7}}
	n += putCmsg(b[n:], unix.IPPROTO_IP, unix.IP_PKTINFO, unsafe.Slice((*byte)(unsafe.Pointer(&pi)), unix.SizeofInet4Pktinfo))
	local, got := parseControl(b[:n])
	if got != 1200 || local != netip.MustParseAddr("192.0.2.7") {
		t.Fatalf("parseControl = %v, %d; want 192.0.2.7, 1200", local, got)
	}
}

// TestPutSegmentLayout: the UDP_SEGMENT message putSegment writes reads back
// through x/sys/unix's parser (its own alignment rules) with the size in native
// byte order, as the kernel reads a __u16 — on big-endian mips too.
func TestPutSegmentLayout(t *testing.T) {
	b := alignedBytes(oobSize)
	n := putSegment(b, 1200)
	msgs, err := unix.ParseSocketControlMessage(b[:n])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("ParseSocketControlMessage = %d messages, %v; want 1", len(msgs), err)
	}
	m := msgs[0]
	if m.Header.Level != unix.IPPROTO_UDP || m.Header.Type != unix.UDP_SEGMENT || len(m.Data) != 2 {
		t.Fatalf("got level %d type %d with %d bytes, want UDP_SEGMENT with 2", m.Header.Level, m.Header.Type, len(m.Data))
	}
	if v := binary.NativeEndian.Uint16(m.Data); v != 1200 {
		t.Fatalf("segment size %d, want 1200", v)
	}
}
