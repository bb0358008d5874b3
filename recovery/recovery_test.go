package recovery

import (
	"testing"
	"time"

	"github.com/braid-vpn/braid/sched"
)

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// Two paths: 20 ms and 60 ms RTT, no queueing.
func twoPaths() []sched.PathInfo {
	return []sched.PathInfo{
		{ID: 0, Usable: true, SRTT: ms(20), MinRTT: ms(20), Rate: 1.25e6},
		{ID: 1, Usable: true, SRTT: ms(60), MinRTT: ms(60), Rate: 1.25e6, OWD: ms(20), BaseOWD: ms(20)},
	}
}

func TestHold(t *testing.T) {
	c := DefaultConfig()
	// 9/8 × 60 (slowest path) + 5 ack delay + 5 tick + 10 (fastest one-way) + 10 margin = 97.5 ms.
	if got, want := c.Hold(twoPaths()), ms(97.5); got != want {
		t.Errorf("Hold = %v, want %v", got, want)
	}
	// Unusable paths do not count: the 20 ms path alone gives 22.5+5+5+10+10.
	ps := twoPaths()
	ps[1].Usable = false
	if got, want := c.Hold(ps), ms(52.5); got != want {
		t.Errorf("Hold (one path) = %v, want %v", got, want)
	}
	// Capped: two 400 ms paths.
	long := []sched.PathInfo{{Usable: true, SRTT: ms(400), MinRTT: ms(400)}}
	if got := c.Hold(long); got != c.MaxHold {
		t.Errorf("Hold = %v, want the cap %v", got, c.MaxHold)
	}
	if got := c.Hold(nil); got != 0 {
		t.Errorf("Hold with no path = %v", got)
	}
}

func TestOneWayIncludesQueue(t *testing.T) {
	p := sched.PathInfo{SRTT: ms(50), MinRTT: ms(40), OWD: ms(35), BaseOWD: ms(20)}
	// half the min RTT (20) plus 15 ms of queue.
	if got := OneWay(&p); got != ms(35) {
		t.Errorf("OneWay = %v, want 35ms", got)
	}
	p.MinRTT = 0 // no sample: half the smoothed RTT
	if got := OneWay(&p); got != ms(40) {
		t.Errorf("OneWay without min RTT = %v, want 40ms", got)
	}
}

func TestDeadlineAndChoose(t *testing.T) {
	c := DefaultConfig()
	paths := twoPaths()
	t0 := time.Unix(1000, 0)
	hold := c.Hold(paths) // 97.5 ms
	// Sent at t0 on the slow path (one way 30 ms): must arrive by t0+127.5 ms.
	dl := Deadline(t0, &paths[1], hold)
	if want := t0.Add(ms(127.5)); !dl.Equal(want) {
		t.Fatalf("Deadline = %v, want %v", dl.Sub(t0), want.Sub(t0))
	}
	// Lost, detected at t0+70 ms: the fast path (10 ms + 1.2 ms serialisation
	// of 1500 B at 1.25 MB/s) arrives at 81.2 ms: chosen, not the slow one.
	if got := Choose(paths, 1500, t0.Add(ms(70)), dl); got != 0 {
		t.Errorf("Choose = %d, want the fast path 0", got)
	}
	// At t0+117 ms the fast path arrives at 128.2 > 127.5: too late, give up.
	if got := Choose(paths, 1500, t0.Add(ms(117)), dl); got != -1 {
		t.Errorf("Choose late = %d, want -1", got)
	}
	// At 116 ms it still makes it (127.2).
	if got := Choose(paths, 1500, t0.Add(ms(116)), dl); got != 0 {
		t.Errorf("Choose just in time = %d, want 0", got)
	}
	// A degraded fast path is used only when no healthy one makes it.
	paths[0].Degraded = true
	if got := Choose(paths, 1500, t0.Add(ms(70)), dl); got != 1 {
		t.Errorf("Choose with degraded fast path = %d, want the healthy slow path 1 (arrives 101.2)", got)
	}
	if got := Choose(paths, 1500, t0.Add(ms(100)), dl); got != 0 {
		t.Errorf("Choose when only the degraded path makes it = %d, want 0", got)
	}
}

