package noise

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func TestLimiterKeys(t *testing.T) {
	k := func(a string, port uint16, lv uint8) limKey {
		return limKey{addr: netip.MustParseAddr(a).As16(), port: port, level: lv}
	}
	cases := []struct {
		src   string
		proof Proof
		want  []limKey
	}{
		{"198.18.0.1:4000", Unproven, []limKey{k("::ffff:198.18.0.1", 0, lvAddr)}},
		{"[::ffff:198.18.0.1]:4000", Unproven, []limKey{k("::ffff:198.18.0.1", 0, lvAddr)}},
		{"198.18.0.1:4000", Proven, []limKey{k("::ffff:198.18.0.1", 4000, lvHost)}},
		{"198.18.0.1:4000", Known, []limKey{k("::ffff:198.18.0.1", 4000, lvHost)}},
		{"[fd00:1:2:3:4:5:6:7%eth0]:4000", Unproven, []limKey{k("fd00:1:2:3::", 0, lv64), k("fd00:1:2::", 0, lv56), k("fd00:1:2::", 0, lv48)}},
		{"[fd00:1:2:3ff:4:5:6:7]:4000", Proven, []limKey{k("fd00:1:2:3ff:4:5:6:7", 4000, lvHost), k("fd00:1:2:3ff::", 0, lv64), k("fd00:1:2:300::", 0, lv56), k("fd00:1:2::", 0, lv48)}},
		{"[fd00:1:2:3:4:5:6:7]:4000", Known, []limKey{k("fd00:1:2:3:4:5:6:7", 4000, lvHost)}},
	}
	for _, c := range cases {
		got := keysFor(nil, ap(c.src), c.proof)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("keysFor(%s, %d) = %v, want %v", c.src, c.proof, got, c.want)
		}
	}
}

func TestLimiterBurstCap(t *testing.T) {
	l := newLimiter(10, 3, 16, 0) // 100 ms per token, burst 3
	a := ap("198.18.0.1:4000")
	for i := 0; i < 3; i++ {
		if !l.allow(a, Unproven, t0) {
			t.Fatalf("burst %d refused", i)
		}
	}
	// A long idle time refills to the burst only, not beyond.
	later := t0.Add(time.Hour)
	for i := 0; i < 3; i++ {
		if !l.allow(a, Unproven, later) {
			t.Fatalf("after idle: %d refused", i)
		}
	}
	if l.allow(a, Unproven, later) {
		t.Fatal("idle time accumulated more than the burst")
	}
	// Time going backwards gives no tokens.
	if l.allow(a, Unproven, t0) {
		t.Fatal("clock going backwards granted a token")
	}
}

// A spoofer that drains the buckets of a client's address with unproven
// initiations does not touch the buckets the client's proven initiations use,
// and proven sources are told apart by port.
func TestLimiterSpoofedSourceSeparate(t *testing.T) {
	l := newLimiter(20, 5, 64, 1000)
	for i := 0; i < 1000; i++ {
		l.allow(netip.AddrPortFrom(netip.MustParseAddr("198.18.1.1"), uint16(1024+i)), Unproven, t0)
		l.allow(netip.AddrPortFrom(netip.MustParseAddr("fd00:1:2:3::1"), uint16(1024+i)), Unproven, t0)
	}
	if l.allow(ap("198.18.1.1:4000"), Unproven, t0) {
		t.Fatal("the spoofed address still had unproven tokens: the test drained nothing")
	}
	for _, src := range []string{"198.18.1.1:4000", "[fd00:1:2:3::1]:4000"} {
		for i := 0; i < 5; i++ {
			if !l.allow(ap(src), Proven, t0) {
				t.Fatalf("%s with a valid mac2: initiation %d of its burst refused after a spoofed flood", src, i)
			}
		}
		if l.allow(ap(src), Proven, t0) {
			t.Fatalf("%s: proven source got more than its burst", src)
		}
	}
	// Another port of the same IPv4 address (another client behind the NAT).
	if !l.allow(ap("198.18.1.1:4001"), Proven, t0) {
		t.Fatal("a proven source's bucket was shared with another port")
	}
	// A known endpoint shares its address-and-port bucket with proven
	// initiations from it: proof does not double the rate.
	if l.allow(ap("198.18.1.1:4000"), Known, t0) {
		t.Fatal("known endpoint got tokens its proven initiations had spent")
	}
}

// count returns how many of n initiations, from the sources src(i) at times
// spread evenly over d, the limiter lets through.
func count(l *limiter, n int, d time.Duration, proof Proof, src func(i int) netip.AddrPort) int {
	ok := 0
	for i := 0; i < n; i++ {
		if l.allow(src(i), proof, t0.Add(d*time.Duration(i)/time.Duration(n))) {
			ok++
		}
	}
	return ok
}

// A /56 of 256 /64s, each sending at the per-source rate, spends the /56's rate
// (twice the per-source rate), not 256 times the per-source rate, proven or not.
func TestLimiterIPv6Hierarchy(t *testing.T) {
	const rate, burst = 20, 5
	in56 := func(i int) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0xab, byte(i), 15: 1}), 50000)
	}
	for _, proof := range []Proof{Unproven, Proven} {
		l := newLimiter(rate, burst, 4096, 1000)
		got := count(l, 256*rate*10, 10*time.Second, proof, func(i int) netip.AddrPort { return in56(i % 256) })
		if want := 2*rate*10 + 2*burst; got > want || got < want-2 {
			t.Errorf("proof %d: a /56 at 256×%d/s for 10 s got %d initiations through, want %d (its /56 bucket)", proof, rate, got, want)
		}
		// A /64 elsewhere in the same /48 still has its own /56.
		if !l.allow(ap("[2001:db8:0:ac00::1]:4000"), proof, t0.Add(10*time.Second)) {
			t.Errorf("proof %d: a neighbouring /56 was refused", proof)
		}
	}
	// A known endpoint inside the flooded /56 is not held back by it.
	l := newLimiter(rate, burst, 4096, 1000)
	count(l, 256*rate, time.Second, Proven, func(i int) netip.AddrPort { return in56(i % 256) })
	if !l.allow(netip.AddrPortFrom(in56(7).Addr(), 40000), Known, t0.Add(time.Second)) {
		t.Fatal("a known endpoint was refused because of its /56 neighbours")
	}
}

