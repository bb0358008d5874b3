package flood

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
)

func TestPacketLayout(t *testing.T) {
	src := netip.MustParseAddrPort("198.19.1.2:4000")
	dst := netip.MustParseAddrPort("198.18.3.2:7000")
	p := packet(make([]byte, 64), src, dst, []byte("abc"))
	if len(p) != 31 || p[0] != 0x45 || p[9] != 17 || binary.BigEndian.Uint16(p[2:]) != 31 {
		t.Fatalf("header % x", p[:28])
	}
	if netip.AddrFrom4([4]byte(p[12:16])) != src.Addr() || netip.AddrFrom4([4]byte(p[16:20])) != dst.Addr() {
		t.Fatal("addresses")
	}
	if binary.BigEndian.Uint16(p[20:]) != 4000 || binary.BigEndian.Uint16(p[22:]) != 7000 || binary.BigEndian.Uint16(p[24:]) != 11 || string(p[28:]) != "abc" {
		t.Fatal("udp header or payload")
	}
}

func TestSourcesStayInPrefix(t *testing.T) {
	pfx := netip.MustParsePrefix("198.19.0.0/16")
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[netip.Addr]bool{}
	for range 10000 {
		s := source(r, pfx)
		if !pfx.Contains(s.Addr()) || s.Port() < 1024 {
			t.Fatalf("source %v outside %v", s, pfx)
		}
		seen[s.Addr()] = true
	}
	if len(seen) < 9000 {
		t.Fatalf("only %d distinct sources in 10000", len(seen))
	}
}
