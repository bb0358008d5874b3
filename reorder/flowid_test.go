package reorder

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// ip4 builds an IPv4 packet (20-byte header plus opts) with a transport header
// starting with the two ports.
func ip4(src, dst string, proto byte, sport, dport uint16, opts int) []byte {
	ihl := 20 + opts
	p := make([]byte, ihl+20)
	p[0] = 0x40 | byte(ihl/4)
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	p[8] = 64
	p[9] = proto
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(p[12:], s[:])
	copy(p[16:], d[:])
	binary.BigEndian.PutUint16(p[ihl:], sport)
	binary.BigEndian.PutUint16(p[ihl+2:], dport)
	return p
}

// ip6 builds an IPv6 packet with the given extension headers (each 8 bytes, next
// header chained) before the transport header.
func ip6(src, dst string, proto byte, sport, dport uint16, ext ...byte) []byte {
	p := make([]byte, 40+8*len(ext)+20)
	p[0] = 0x60
	binary.BigEndian.PutUint16(p[4:], uint16(len(p)-40))
	p[7] = 64
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	copy(p[8:], s[:])
	copy(p[24:], d[:])
	nh := &p[6]
	off := 40
	for _, e := range ext {
		*nh = e
		nh = &p[off]
		p[off+1] = 0 // length (8 bytes) for options/routing; reserved for fragment
		off += 8
	}
	*nh = proto
	binary.BigEndian.PutUint16(p[off:], sport)
	binary.BigEndian.PutUint16(p[off+2:], dport)
	return p
}

func TestFlowIDSameTupleSameID(t *testing.T) {
	a := ip4("100.64.0.2", "100.64.0.1", 6, 40000, 443, 0)
	b := ip4("100.64.0.2", "100.64.0.1", 6, 40000, 443, 0)
	b[8] = 3                                               // TTL differs
	b[len(b)-1] = 0xff                                     // payload differs
	c := ip4("100.64.0.2", "100.64.0.1", 6, 40000, 443, 8) // with IP options
	for _, flows := range []int{2, 16, 4096, 65536, 1000} {
		id := FlowID(a, flows)
		if int(id) >= flows {
			t.Fatalf("id %d out of range %d", id, flows)
		}
		if FlowID(b, flows) != id || FlowID(c, flows) != id {
			t.Errorf("flows=%d: same 5-tuple, different ids", flows)
		}
		// Reverse direction: same bucket.
		if r := FlowID(ip4("100.64.0.1", "100.64.0.2", 6, 443, 40000, 0), flows); r != id {
			t.Errorf("flows=%d: reverse direction %d != %d", flows, r, id)
		}
	}
	v6 := ip6("fd00::2", "fd00::1", 17, 5000, 53)
	hop := ip6("fd00::2", "fd00::1", 17, 5000, 53, 0, 60) // hop-by-hop, dest opts
	if FlowID(v6, 4096) != FlowID(hop, 4096) {
		t.Error("IPv6 extension headers changed the flow")
	}
	if FlowID(v6, 4096) != FlowID(ip6("fd00::1", "fd00::2", 17, 53, 5000), 4096) {
		t.Error("IPv6 reverse direction differs")
	}
}

// distinct counts the different ids among n tuples that differ only in one field.
func distinct(n int, mk func(i int) []byte) int {
	seen := map[uint16]bool{}
	for i := 0; i < n; i++ {
		seen[FlowID(mk(i), 4096)] = true
	}
	return len(seen)
}

func TestFlowIDDifferentPortsUsuallyDiffer(t *testing.T) {
	// 1000 tuples into 4096 buckets: a uniform hash gives 4096(1-(1-1/4096)^1000) ≈ 887
	// distinct ids (sd ≈ 9). 840 is 5 sd below.
	const n, atLeast = 1000, 840
	cases := map[string]func(i int) []byte{
		"v4 sport": func(i int) []byte { return ip4("100.64.0.2", "100.64.0.1", 6, uint16(30000+i), 443, 0) },
		"v4 dport": func(i int) []byte { return ip4("100.64.0.2", "100.64.0.1", 17, 5353, uint16(i), 0) },
		"v4 addr": func(i int) []byte {
			return ip4(netip.AddrFrom4([4]byte{100, 64, byte(i >> 8), byte(i)}).String(), "100.64.0.1", 1, 0, 0, 0)
		},
		"v6 sport": func(i int) []byte { return ip6("fd00::2", "fd00::1", 6, uint16(30000+i), 443) },
		"v6 addr": func(i int) []byte {
			a := netip.MustParseAddr("fd00::").As16()
			a[15], a[14] = byte(i), byte(i>>8)
			return ip6(netip.AddrFrom16(a).String(), "fd00::1", 17, 1, 2)
		},
	}
	for name, mk := range cases {
		if d := distinct(n, mk); d < atLeast {
			t.Errorf("%s: %d distinct ids of %d tuples, want ≥ %d", name, d, n, atLeast)
		}
	}
	// Protocol is part of the key.
	tcp := ip4("100.64.0.2", "100.64.0.1", 6, 1000, 2000, 0)
	udp := ip4("100.64.0.2", "100.64.0.1", 17, 1000, 2000, 0)
	if FlowID(tcp, 65536) == FlowID(udp, 65536) {
		t.Error("TCP and UDP with the same ports share an id (1 in 65536 chance)")
	}
}

