//go:build linux

package tundev

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// seg describes one test packet.
type seg struct {
	udp        bool
	v6         bool
	sport      uint16
	seq        uint32
	payload    int
	flags      uint8  // TCP flags (ACK = 0x10, PSH = 0x08)
	tsval      uint32 // TCP timestamp option value
	src, dst   netip.Addr
	dport      uint16
	fragmented bool
}

const (
	flagACK = 0x10
	flagPSH = 0x08
)

var (
	srcAddr = netip.MustParseAddr("100.64.0.2")
	dstAddr = netip.MustParseAddr("100.64.0.1")
	src6    = netip.MustParseAddr("fd00::2")
	dst6    = netip.MustParseAddr("fd00::1")
)

// packet builds s with valid checksums, at offset in a buffer of exactly that
// size (no spare capacity, like the engine's own buffers for one datagram).
func packet(s seg, offset int) []byte {
	if !s.src.IsValid() {
		s.src, s.dst = srcAddr, dstAddr
		if s.v6 {
			s.src, s.dst = src6, dst6
		}
	}
	if s.dport == 0 {
		s.dport = 80
	}
	if s.flags == 0 {
		s.flags = flagACK
	}
	th := 32 // TCP header with NOP, NOP, timestamps
	proto := uint8(6)
	if s.udp {
		th, proto = 8, 17
	}
	ih := 20
	if s.v6 {
		ih = 40
	}
	buf := make([]byte, offset+ih+th+s.payload)
	p := buf[offset:]
	if s.v6 {
		p[0] = 0x60
		binary.BigEndian.PutUint16(p[4:], uint16(th+s.payload))
		p[6], p[7] = proto, 64
		copy(p[8:24], s.src.AsSlice())
		copy(p[24:40], s.dst.AsSlice())
	} else {
		p[0] = 0x45
		binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
		p[6] = 0x40 // DF
		if s.fragmented {
			p[6] |= 0x20 // MF
		}
		p[8], p[9] = 64, proto
		copy(p[12:16], s.src.AsSlice())
		copy(p[16:20], s.dst.AsSlice())
		binary.BigEndian.PutUint16(p[10:], checksum(p[:20], 0))
	}
	t := p[ih:]
	binary.BigEndian.PutUint16(t[0:], s.sport)
	binary.BigEndian.PutUint16(t[2:], s.dport)
	for i := range s.payload {
		t[th+i] = byte(int(s.seq) + i)
	}
	var sum uint32
	for _, a := range [][]byte{s.src.AsSlice(), s.dst.AsSlice()} {
		for i := 0; i < len(a); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(a[i:]))
		}
	}
	sum += uint32(proto) + uint32(th+s.payload)
	if s.udp {
		binary.BigEndian.PutUint16(t[4:], uint16(th+s.payload))
		binary.BigEndian.PutUint16(t[6:], checksum(t, sum))
		return buf
	}
	binary.BigEndian.PutUint32(t[4:], s.seq)
	binary.BigEndian.PutUint32(t[8:], 1)
	t[12] = byte(th/4) << 4
	t[13] = s.flags
	binary.BigEndian.PutUint16(t[14:], 65535)
	t[20], t[21], t[22], t[23] = 1, 1, 8, 10
	binary.BigEndian.PutUint32(t[24:], s.tsval)
	binary.BigEndian.PutUint16(t[16:], checksum(t, sum))
	return buf
}

// tcpRun is n contiguous full segments of one flow from seq.
func tcpRun(sport uint16, seq uint32, n, size int) []seg {
	var out []seg
	for i := range n {
		out = append(out, seg{sport: sport, seq: seq + uint32(i*size), payload: size})
	}
	return out
}

