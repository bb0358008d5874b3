package mss

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// checksum computes the TCP checksum of seg over the pseudo-header from scratch.
func checksum(src, dst netip.Addr, seg []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(src.AsSlice())
	add(dst.AsSlice())
	sum += protoTCP + uint32(len(seg))
	add(seg)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// syn builds a TCP SYN with the given options after the IPv4 or IPv6 header and a
// correct checksum.
func syn(v6 bool, flags byte, opts []byte) []byte {
	src, dst := netip.MustParseAddr("100.64.0.2"), netip.MustParseAddr("100.64.0.1")
	hl := ipv4MinHdr
	if v6 {
		src, dst = netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fd00::1")
		hl = ipv6Hdr
	}
	tcpLen := tcpMinHdr + len(opts)
	p := make([]byte, hl+tcpLen)
	if v6 {
		p[0] = 0x60
		binary.BigEndian.PutUint16(p[4:], uint16(tcpLen))
		p[6] = protoTCP
		copy(p[8:], src.AsSlice())
		copy(p[24:], dst.AsSlice())
	} else {
		p[0] = 0x45
		binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
		p[9] = protoTCP
		copy(p[12:], src.AsSlice())
		copy(p[16:], dst.AsSlice())
	}
	tcp := p[hl:]
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 80)
	tcp[12] = byte(tcpLen/4) << 4
	tcp[13] = flags
	copy(tcp[tcpMinHdr:], opts)
	binary.BigEndian.PutUint16(tcp[16:], checksum(src, dst, tcp))
	return p
}

func mssOf(p []byte, hl int, at int) uint16 { return binary.BigEndian.Uint16(p[hl+tcpMinHdr+at:]) }

func TestClamp(t *testing.T) {
	// Linux's SYN options: MSS, SACK permitted, timestamps, NOP, window scale.
	opts := []byte{2, 4, 0x05, 0xb4, 4, 2, 8, 10, 1, 2, 3, 4, 0, 0, 0, 0, 1, 3, 3, 7}
	for _, v6 := range []bool{false, true} {
		hl := ipv4MinHdr
		src, dst := netip.MustParseAddr("100.64.0.2"), netip.MustParseAddr("100.64.0.1")
		if v6 {
			hl = ipv6Hdr
			src, dst = netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fd00::1")
		}
		p := syn(v6, tcpSYN, opts)
		if !Clamp(p, 1200) {
			t.Fatalf("v6=%v: SYN with MSS 1460 not clamped to 1200", v6)
		}
		if got := mssOf(p, hl, 2); got != 1200 {
			t.Fatalf("v6=%v: MSS %d", v6, got)
		}
		if c := checksum(src, dst, p[hl:]); c != 0 {
			t.Fatalf("v6=%v: checksum does not verify after clamping (residue %#x)", v6, c)
		}
		if Clamp(p, 1300) || mssOf(p, hl, 2) != 1200 {
			t.Fatalf("v6=%v: raised an MSS", v6)
		}
		// SYN-ACK too.
		if p := syn(v6, tcpSYN|0x10, opts); !Clamp(p, 1000) || mssOf(p, hl, 2) != 1000 {
			t.Fatalf("v6=%v: SYN-ACK not clamped", v6)
		}
	}
	// MSS after NOPs.
	p := syn(false, tcpSYN, []byte{1, 1, 2, 4, 0x05, 0xb4, 1, 1})
	if !Clamp(p, 1300) || mssOf(p, 20, 4) != 1300 {
		t.Fatal("MSS after NOPs")
	}
}

func TestClampLeavesOthersAlone(t *testing.T) {
	opts := []byte{2, 4, 0x05, 0xb4}
	cases := map[string][]byte{
		"not a SYN":        syn(false, 0x10, opts),
		"no MSS option":    syn(false, tcpSYN, []byte{1, 1, 1, 1}),
		"end of options":   syn(false, tcpSYN, []byte{0, 2, 4, 5, 0xb4, 0, 0, 0}),
		"truncated option": syn(false, tcpSYN, []byte{1, 1, 1, 2}),
		"zero-length":      syn(false, tcpSYN, []byte{3, 0, 2, 4}),
	}
	udp := syn(false, tcpSYN, opts)
	udp[9] = 17
	cases["UDP"] = udp
	frag := syn(false, tcpSYN, opts)
	binary.BigEndian.PutUint16(frag[6:], 5)
	cases["fragment"] = frag
	cases["short"] = syn(false, tcpSYN, opts)[:30]
	for name, p := range cases {
		before := string(p)
		if Clamp(p, 1000) || string(p) != before {
			t.Errorf("%s: changed", name)
		}
	}
	if Clamp(nil, 1000) || Clamp([]byte{0x45}, 1000) {
		t.Error("tiny packets")
	}
}

func TestFor(t *testing.T) {
	if For(1380, false) != 1340 || For(1380, true) != 1320 || For(40, false) != 0 {
		t.Fatal(For(1380, false), For(1380, true))
	}
}

func TestClampAllocs(t *testing.T) {
	p := syn(false, tcpSYN, []byte{2, 4, 0x05, 0xb4})
	if n := testing.AllocsPerRun(100, func() {
		binary.BigEndian.PutUint16(p[20+22:], 1460)
		Clamp(p, 1200)
	}); n != 0 {
		t.Fatalf("%v allocations per Clamp", n)
	}
}

func FuzzClamp(f *testing.F) {
	f.Add(syn(false, tcpSYN, []byte{2, 4, 0x05, 0xb4}), uint16(1200))
	f.Add(syn(true, tcpSYN, []byte{1, 2, 4, 0x05, 0xb4, 0, 0, 0}), uint16(1000))
	f.Fuzz(func(t *testing.T, p []byte, max uint16) {
		before := append([]byte(nil), p...)
		if !Clamp(p, max) {
			if string(p) != string(before) {
				t.Fatal("changed a packet it reports as unchanged")
			}
			return
		}
		// Only two bytes of MSS and two of checksum may differ.
		diff := 0
		for i := range p {
			if p[i] != before[i] {
				diff++
			}
		}
		if diff > 4 {
			t.Fatalf("%d bytes changed", diff)
		}
	})
}