func TestFlowIDFragmentsAndOtherProtocols(t *testing.T) {
	// IPv4: first fragment (MF) carries ports, later ones (offset) carry payload in
	// their place; all must map like each other.
	first := ip4("100.64.0.2", "100.64.0.1", 17, 1111, 2222, 0)
	binary.BigEndian.PutUint16(first[6:], 0x2000) // MF
	later := ip4("100.64.0.2", "100.64.0.1", 17, 0xdead, 0xbeef, 0)
	binary.BigEndian.PutUint16(later[6:], 185) // offset 1480, last fragment
	if FlowID(first, 4096) != FlowID(later, 4096) {
		t.Error("IPv4 fragments of one datagram in different flows")
	}
	// ICMP: addresses and protocol only; the bytes where ports would be are ignored.
	icmpA := ip4("100.64.0.2", "100.64.0.1", 1, 0x0800, 1, 0)
	icmpB := ip4("100.64.0.2", "100.64.0.1", 1, 0x0000, 2, 0)
	if FlowID(icmpA, 4096) != FlowID(icmpB, 4096) {
		t.Error("ICMP packets of one address pair in different flows")
	}
	// IPv6 fragments: ports ignored once a fragment header is present.
	f1 := ip6("fd00::2", "fd00::1", 17, 1111, 2222, 44)
	f2 := ip6("fd00::2", "fd00::1", 17, 9, 9, 44)
	if FlowID(f1, 4096) != FlowID(f2, 4096) {
		t.Error("IPv6 fragments in different flows")
	}
}

func TestFlowIDGarbage(t *testing.T) {
	inputs := [][]byte{nil, {}, {0x45}, make([]byte, 19), make([]byte, 39), {0x60, 0, 0}, {0xff, 0xff, 0xff, 0xff}}
	v4 := ip4("1.2.3.4", "5.6.7.8", 6, 1, 2, 0)
	v4[0] = 0x4f // IHL 60 > packet: no ports, no panic
	inputs = append(inputs, v4, v4[:20], v4[:22])
	v6 := ip6("fd00::2", "fd00::1", 6, 1, 2, 0, 43, 44, 51)
	for i := 40; i < len(v6); i++ {
		inputs = append(inputs, v6[:i])
	}
	for _, in := range inputs {
		for _, flows := range []int{-1, 0, 1, 7, 4096, 1 << 20} {
			id := FlowID(in, flows)
			if flows > 1 && int(id) >= min(flows, 1<<16) {
				t.Fatalf("FlowID(%x, %d) = %d out of range", in, flows, id)
			}
			if flows <= 1 && id != 0 {
				t.Fatalf("FlowID with %d flows = %d", flows, id)
			}
		}
	}
	if FlowID([]byte{0x12, 0x34}, 4096) != 0 || FlowID(make([]byte, 100), 4096) != 0 {
		t.Error("non-IP input not mapped to 0")
	}
}

func TestFlowIDNoAlloc(t *testing.T) {
	p := ip6("fd00::2", "fd00::1", 6, 1, 2, 0)
	if a := testing.AllocsPerRun(100, func() { FlowID(p, 4096) }); a != 0 {
		t.Fatalf("%v allocs", a)
	}
}

func FuzzFlowID(f *testing.F) {
	f.Add(ip4("100.64.0.2", "100.64.0.1", 6, 40000, 443, 0), 4096)
	f.Add(ip4("100.64.0.2", "100.64.0.1", 17, 1, 2, 12), 7)
	f.Add(ip6("fd00::2", "fd00::1", 17, 5000, 53, 0, 44), 65536)
	f.Add([]byte{0x60}, 2)
	f.Fuzz(func(t *testing.T, pkt []byte, flows int) {
		id := FlowID(pkt, flows)
		if flows > 1 && int(id) >= min(flows, 1<<16) || flows <= 1 && id != 0 {
			t.Fatalf("FlowID(.., %d) = %d", flows, id)
		}
		if FlowID(pkt, flows) != id {
			t.Fatal("not deterministic")
		}
		// Trailing bytes (a longer buffer) must not make it panic either.
		FlowID(append(pkt[:len(pkt):len(pkt)], 0, 0, 0, 0), flows)
	})
}

func BenchmarkFlowID(b *testing.B) {
	p4 := ip4("100.64.0.2", "100.64.0.1", 6, 40000, 443, 0)
	p6 := ip6("fd00::2", "fd00::1", 6, 1, 2, 0)
	b.ReportAllocs()
	for b.Loop() {
		FlowID(p4, 4096)
		FlowID(p6, 4096)
	}
}
