//go:build linux

package linkemu

import (
	"container/heap"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// cycle runs one frame through a direction's bookkeeping without sockets
// or timer: take a slot, admit it, collect what is due, account it as sent
// (what readLoop and sendLoop do around their syscalls).
func cycle(d *dir, cur **slot, now time.Duration) {
	d.mu.Lock()
	if *cur == nil {
		*cur = d.getSlotLocked()
	}
	if d.receivedLocked(*cur, 1500, len((*cur).buf), now) {
		*cur = nil
	}
	k := d.dueLocked(now)
	for i := 0; i < k; i++ {
		d.sentAt[i] = now
		d.sentErr[i] = false
	}
	d.sentLocked(k)
	d.mu.Unlock()
}

// After warm-up (frame pool and heap grown) the per-frame path of a
// direction allocates nothing.
func TestDirCycleAllocs(t *testing.T) {
	d, step := warmDir()
	allocs := testing.AllocsPerRun(10000, step)
	if allocs != 0 {
		t.Errorf("%v allocations per frame", allocs)
	}
	st := d.stats()
	if st.Forwarded == 0 || st.DroppedLoss == 0 {
		t.Errorf("cycle did not exercise the pipe: %+v", st)
	}
	// 10 ms delay ± 1 ms after 12 µs of serialization, and this loop only
	// looks for due frames every 12 µs: delays lie in
	// [9 ms + 12 µs, 11 ms + 12 µs + 12 µs].
	const tick = 12 * time.Microsecond
	if st.Delay.Min < 9*ms+tick || st.Delay.Max > 11*ms+2*tick {
		t.Errorf("delays [%v, %v]", st.Delay.Min, st.Delay.Max)
	}
}

func BenchmarkDirCycle(b *testing.B) {
	_, step := warmDir()
	b.ReportAllocs()
	for b.Loop() {
		step()
	}
}

// warmDir is a direction after warm-up (frame pool and heap grown) and its
// next frame's cycle, one every 12 µs.
func warmDir() (*dir, func()) {
	d := newDir(AtoB, benchShape, frameBufSize(1500))
	var cur *slot
	now := time.Duration(0)
	step := func() {
		now += 12 * time.Microsecond
		cycle(d, &cur, now)
	}
	for i := 0; i < 20000; i++ {
		step()
	}
	return d, step
}

// schedule puts a frame due at at into the line, as receivedLocked does.
func (l *delayLine) schedule(at time.Duration, seq uint64) {
	heap.Push(l, &slot{at: at, seq: seq})
}

func TestDelayLineFIFOOnTies(t *testing.T) {
	var l delayLine
	for i := range uint64(100) {
		l.schedule(time.Duration(i/10), i) // ten frames per instant
	}
	for i := range uint64(100) {
		if s := heap.Pop(&l).(*slot); s.seq != i {
			t.Fatalf("pop %d: frame %d", i, s.seq)
		}
	}
}

func TestDelayLineOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var l delayLine
	type item struct {
		at  time.Duration
		seq uint64
	}
	var want []item
	next := uint64(0)
	for round := 0; round < 50; round++ {
		for i := rng.IntN(40); i > 0; i-- {
			at := time.Duration(rng.IntN(30))
			l.schedule(at, next)
			want = append(want, item{at, next})
			next++
		}
		slices.SortStableFunc(want, func(a, b item) int { return int(a.at - b.at) })
		for i := rng.IntN(40); i > 0 && l.Len() > 0; i-- {
			s := heap.Pop(&l).(*slot)
			if s.at != want[0].at || s.seq != want[0].seq {
				t.Fatalf("popped (%v, %d), want (%v, %d)", s.at, s.seq, want[0].at, want[0].seq)
			}
			want = want[1:]
		}
	}
}

// BenchmarkDelayLine keeps ~1000 jittered frames in the line: one push
// and one pop per op.
func BenchmarkDelayLine(b *testing.B) {
	var l delayLine
	rng := rand.New(rand.NewPCG(3, 4))
	now := time.Duration(0)
	for i := range uint64(1000) {
		l.schedule(now+time.Duration(rng.IntN(int(ms))), i)
	}
	seq := uint64(1000)
	b.ReportAllocs()
	for b.Loop() {
		now += time.Microsecond
		s := heap.Pop(&l).(*slot)
		s.at, s.seq = now+time.Duration(rng.IntN(int(ms))), seq
		seq++
		heap.Push(&l, s)
	}
}