func TestStageRuns(t *testing.T) {
	const off = 16
	const mss = 1328
	psh := tcpRun(1, 1000, 5, mss)
	psh[2].flags = flagACK | flagPSH
	ts := tcpRun(1, 1000, 4, mss)
	ts[2].tsval, ts[3].tsval = 7, 7
	gap := tcpRun(1, 1000, 4, mss)
	gap[2].seq += 1 // not adjacent: a new run
	gap[3].seq += 1
	short := tcpRun(1, 1000, 4, mss)
	short[1].payload = 100 // a short segment ends its run
	short[2].seq = short[1].seq + 100
	short[3].seq = short[2].seq + mss
	udp := []seg{{udp: true, sport: 9, payload: 1200}, {udp: true, sport: 9, payload: 1200}, {udp: true, sport: 9, payload: 500}, {udp: true, sport: 9, payload: 1200}}
	v6 := tcpRun(1, 1000, 3, mss)
	for i := range v6 {
		v6[i].v6 = true
	}
	frag := tcpRun(1, 1000, 3, mss)
	frag[0].fragmented = true
	long := tcpRun(1, 1000, 60, mss)
	// Each packet's header bytes (TCP: IPv4 20 + 32; UDP: 20 + 8).
	const th, uh, h6 = 52, 28, 72
	for _, c := range []struct {
		name   string
		segs   []seg
		heads  map[int]int // head index -> room it must get (cap - offset)
		inRuns int         // packets in the runs
	}{
		{"one flow", tcpRun(1, 1000, 4, mss), map[int]int{0: th + 4*mss}, 4},
		{"single packet", tcpRun(1, 1000, 1, mss), map[int]int{}, 0},
		{"PSH ends a run", psh, map[int]int{0: th + 3*mss, 3: th + 2*mss}, 5},
		{"other timestamps start a run", ts, map[int]int{0: th + 2*mss, 2: th + 2*mss}, 4},
		{"a sequence gap starts a run", gap, map[int]int{0: th + 2*mss, 2: th + 2*mss}, 4},
		{"a short segment ends a run", short, map[int]int{0: th + mss + 100, 2: th + 2*mss}, 4},
		{"two flows", append(tcpRun(1, 1000, 3, mss), tcpRun(2, 5000, 2, mss)...), map[int]int{0: th + 3*mss, 3: th + 2*mss}, 5},
		{"interleaved flows do not coalesce", []seg{{sport: 1, seq: 0, payload: mss}, {sport: 2, seq: 0, payload: mss}, {sport: 1, seq: mss, payload: mss}}, map[int]int{}, 0},
		{"UDP, a larger datagram starts a run", udp, map[int]int{0: uh + 1200 + 1200 + 500}, 3},
		{"IPv6", v6, map[int]int{0: h6 + 3*mss}, 3},
		{"fragments are left alone", frag, map[int]int{1: th + 2*mss}, 2},
		{"MaxCoalesced bounds a run", long, map[int]int{0: th + 49*mss, 49: th + 11*mss}, 60},
	} {
		t.Run(c.name, func(t *testing.T) {
			bufs := make([][]byte, len(c.segs))
			orig := make([][]byte, len(c.segs))
			for i, s := range c.segs {
				bufs[i] = packet(s, off)
				orig[i] = append([]byte(nil), bufs[i]...)
			}
			before := append([][]byte(nil), bufs...)
			var s Stager
			runs, pkts := s.Stage(bufs, off)
			if runs != len(c.heads) {
				t.Errorf("Stage moved %d heads, want %d", runs, len(c.heads))
			}
			if want := c.inRuns; pkts != want {
				t.Errorf("Stage counted %d packets in runs, want %d", pkts, want)
			}
			for i := range bufs {
				room, head := c.heads[i]
				moved := &bufs[i][0] != &before[i][0]
				if moved != head {
					t.Errorf("packet %d: moved %v, want %v", i, moved, head)
					continue
				}
				if string(bufs[i][off:]) != string(orig[i][off:]) {
					t.Errorf("packet %d: bytes changed", i)
				}
				// The room as wireguard-go measures it (see regionLen).
				if got := cap(bufs[i][off:]) - off; head && got != room {
					t.Errorf("packet %d: room %d, want %d", i, got, room)
				}
				if got := cap(bufs[i][off:]) - off; got > MaxCoalesced {
					t.Errorf("packet %d: room %d beyond an IP packet", i, got)
				}
			}
		})
	}
}

// TestStageReusesArena: in steady state Stage allocates nothing.
func TestStageReusesArena(t *testing.T) {
	const off = 16
	segs := tcpRun(1, 1000, 32, 1328)
	pkts := make([][]byte, len(segs))
	for i, s := range segs {
		pkts[i] = packet(s, off)
	}
	bufs := make([][]byte, len(pkts))
	var s Stager
	allocs := testing.AllocsPerRun(100, func() {
		copy(bufs, pkts)
		if runs, pkts := s.Stage(bufs, off); runs != 1 || pkts != 32 {
			t.Fatal("no run staged")
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per Stage", allocs)
	}
}

// TestStageCoalescesOnDevice writes a run of TCP segments into a real TUN
// device, once as they come (one buffer each, sized for one packet) and once
// staged, and counts the packets the kernel received from it: without room
// to coalesce every segment enters the stack alone.
func TestStageCoalescesOnDevice(t *testing.T) {
	ns := needRoot(t)
	dev := create(t, ns, Options{Name: "braidg0", MTU: 1400, Addresses: []netip.Prefix{netip.MustParsePrefix("100.64.0.1/24")}})
	rx := func() uint64 {
		t.Helper()
		l, err := ns.Netlink().LinkByName("braidg0")
		if err != nil {
			t.Fatal(err)
		}
		return l.Attrs().Statistics.RxPackets
	}
	const n, mss = 10, 1328
	batch := func(seq uint32) [][]byte {
		var bufs [][]byte
		for _, s := range tcpRun(4242, seq, n, mss) {
			bufs = append(bufs, packet(s, Offset))
		}
		return bufs
	}
	var s Stager
	for _, c := range []struct {
		stage bool
		want  uint64
	}{{false, n}, {true, 1}} {
		bufs := batch(1000)
		if c.stage {
			s.Stage(bufs, Offset)
		}
		before := rx()
		if _, err := dev.Write(bufs, Offset); err != nil {
			t.Fatal(err)
		}
		if got := rx() - before; got != c.want {
			t.Errorf("staged %v: the device received %d packets for %d segments, want %d", c.stage, got, n, c.want)
		}
	}
}
