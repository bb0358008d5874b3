package noise

import (
	"net/netip"
	"testing"
	"time"
)

func TestLimiterKey(t *testing.T) {
	cases := []struct{ in, want string }{
		{"198.18.0.1", "198.18.0.1"},
		{"::ffff:198.18.0.1", "198.18.0.1"},
		{"fd00:1:2:3:4:5:6:7", "fd00:1:2:3::"},
		{"fd00:1:2:3:ffff::1%eth0", "fd00:1:2:3::"},
	}
	for _, c := range cases {
		if got := limiterKey(netip.MustParseAddr(c.in)); got != netip.MustParseAddr(c.want) {
			t.Errorf("limiterKey(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestLimiterIPv6Prefix(t *testing.T) {
	l := newLimiter(1, 2, 16)
	a := netip.MustParseAddr("fd00:1:2:3::1")
	b := netip.MustParseAddr("fd00:1:2:3::2") // same /64
	c := netip.MustParseAddr("fd00:1:2:4::1") // other /64
	if !l.allow(a, t0) || !l.allow(b, t0) {
		t.Fatal("burst of 2 refused")
	}
	if l.allow(a, t0) || l.allow(b, t0) {
		t.Fatal("the same /64 got more than its burst")
	}
	if !l.allow(c, t0) {
		t.Fatal("another /64 refused")
	}
}

func TestLimiterBurstCap(t *testing.T) {
	l := newLimiter(10, 3, 16) // 100 ms per token, burst 3
	for i := 0; i < 3; i++ {
		if !l.allow(srcA, t0) {
			t.Fatalf("burst %d refused", i)
		}
	}
	// A long idle time refills to the burst only, not beyond.
	later := t0.Add(time.Hour)
	for i := 0; i < 3; i++ {
		if !l.allow(srcA, later) {
			t.Fatalf("after idle: %d refused", i)
		}
	}
	if l.allow(srcA, later) {
		t.Fatal("idle time accumulated more than the burst")
	}
	// Time going backwards gives no tokens.
	if l.allow(srcA, t0) {
		t.Fatal("clock going backwards granted a token")
	}
}

func TestLimiterTableBounded(t *testing.T) {
	const size = 4
	l := newLimiter(10, 2, size) // refill of a full bucket takes 200 ms
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, 0, byte(i)}) }
	for i := 0; i < size; i++ {
		if !l.allow(addr(i), t0) {
			t.Fatalf("source %d refused", i)
		}
	}
	// Every entry is active (has used a token 0 ms ago): a new source is refused
	// rather than handed someone else's slot.
	if l.allow(addr(100), t0.Add(50*time.Millisecond)) {
		t.Fatal("new source admitted into a table full of active sources")
	}
	if l.len() != size {
		t.Fatalf("table has %d entries, want %d", l.len(), size)
	}
	// Source 2 uses its last token: it stays limited while others refill.
	if !l.allow(addr(2), t0.Add(60*time.Millisecond)) {
		t.Fatal("source 2 refused its second token")
	}
	// At 100 ms sources 0,1,3 (one token used at t0) have refilled; source 2 has
	// not. A new source evicts one of the refilled ones, never source 2.
	if !l.allow(addr(100), t0.Add(100*time.Millisecond)) {
		t.Fatal("new source refused although refilled entries exist")
	}
	if l.len() != size {
		t.Fatalf("table has %d entries, want %d", l.len(), size)
	}
	if _, ok := l.idx[addr(2)]; !ok {
		t.Fatal("the still-limited source was evicted")
	}
	// Source 2 kept its bucket: 0.6 tokens at 60 ms + 0.4 refilled = exactly one.
	if !l.allow(addr(2), t0.Add(100*time.Millisecond)) {
		t.Fatal("source 2 lost its refilled token")
	}
	if l.allow(addr(2), t0.Add(100*time.Millisecond)) {
		t.Fatal("source 2 got a fresh bucket")
	}
	// Many sources later, the table is still bounded.
	for i := 0; i < 1000; i++ {
		l.allow(netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)}), t0.Add(time.Duration(i)*time.Second))
	}
	if l.len() > size {
		t.Fatalf("table grew to %d entries", l.len())
	}
	checkList(t, l)
}

// checkList verifies the LRU list links every entry exactly once.
func checkList(t *testing.T, l *limiter) {
	t.Helper()
	seen := 0
	prev := int32(-1)
	for i := l.head; i >= 0; i = l.ents[i].next {
		if l.ents[i].prev != prev {
			t.Fatalf("entry %d: prev %d, want %d", i, l.ents[i].prev, prev)
		}
		if j, ok := l.idx[l.ents[i].key]; !ok || j != i {
			t.Fatalf("entry %d not indexed", i)
		}
		prev = i
		if seen++; seen > len(l.ents) {
			t.Fatal("LRU list has a cycle")
		}
	}
	if l.tail != prev || seen != len(l.idx) {
		t.Fatalf("list of %d entries (tail %d, last %d), index of %d", seen, l.tail, prev, len(l.idx))
	}
}
