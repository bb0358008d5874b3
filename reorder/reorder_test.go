package reorder

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

const ms = time.Millisecond

func fixed(hold time.Duration) Config {
	return Config{Mode: Fixed, Hold: hold, MaxHeld: 64, Flows: 16, DedupWindow: 64}
}

// push pushes seq on flow and checks the delivered items and dup flag.
func push(t *testing.T, b *Buffer[uint32], flow uint16, seq uint32, now time.Time, want []uint32, wantDup bool) {
	t.Helper()
	got, dup := b.Push(flow, seq, seq, now, nil)
	if dup != wantDup || !slices.Equal(got, want) {
		t.Fatalf("Push(flow %d, seq %d) = %v dup=%v, want %v dup=%v", flow, seq, got, dup, want, wantDup)
	}
}

func expire(t *testing.T, b *Buffer[uint32], now time.Time, want []uint32) {
	t.Helper()
	if got := b.Expire(now, nil); !slices.Equal(got, want) {
		t.Fatalf("Expire(%v) = %v, want %v", now.Sub(t0), got, want)
	}
}

func wantStats(t *testing.T, b *Buffer[uint32], want Stats) {
	t.Helper()
	if got := b.Stats(); got != want {
		t.Fatalf("Stats:\n got %+v\nwant %+v", got, want)
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{Off, Fixed, Adaptive} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseMode("sometimes"); err == nil {
		t.Error("bad mode accepted")
	}
}

func TestInOrderPassthrough(t *testing.T) {
	for _, m := range []Mode{Off, Fixed, Adaptive} {
		cfg := fixed(50 * ms)
		cfg.Mode = m
		b := New[uint32](cfg)
		for s := uint32(1); s <= 100; s++ {
			push(t, b, 3, s, at(time.Duration(s)*ms), []uint32{s}, false)
		}
		wantStats(t, b, Stats{InOrder: 100})
		if _, ok := b.NextDeadline(); ok {
			t.Errorf("%v: deadline with nothing held", m)
		}
	}
}

func TestSingleGapFilled(t *testing.T) {
	b := New[uint32](fixed(50 * ms))
	push(t, b, 0, 1, at(0), []uint32{1}, false)
	push(t, b, 0, 3, at(1*ms), nil, false)
	push(t, b, 0, 4, at(2*ms), nil, false)
	if d, ok := b.NextDeadline(); !ok || !d.Equal(at(51*ms)) {
		t.Fatalf("NextDeadline = %v %v, want +51ms (3 arrived at +1ms)", d.Sub(t0), ok)
	}
	wantStats(t, b, Stats{InOrder: 1, Held: 2})
	push(t, b, 0, 2, at(5*ms), []uint32{2, 3, 4}, false)
	wantStats(t, b, Stats{InOrder: 2, Reordered: 2})
	if _, ok := b.NextDeadline(); ok {
		t.Error("deadline left after the gap was filled")
	}
	push(t, b, 0, 5, at(6*ms), []uint32{5}, false)
}

func TestHeldOutOfOrderAreSorted(t *testing.T) {
	// Arrivals 1, 6, 3, 5, 4 (inserted at tail, head, middle from both ends), then 2.
	b := New[uint32](fixed(50 * ms))
	push(t, b, 0, 1, at(0), []uint32{1}, false)
	for _, s := range []uint32{6, 3, 9, 5, 4, 8} {
		push(t, b, 0, s, at(1*ms), nil, false)
	}
	push(t, b, 0, 2, at(2*ms), []uint32{2, 3, 4, 5, 6}, false)
	push(t, b, 0, 7, at(3*ms), []uint32{7, 8, 9}, false)
}

func TestGapTimeoutThenLateArrival(t *testing.T) {
	b := New[uint32](fixed(50 * ms))
	push(t, b, 0, 1, at(0), []uint32{1}, false)
	push(t, b, 0, 3, at(1*ms), nil, false)
	push(t, b, 0, 4, at(2*ms), nil, false)
	expire(t, b, at(50*ms), nil) // 3 arrived at +1ms: deadline +51ms
	expire(t, b, at(51*ms), []uint32{3, 4})
	wantStats(t, b, Stats{InOrder: 1, Reordered: 2, Timeouts: 1, Skipped: 1})
	// 2 was given up but turns up: delivered once, then its copies are dropped.
	push(t, b, 0, 2, at(60*ms), []uint32{2}, false)
	push(t, b, 0, 2, at(61*ms), nil, true)
	push(t, b, 0, 3, at(62*ms), nil, true)
	push(t, b, 0, 5, at(63*ms), []uint32{5}, false)
	wantStats(t, b, Stats{InOrder: 2, Reordered: 2, Timeouts: 1, Skipped: 1, Late: 1, Duplicates: 2})
}

func TestDuplicatesDropped(t *testing.T) {
	for _, m := range []Mode{Off, Fixed, Adaptive} {
		cfg := fixed(50 * ms)
		cfg.Mode = m
		b := New[uint32](cfg)
		push(t, b, 0, 1, at(0), []uint32{1}, false)
		push(t, b, 0, 1, at(0), nil, true) // copy of a delivered packet
		if m == Off {
			push(t, b, 0, 3, at(0), []uint32{3}, false)
			push(t, b, 0, 3, at(0), nil, true)
			push(t, b, 0, 2, at(0), []uint32{2}, false)
			push(t, b, 0, 2, at(0), nil, true)
			wantStats(t, b, Stats{InOrder: 2, Late: 1, Skipped: 1, Duplicates: 3})
			continue
		}
		push(t, b, 0, 3, at(0), nil, false)
		push(t, b, 0, 3, at(0), nil, true) // copy of a held packet
		push(t, b, 0, 2, at(0), []uint32{2, 3}, false)
		push(t, b, 0, 2, at(0), nil, true)
		push(t, b, 0, 3, at(0), nil, true)
		wantStats(t, b, Stats{InOrder: 2, Reordered: 1, Duplicates: 4})
	}
}

func TestFlowsIndependent(t *testing.T) {
	b := New[uint32](fixed(50 * ms))
	push(t, b, 1, 1, at(0), []uint32{1}, false)
	push(t, b, 1, 3, at(0), nil, false) // flow 1 now waits for 2
	for s := uint32(1); s <= 5; s++ {
		push(t, b, 2, s, at(ms), []uint32{s}, false) // flow 2 is not held back
	}
	push(t, b, 2, 7, at(2*ms), nil, false)
	// Flow 1's timeout releases flow 1 only; flow 2's gap is younger.
	expire(t, b, at(50*ms), []uint32{3})
	expire(t, b, at(51*ms), nil)
	expire(t, b, at(52*ms), []uint32{7})
	// Flow ids are taken modulo Flows (16): flow 17 is flow 1.
	push(t, b, 17, 4, at(60*ms), []uint32{4}, false)
}

func TestOverflowReleasesOldestGap(t *testing.T) {
	b := New[string](Config{Mode: Fixed, Hold: time.Second, MaxHeld: 4, Flows: 8})
	p := func(flow uint16, seq uint32, now time.Time, want ...string) {
		t.Helper()
		got, dup := b.Push(flow, seq, fmt.Sprintf("%c%d", 'A'+flow, seq), now, nil)
		if dup || !slices.Equal(got, want) {
			t.Fatalf("Push(%d,%d) = %q dup=%v, want %q", flow, seq, got, dup, want)
		}
	}
	p(0, 1, at(0), "A1")
	p(0, 3, at(0)) // A waits for 2 since +0
	p(0, 4, at(0))
	p(1, 1, at(1*ms), "B1")
	p(1, 3, at(2*ms)) // B waits for 2 since +2ms
	p(1, 4, at(2*ms)) // pool (4) full
	p(1, 6, at(3*ms), "A3", "A4")
	p(2, 1, at(4*ms), "C1") // in order: needs no slot
	p(2, 3, at(4*ms))       // B3 B4 B6 C3: full again
	p(2, 4, at(4*ms), "B3", "B4")
	st := b.Stats()
	if st.Overflows != 2 || st.Held != 3 || st.Timeouts != 0 {
		t.Fatalf("stats %+v, want 2 overflows, 3 held", st)
	}
	// B's next gap (5) is timed from B6's arrival (+3ms), C's from +4ms.
	if d, _ := b.NextDeadline(); !d.Equal(at(time.Second + 3*ms)) {
		t.Fatalf("NextDeadline %v", d.Sub(t0))
	}
	if got := b.Flush(nil); !slices.Equal(got, []string{"B6", "C3", "C4"}) {
		t.Fatalf("Flush = %q", got)
	}
}

func TestSeqWrapAround(t *testing.T) {
	b := New[uint32](fixed(50 * ms))
	push(t, b, 0, 0xFFFFFFFD, at(0), []uint32{0xFFFFFFFD}, false)
	push(t, b, 0, 0, at(0), nil, false)          // 3 ahead, across the wrap
	push(t, b, 0, 0xFFFFFFFF, at(0), nil, false) // sorts before 0
	push(t, b, 0, 0xFFFFFFFE, at(0), []uint32{0xFFFFFFFE, 0xFFFFFFFF, 0}, false)
	push(t, b, 0, 2, at(1*ms), nil, false)
	expire(t, b, at(51*ms), []uint32{2})
	push(t, b, 0, 1, at(52*ms), []uint32{1}, false) // late, once
	push(t, b, 0, 1, at(52*ms), nil, true)
	push(t, b, 0, 0xFFFFFFFF, at(52*ms), nil, true) // behind across the wrap: copy
	push(t, b, 0, 0, at(52*ms), nil, true)
	push(t, b, 0, 3, at(52*ms), []uint32{3}, false)
}

func TestMultipleGapsDoNotAddUp(t *testing.T) {
	b := New[uint32](fixed(50 * ms))
	push(t, b, 0, 1, at(0), []uint32{1}, false)
	push(t, b, 0, 5, at(0), nil, false)
	push(t, b, 0, 3, at(10*ms), nil, false)
	// Gap 2 timed from +0; once given up, gap 4 is timed from 5's arrival (+0) too.
	expire(t, b, at(50*ms), []uint32{3, 5})
	if st := b.Stats(); st.Timeouts != 2 || st.Skipped != 2 {
		t.Fatalf("stats %+v", st)
	}

	b = New[uint32](fixed(50 * ms))
	push(t, b, 0, 1, at(0), []uint32{1}, false)
	push(t, b, 0, 3, at(0), nil, false)
	push(t, b, 0, 5, at(30*ms), nil, false)
	expire(t, b, at(50*ms), []uint32{3})
	if d, _ := b.NextDeadline(); !d.Equal(at(80 * ms)) {
		t.Fatalf("second gap deadline %v, want +80ms", d.Sub(t0))
	}
	expire(t, b, at(79*ms), nil)
	expire(t, b, at(80*ms), []uint32{5})
}

func TestPushExpiresItsOwnFlow(t *testing.T) {
	b := New[uint32](fixed(50 * ms))
	push(t, b, 0, 1, at(0), []uint32{1}, false)
	push(t, b, 0, 3, at(0), nil, false)
	// No Expire call: the next packet of the flow, past the deadline, releases 3.
	push(t, b, 0, 10, at(50*ms), []uint32{3}, false)
	if st := b.Stats(); st.Timeouts != 1 || st.Held != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestAdaptiveHold(t *testing.T) {
	b := New[uint32](Config{Mode: Adaptive, Hold: 100 * ms, MinHold: 5 * ms})
	if b.Hold() != 100*ms {
		t.Fatalf("initial adaptive hold %v, want the upper bound", b.Hold())
	}
	for _, c := range []struct{ set, want time.Duration }{{ms, 5 * ms}, {time.Second, 100 * ms}, {20 * ms, 20 * ms}} {
		b.SetHold(c.set)
		if b.Hold() != c.want {
			t.Errorf("SetHold(%v) → %v, want %v", c.set, b.Hold(), c.want)
		}
	}
	push(t, b, 0, 1, at(0), []uint32{1}, false)
	push(t, b, 0, 3, at(0), nil, false)
	if d, _ := b.NextDeadline(); !d.Equal(at(20 * ms)) {
		t.Fatalf("deadline %v, want +20ms", d.Sub(t0))
	}
	b.SetHold(10 * ms) // applies to gaps already waiting
	expire(t, b, at(10*ms), []uint32{3})

	f := New[uint32](fixed(50 * ms))
	f.SetHold(5 * ms)
	if f.Hold() != 50*ms {
		t.Errorf("fixed mode changed by SetHold: %v", f.Hold())
	}
}

func TestFlush(t *testing.T) {
	b := New[uint32](fixed(50 * ms))
	push(t, b, 0, 1, at(0), []uint32{1}, false)
	for _, s := range []uint32{6, 3, 4} {
		push(t, b, 0, s, at(0), nil, false)
	}
	push(t, b, 1, 1, at(0), []uint32{1}, false)
	push(t, b, 1, 5, at(0), nil, false)
	got := b.Flush(nil)
	var a []uint32
	for _, v := range got {
		if v != 5 {
			a = append(a, v)
		}
	}
	if len(got) != 4 || !slices.Equal(a, []uint32{3, 4, 6}) {
		t.Fatalf("Flush = %v, want flow 0's 3 4 6 in order plus flow 1's 5", got)
	}
	if st := b.Stats(); st.Held != 0 || st.Timeouts != 0 {
		t.Fatalf("stats after flush %+v", st)
	}
	if _, ok := b.NextDeadline(); ok {
		t.Fatal("deadline after flush")
	}
	push(t, b, 0, 2, at(ms), []uint32{2}, false) // late
	push(t, b, 0, 4, at(ms), nil, true)
	push(t, b, 0, 7, at(ms), []uint32{7}, false)
}

func TestStaleBeyondDedupWindow(t *testing.T) {
	b := New[uint32](fixed(50 * ms)) // window 64
	for s := uint32(1); s <= 200; s++ {
		push(t, b, 0, s, at(0), []uint32{s}, false)
	}
	// next = 201: the window covers 137..200.
	push(t, b, 0, 137, at(0), nil, true)
	push(t, b, 0, 136, at(0), nil, true)
	if st := b.Stats(); st.Duplicates != 1 || st.Stale != 1 {
		t.Fatalf("stats %+v, want 1 duplicate (137) and 1 stale (136)", st)
	}
	// A given-up gap larger than the window: the window is all "not delivered".
	push(t, b, 0, 400, at(0), nil, false)
	expire(t, b, at(50*ms), []uint32{400})
	push(t, b, 0, 350, at(51*ms), []uint32{350}, false)
	push(t, b, 0, 300, at(51*ms), nil, true) // 101 behind: stale
}

func TestFirstPacketStartsFlow(t *testing.T) {
	b := New[uint32](fixed(50 * ms))
	push(t, b, 0, 1000, at(0), []uint32{1000}, false)
	push(t, b, 0, 999, at(0), []uint32{999}, false)
	push(t, b, 0, 999, at(0), nil, true)
	push(t, b, 0, 1001, at(0), []uint32{1001}, false)
}

// randomRunBuffer is the buffer of the randomized exactly-once tests: a hold
// no lossless run reaches, or 5 ms so that a lossy run times gaps out.
func randomRunBuffer[T any](lossy bool, flows int) *Buffer[T] {
	hold := time.Hour
	if lossy {
		hold = 5 * ms
	}
	return New[T](Config{Mode: Fixed, Hold: hold, MaxHeld: 1024, Flows: flows, DedupWindow: 1024})
}

// TestRandomizedExactlyOnce shuffles several flows with copies and losses and checks
// the invariants: nothing is delivered twice, every packet that arrived is delivered,
// and with no losses each flow comes out exactly in order.
func TestRandomizedExactlyOnce(t *testing.T) {
	type ev struct {
		flow uint16
		seq  uint32
	}
	for _, lossy := range []bool{false, true} {
		seed := uint64(1)
		if lossy {
			seed = 2
		}
		rng := rand.New(rand.NewPCG(seed, 77))
		const flows, n = 5, 2000
		start := uint32(0xFFFFFF00) // crosses the wrap
		var evs []ev
		for f := uint16(0); f < flows; f++ {
			var fe []ev
			for i := uint32(0); i < n; i++ {
				if lossy && i > 0 && rng.IntN(10) == 0 {
					continue
				}
				fe = append(fe, ev{f, start + i})
				if rng.IntN(3) == 0 {
					fe = append(fe, ev{f, start + i}) // redundant copy
				}
			}
			// Displace packets by up to 20 positions (within the window), keeping the
			// first packet first so the flow starts where the sender did.
			for i := 1; i < len(fe); i++ {
				j := i + rng.IntN(20)
				if j < len(fe) {
					fe[i], fe[j] = fe[j], fe[i]
				}
			}
			evs = append(evs, fe...)
		}
		// Interleave flows randomly while keeping each flow's order.
		order := make([]ev, 0, len(evs))
		idx := make([][]ev, flows)
		for _, e := range evs {
			idx[e.flow] = append(idx[e.flow], e)
		}
		for len(order) < len(evs) {
			f := rng.IntN(flows)
			if len(idx[f]) > 0 {
				order = append(order, idx[f][0])
				idx[f] = idx[f][1:]
			}
		}
		b := randomRunBuffer[ev](lossy, 8)
		var out []ev
		now := t0
		for _, e := range order {
			out, _ = b.Push(e.flow, e.seq, e, now, out)
			now = now.Add(100 * time.Microsecond)
			out = b.Expire(now, out)
		}
		out = b.Flush(out)
		seen := map[ev]bool{}
		arrived := map[ev]bool{}
		for _, e := range order {
			arrived[e] = true
		}
		perFlow := make([][]uint32, flows)
		for _, e := range out {
			if seen[e] {
				t.Fatalf("lossy=%v: %v delivered twice", lossy, e)
			}
			seen[e] = true
			perFlow[e.flow] = append(perFlow[e.flow], e.seq-start)
		}
		if len(seen) != len(arrived) {
			t.Fatalf("lossy=%v: delivered %d distinct, %d arrived", lossy, len(seen), len(arrived))
		}
		if !lossy {
			for f := range perFlow {
				for i, s := range perFlow[f] {
					if s != uint32(i) {
						t.Fatalf("flow %d out of order at %d: %v", f, i, perFlow[f][max(0, i-3):i+1])
					}
				}
			}
			if st := b.Stats(); st.Timeouts != 0 || st.Late != 0 || st.Overflows != 0 {
				t.Fatalf("lossless run: %+v", st)
			}
		} else if st := b.Stats(); st.Timeouts == 0 || st.Late == 0 || st.Duplicates == 0 {
			t.Fatalf("lossy run did not exercise timeouts, late arrivals and copies: %+v", st)
		}
	}
}

func TestPushDoesNotAllocate(t *testing.T) {
	b := New[*int](DefaultConfig())
	item := new(int)
	out := make([]*int, 0, 64)
	seq := uint32(0)
	now := t0
	allocs := testing.AllocsPerRun(1000, func() {
		// a gap, filled: one held, then two released
		out, _ = b.Push(7, seq+1, item, now, out[:0])
		out, _ = b.Push(7, seq, item, now, out[:0])
		out, _ = b.Push(7, seq, item, now, out[:0]) // duplicate
		seq += 2
		now = now.Add(time.Microsecond)
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per run", allocs)
	}
	allocs = testing.AllocsPerRun(100, func() {
		out, _ = b.Push(9, seq+2, item, now, out[:0])
		now = now.Add(time.Second)
		out = b.Expire(now, out[:0])
		seq += 3
	})
	if allocs != 0 {
		t.Fatalf("expire path: %v allocs per run", allocs)
	}
}

func BenchmarkPushInOrder(b *testing.B) {
	buf := New[*int](DefaultConfig())
	item := new(int)
	out := make([]*int, 0, 64)
	seq := uint32(0)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		out, _ = buf.Push(uint16(seq&7), seq>>3, item, now, out[:0])
		seq++
	}
}

func BenchmarkPushWithGap(b *testing.B) {
	// Every pair arrives swapped: one packet held, then both released.
	buf := New[*int](DefaultConfig())
	item := new(int)
	out := make([]*int, 0, 64)
	seq := uint32(0)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		s := seq ^ 1
		out, _ = buf.Push(3, s, item, now, out[:0])
		seq++
	}
	if st := buf.Stats(); b.N > 4 && (st.Reordered == 0 || st.Overflows != 0 || st.Timeouts != 0) {
		b.Fatalf("benchmark did not exercise the held path: %+v", st)
	}
}

func BenchmarkPushDeepReorder(b *testing.B) {
	// Two paths: odd sequence numbers travel 64 packets ahead of even ones, so the
	// buffer holds ~64 packets of the flow and every even arrival releases one more.
	buf := New[*int](DefaultConfig())
	item := new(int)
	out := make([]*int, 0, 128)
	now := t0
	for k := uint32(0); k < 64; k++ {
		out, _ = buf.Push(1, 2*k+1, item, now, out[:0])
	}
	var k uint32
	b.ReportAllocs()
	for b.Loop() {
		out, _ = buf.Push(1, 2*k, item, now, out[:0])     // slow path
		out, _ = buf.Push(1, 2*k+129, item, now, out[:0]) // fast path, 64 ahead
		k++
	}
	if st := buf.Stats(); st.Overflows != 0 || st.Timeouts != 0 || st.Held != 64 {
		b.Fatalf("benchmark did not stay in the deep-reorder regime: %+v", st)
	}
}

func TestNoPanicOnEdgeConfigs(t *testing.T) {
	b := New[uint32](Config{Mode: Fixed, MaxHeld: 1, Flows: 3, DedupWindow: 1})
	push(t, b, 0, 1, at(0), []uint32{1}, false)
	push(t, b, 0, 3, at(0), nil, false)
	push(t, b, 0, 5, at(0), []uint32{3}, false) // pool of one: gap 2 given up
	// Flows 3 rounds up to 4 buckets, so flow 4 is flow 0: 9 needs the only slot,
	// which gives up gap 4 and releases 5.
	push(t, b, 4, 9, at(0), []uint32{5}, false)
	if d := New[int](Config{}); d.Hold() != 200*ms {
		t.Errorf("zero config hold %v", d.Hold())
	}
}

// The adaptive hold learns from observed lateness: after a gap that took 30 ms to
// fill, a SetHold of 5 ms still leaves the hold at 1.25 × 30 ms, until the
// observation ages out of the two-second window.
func TestAdaptiveHoldLearnsLateness(t *testing.T) {
	b := New[int](Config{Mode: Adaptive, Hold: 200 * time.Millisecond, MinHold: time.Millisecond, MaxHeld: 64, Flows: 16})
	t0 := time.Unix(1000, 0)
	b.SetHold(5 * time.Millisecond)
	if b.Hold() != 5*time.Millisecond {
		t.Fatalf("hold %v", b.Hold())
	}
	var out []int
	out, _ = b.Push(1, 0, 0, t0, out)
	out, _ = b.Push(1, 2, 2, t0, out)                         // gap at 1 opens at t0
	out, _ = b.Push(1, 1, 1, t0.Add(4*time.Millisecond), out) // filled after 4 ms
	if len(out) != 3 {
		t.Fatalf("delivered %v", out)
	}
	if want := 5 * time.Millisecond; b.Hold() != want { // 1.25×4 = 5 ms, equal to target
		t.Fatalf("hold %v, want %v", b.Hold(), want)
	}
	// A packet that comes 30 ms after its gap was given up (at 5 ms).
	out = out[:0]
	out, _ = b.Push(1, 4, 4, t0.Add(10*time.Millisecond), out) // gap at 3 opens at 10 ms
	out = b.Expire(t0.Add(16*time.Millisecond), out)           // given up after 5 ms
	out, _ = b.Push(1, 3, 3, t0.Add(40*time.Millisecond), out) // 30 ms late
	if want := time.Duration(1.25 * float64(30*time.Millisecond)); b.Hold() != want {
		t.Fatalf("hold after a late packet %v, want %v (out %v)", b.Hold(), want, out)
	}
	b.SetHold(5 * time.Millisecond)
	if b.Hold() < 37*time.Millisecond {
		t.Fatalf("SetHold lowered the learnt hold to %v", b.Hold())
	}
	// Two windows later the observation has aged out, with nothing new observed:
	// the engine's timer calls Expire.
	b.Expire(t0.Add(5*time.Second), out)
	b.SetHold(5 * time.Millisecond)
	if b.Hold() != 5*time.Millisecond {
		t.Fatalf("hold %v after the window, want 5ms", b.Hold())
	}
}

// With StartAtZero a packet overtaken at the very start of a flow is still put back
// in order; Reset returns to that state for a new session.
func TestStartAtZeroAndReset(t *testing.T) {
	b := New[int](Config{Mode: Fixed, Hold: 50 * time.Millisecond, MaxHeld: 64, Flows: 16, StartAtZero: true})
	t0 := time.Unix(1000, 0)
	var out []int
	out, _ = b.Push(3, 1, 1, t0, out) // seq 0 is still on its way
	if len(out) != 0 {
		t.Fatalf("delivered %v before seq 0", out)
	}
	out, _ = b.Push(3, 0, 0, t0.Add(time.Millisecond), out)
	if len(out) != 2 || out[0] != 0 || out[1] != 1 {
		t.Fatalf("delivered %v, want [0 1]", out)
	}
	out, _ = b.Push(3, 3, 3, t0, out[:0]) // held behind 2
	out = b.Reset(out)
	if len(out) != 1 || out[0] != 3 {
		t.Fatalf("Reset released %v, want [3]", out)
	}
	// After Reset the flow expects 0 again: 1 is held, not delivered.
	out, _ = b.Push(3, 1, 1, t0, out[:0])
	if len(out) != 0 {
		t.Fatalf("after Reset delivered %v before seq 0", out)
	}
	out, dup := b.Push(3, 0, 0, t0, out)
	if dup || len(out) != 2 {
		t.Fatalf("after Reset: %v dup=%v", out, dup)
	}
}