// Any /48 spends at most Prefix48Share of the global budget, even when the
// per-source rate is configured high.
func TestLimiter48Cap(t *testing.T) {
	const rate, burst, budget = 200, 5, 1000
	l := newLimiter(rate, burst, 1<<16, budget)
	// 1000 /56s of one /48, each well within its own rates.
	src := func(i int) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 7, byte((i % 1000) >> 8), byte(i % 1000), 15: 1}), 50000)
	}
	got := count(l, 10*budget, 10*time.Second, Proven, src)
	want := int(Prefix48Share*budget)*10 + 4*burst
	if got > want || got < want-2 {
		t.Fatalf("a /48 from 1000 /56s at %d/s for 10 s got %d through, want %d (%.0f %% of the budget)", budget, got, want, 100*Prefix48Share)
	}
}

func TestLimiterTableBounded(t *testing.T) {
	const size = 8                  // 4 unproven buckets
	l := newLimiter(10, 2, size, 0) // refill of a full bucket takes 200 ms
	addr := func(i int) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, 0, byte(i)}), 1)
	}
	for i := 0; i < size/2; i++ {
		if !l.allow(addr(i), Unproven, t0) {
			t.Fatalf("source %d refused", i)
		}
	}
	// Every entry is active (has used a token 0 ms ago): a new source is refused
	// rather than handed someone else's slot.
	if l.allow(addr(100), Unproven, t0.Add(50*time.Millisecond)) {
		t.Fatal("new source admitted into a table full of active sources")
	}
	if n := len(l.unproven.idx); n != size/2 {
		t.Fatalf("table has %d entries, want %d", n, size/2)
	}
	// Source 2 uses its last token: it stays limited while others refill.
	if !l.allow(addr(2), Unproven, t0.Add(60*time.Millisecond)) {
		t.Fatal("source 2 refused its second token")
	}
	// At 100 ms sources 0,1,3 (one token used at t0) have refilled; source 2 has
	// not. A new source evicts one of the refilled ones, never source 2.
	if !l.allow(addr(100), Unproven, t0.Add(100*time.Millisecond)) {
		t.Fatal("new source refused although refilled entries exist")
	}
	if _, ok := l.unproven.idx[keysFor(nil, addr(2), Unproven)[0]]; !ok {
		t.Fatal("the still-limited source was evicted")
	}
	// Source 2 kept its bucket: 0.6 tokens at 60 ms + 0.4 refilled = exactly one.
	if !l.allow(addr(2), Unproven, t0.Add(100*time.Millisecond)) {
		t.Fatal("source 2 lost its refilled token")
	}
	if l.allow(addr(2), Unproven, t0.Add(100*time.Millisecond)) {
		t.Fatal("source 2 got a fresh bucket")
	}
	// Many sources later, the table is still bounded.
	for i := 0; i < 1000; i++ {
		l.allow(netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)}), 1), Unproven, t0.Add(time.Duration(i)*time.Second))
	}
	if l.len() > size {
		t.Fatalf("tables grew to %d entries", l.len())
	}
	checkList(t, &l.unproven)
}

// A flood of unproven sources cannot take the slots of proven ones, and a full
// table never refuses a known client.
func TestLimiterReservedSlots(t *testing.T) {
	const size = 16 // 8 and 8
	l := newLimiter(10, 2, size, 0)
	v4 := func(a, b byte, port uint16) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, a, b}), port)
	}
	for i := 0; i < 1000; i++ { // spoofed, all active
		l.allow(v4(1, byte(i), uint16(i)), Unproven, t0)
	}
	if !l.allow(v4(2, 1, 4000), Proven, t0) {
		t.Fatal("a proven source was refused: unproven sources took its slot")
	}
	// Proven sources fill their half with active buckets.
	for i := 0; i < 100; i++ {
		l.allow(v4(3, byte(i), 4000), Proven, t0)
	}
	if l.allow(v4(4, 1, 4000), Proven, t0) {
		t.Fatal("a new proven source got a slot in a table full of active ones")
	}
	// Known clients get in however full the table is, and do not push each
	// other out while other entries are there to take.
	var known []netip.AddrPort
	for i := 0; i < size/2-1; i++ {
		k := v4(5, byte(i), 5000)
		if !l.allow(k, Known, t0) {
			t.Fatalf("known client %d refused by a full table", i)
		}
		known = append(known, k)
	}
	for _, k := range known {
		if _, ok := l.proven.idx[keysFor(nil, k, Known)[0]]; !ok {
			t.Fatalf("known client %v was evicted by another known client", k)
		}
	}
	if l.len() != size {
		t.Fatalf("tables hold %d entries, want %d", l.len(), size)
	}
	checkList(t, &l.proven)
	checkList(t, &l.unproven)
}

// checkList verifies the LRU list links every entry exactly once.
func checkList(t *testing.T, l *table) {
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
