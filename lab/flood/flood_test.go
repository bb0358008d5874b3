package flood

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/noise"
	"github.com/braid-vpn/braid/wire"
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

func TestPacket6Checksum(t *testing.T) {
	src := netip.MustParseAddrPort("[fd00:1:2:3::9]:4000")
	dst := netip.MustParseAddrPort("[fd00:99::2]:7000")
	p := packet6(make([]byte, 128), src, dst, []byte("abcde"))
	if len(p) != 53 || p[0]>>4 != 6 || p[6] != 17 || binary.BigEndian.Uint16(p[4:]) != 13 {
		t.Fatalf("header % x", p[:48])
	}
	if netip.AddrFrom16([16]byte(p[8:24])) != src.Addr() || netip.AddrFrom16([16]byte(p[24:40])) != dst.Addr() {
		t.Fatal("addresses")
	}
	// A receiver sums the pseudo-header and the whole datagram, checksum
	// included: a correct checksum makes that all ones.
	sum := onesSum(0, p[8:40]) + uint32(len(p)-ip6Len) + 17
	if got := fold(onesSum(sum, p[ip6Len:])); got != 0xffff {
		t.Fatalf("UDP checksum does not verify: sum %#x", got)
	}
}

// Sources stay in their prefix and of its family, and cover it: distinct IPv4
// addresses, every /64 of an IPv6 /56.
func TestSourcesStayInPrefix(t *testing.T) {
	for _, c := range []struct {
		pfx   string
		group int // prefix length of the groups counted
		want  int // at least this many distinct groups in 10000 draws
	}{
		{"198.19.0.0/16", 32, 9000},
		{"2001:db8:0:ab00::/56", 64, 256},
	} {
		pfx := netip.MustParsePrefix(c.pfx)
		r := rand.New(rand.NewPCG(1, 2))
		seen := map[netip.Prefix]bool{}
		for range 10000 {
			s := source(r, pfx)
			if !pfx.Contains(s.Addr()) || s.Addr().Is4() != pfx.Addr().Is4() || s.Port() < 1024 {
				t.Fatalf("source %v outside %v", s, pfx)
			}
			g, _ := s.Addr().Prefix(c.group)
			seen[g] = true
		}
		if len(seen) < c.want {
			t.Fatalf("%v: only %d distinct /%d groups in 10000 draws, want %d", pfx, len(seen), c.group, c.want)
		}
	}
}

// Forged initiations pass the server's mac1 check, differ from each other, and
// carry no mac2.
func TestForgedInitiations(t *testing.T) {
	srv, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Target: netip.MustParseAddrPort("198.18.3.2:7000"), Sources: []netip.Prefix{netip.MustParsePrefix("198.18.1.1/32")}, Forge: srv.Public(), Rate: 1}
	n, _, err := cfg.check()
	if err != nil {
		t.Fatal(err)
	}
	r := noise.NewResponder(srv, noise.ResponderConfig{})
	f := &forger{mac1: noise.NewMAC1Key(srv.Public())}
	rng := rand.New(rand.NewPCG(3, 4))
	seen := map[string]bool{}
	for range 100 {
		b := make([]byte, n)
		f.forge(rng, b)
		if err := r.CheckInitiation(b); err != nil {
			t.Fatalf("forged initiation refused: %v", err)
		}
		if mac1, ok := noise.InitiationMAC1(b); !ok || seen[string(mac1[:])] {
			t.Fatal("two forged initiations share a mac1: the response cache would answer them")
		} else {
			seen[string(mac1[:])] = true
		}
		if [wire.MACLen]byte(b[len(b)-wire.MACLen:]) != ([wire.MACLen]byte{}) {
			t.Fatal("forged initiation carries a mac2")
		}
	}
	cfg.Sources = []netip.Prefix{netip.MustParsePrefix("fd00::/64")}
	if _, _, err := cfg.check(); err == nil {
		t.Fatal("IPv6 sources with an IPv4 target accepted")
	}
}
