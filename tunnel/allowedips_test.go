package tunnel

import (
	"net/netip"
	"testing"
)

func TestAllowedIPsLongestPrefix(t *testing.T) {
	a, b, c := &peer{name: "a"}, &peer{name: "b"}, &peer{name: "c"}
	a.allowed = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/24"), netip.MustParsePrefix("fd00::/64")}
	b.allowed = []netip.Prefix{netip.MustParsePrefix("100.64.0.7/32")}
	c.allowed = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}
	t4 := buildAllowedIPs([]*peer{a, b, c})
	cases := []struct {
		addr string
		want *peer
	}{
		{"100.64.0.7", b},
		{"100.64.0.8", a},
		{"100.64.1.1", c},
		{"8.8.8.8", c},
		{"fd00::1", a},
		{"fd01::1", nil},
		{"::ffff:100.64.0.7", b}, // v4-mapped is the v4 address
	}
	for _, tc := range cases {
		if got := t4.lookup(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("lookup(%s) = %v, want %v", tc.addr, name(got), name(tc.want))
		}
	}
}

// TestLastLookup: the kept answer serves the same address of the same table
// only; another address, or a rebuilt table (a reload moved 100.64.0.7 to
// another peer), is looked up afresh.
func TestLastLookup(t *testing.T) {
	a, b := &peer{name: "a"}, &peer{name: "b"}
	a.allowed = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/24")}
	t1 := buildAllowedIPs([]*peer{a})
	var c lastLookup
	x, y := netip.MustParseAddr("100.64.0.7"), netip.MustParseAddr("100.64.1.1")
	for _, q := range []struct {
		table *allowedIPs
		addr  netip.Addr
		want  *peer
	}{{t1, x, a}, {t1, x, a}, {t1, y, nil}, {t1, x, a}} {
		if got := c.lookup(q.table, q.addr); got != q.want {
			t.Fatalf("lookup(%v) = %s, want %s", q.addr, name(got), name(q.want))
		}
	}
	b.allowed = []netip.Prefix{netip.MustParsePrefix("100.64.0.7/32")}
	t2 := buildAllowedIPs([]*peer{a, b})
	if got := c.lookup(t2, x); got != b {
		t.Fatalf("after the reload lookup(%v) = %s, want b (the old table's answer was kept)", x, name(got))
	}
}

func name(p *peer) string {
	if p == nil {
		return "<nil>"
	}
	return p.name
}

func TestInnerAddrs(t *testing.T) {
	s, d := netip.MustParseAddr("100.64.0.2"), netip.MustParseAddr("100.64.0.1")
	p := udp4(s, d, 1, 2, []byte("x"))
	if got, ok := innerSrc(p); !ok || got != s {
		t.Fatalf("src %v %v", got, ok)
	}
	if got, ok := innerDst(p); !ok || got != d {
		t.Fatalf("dst %v %v", got, ok)
	}
	s6, d6 := netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fd00::1")
	p6 := udp6(s6, d6, 1, 2, nil)
	if got, ok := innerSrc(p6); !ok || got != s6 {
		t.Fatalf("src6 %v %v", got, ok)
	}
	if got, ok := innerDst(p6); !ok || got != d6 {
		t.Fatalf("dst6 %v %v", got, ok)
	}
	for _, bad := range [][]byte{nil, {0x45}, {0x60, 0}, {0x10, 0, 0, 0}} {
		if _, ok := innerDst(bad); ok {
			t.Errorf("innerDst(%x) accepted", bad)
		}
	}
}