func TestBudget(t *testing.T) {
	b := NewBudget(Config{Budget: 0.25, BudgetBurst: 3000})
	if !b.Spend(3000) {
		t.Fatal("a full bucket refused its depth")
	}
	if b.Spend(1) {
		t.Fatal("an empty bucket allowed a resend")
	}
	b.Earn(4000) // 1000 tokens
	if b.Spend(1001) || !b.Spend(1000) {
		t.Fatalf("after earning 4000 B at 0.25: tokens %v, want exactly 1000", b.Tokens())
	}
	b.Earn(1 << 20) // capped at the depth
	if b.Tokens() != 3000 {
		t.Fatalf("tokens %v, want the depth 3000", b.Tokens())
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": Auto, "auto": Auto, "retransmit+fec": Auto, "retransmit": Retransmit, "fec": FEC, "off": Off} {
		if m, err := ParseMode(in); err != nil || m != want {
			t.Errorf("ParseMode(%q) = %v, %v", in, m, err)
		}
		// The canonical name parses back to the same mode (the handshake carries it).
		if m, _ := ParseMode(in); func() Mode { x, _ := ParseMode(m.String()); return x }() != m {
			t.Errorf("%v does not round-trip through %q", m, m.String())
		}
	}
	if _, err := ParseMode("FEC"); err == nil {
		t.Error("ParseMode is case-insensitive")
	}
	if !Auto.Has(FEC) || !Auto.Has(Retransmit) || FEC.Has(Retransmit) || Off.Has(FEC) {
		t.Error("Has")
	}
}

func TestStore(t *testing.T) {
	s := NewStore[int](64)
	s.Keep(1, 10, Entry[int]{Item: 100, Flow: 3, FlowSeq: 7})
	s.Keep(1, 11, Entry[int]{Item: 101})
	s.Keep(0, 10, Entry[int]{Item: 200})
	if s.Len() != 3 {
		t.Fatalf("Len = %d", s.Len())
	}
	if e, ok := s.Peek(1, 10); !ok || e.Item != 100 || s.Len() != 3 {
		t.Fatalf("Peek(1,10) = %+v %v, Len %d: want the entry, kept", e, ok, s.Len())
	}
	if _, ok := s.Peek(1, 12); ok {
		t.Fatal("Peek found an entry never kept")
	}
	if e, ok := s.Take(1, 10); !ok || e.Item != 100 || e.Flow != 3 || e.FlowSeq != 7 {
		t.Fatalf("Take(1,10) = %+v %v", e, ok)
	}
	if _, ok := s.Take(1, 10); ok {
		t.Fatal("taken twice")
	}
	if _, ok := s.Take(2, 10); ok {
		t.Fatal("an unknown path has an entry")
	}
	// seq 75 shares seq 11's slot (64-slot ring): 11 is evicted and returned.
	if old, ev := s.Keep(1, 75, Entry[int]{Item: 175}); !ev || old != 101 {
		t.Fatalf("wrap: evicted %v %v, want 101", old, ev)
	}
	if _, ok := s.Take(1, 11); ok {
		t.Fatal("an evicted entry was found")
	}
	got := s.DrainPath(1, nil)
	if len(got) != 1 || got[0] != 175 || s.Len() != 1 {
		t.Fatalf("DrainPath = %v, Len %d", got, s.Len())
	}
	if got := s.Drain(nil); len(got) != 1 || got[0] != 200 || s.Len() != 0 {
		t.Fatalf("Drain = %v, Len %d", got, s.Len())
	}
}

func TestStoreAllocs(t *testing.T) {
	s := NewStore[int](1024)
	s.Keep(0, 1, Entry[int]{})
	seq := uint32(1)
	allocs := testing.AllocsPerRun(1000, func() {
		seq++
		s.Keep(0, seq, Entry[int]{Item: int(seq)})
		s.Take(0, seq)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Keep+Take", allocs)
	}
}

// A store gives its rings back only when empty, and takes one again with the
// next entry.
func TestStoreRelease(t *testing.T) {
	s := NewStore[int](128)
	s.Keep(0, 5, Entry[int]{Item: 50})
	s.Keep(1, 7, Entry[int]{Item: 70})
	if s.Release() {
		t.Fatal("released with entries")
	}
	if e, ok := s.Take(0, 5); !ok || e.Item != 50 {
		t.Fatalf("take: %v %v", e, ok)
	}
	s.Take(1, 7)
	if !s.Release() || s.paths[0] != nil || s.paths[1] != nil {
		t.Fatal("empty store kept its rings")
	}
	if _, ok := s.Peek(0, 5); ok {
		t.Fatal("an entry taken is back after the release")
	}
	s.Keep(0, 6, Entry[int]{Item: 60})
	if e, ok := s.Peek(0, 6); !ok || e.Item != 60 || s.Len() != 1 {
		t.Fatalf("after the release: %v %v, %d entries", e, ok, s.Len())
	}
	// A ring from the pool comes empty: nothing of the released store's
	// slots shows through.
	for seq := uint32(0); seq < 128; seq++ {
		if _, ok := s.Peek(0, seq); ok != (seq == 6) {
			t.Fatalf("slot %d: found %v", seq, ok)
		}
	}
}
