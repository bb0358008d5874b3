package fanout

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// count records how often each item was done.
type count struct{ hits []atomic.Int32 }

func (c *count) Do(lo, hi int) {
	for i := lo; i < hi; i++ {
		c.hits[i].Add(1)
	}
}

func TestRunDoesEveryItemOnce(t *testing.T) {
	for _, workers := range []int{0, 1, 3} {
		p := New(workers, 4)
		var f Fork
		for _, n := range []int{0, 1, 3, 4, 7, 8, 9, 16, 17, 128, 1000} {
			c := &count{hits: make([]atomic.Int32, n)}
			p.Run(&f, c, n)
			for i := range c.hits {
				if got := c.hits[i].Load(); got != 1 {
					t.Fatalf("workers %d, n %d: item %d done %d times", workers, n, i, got)
				}
			}
		}
		p.Close()
	}
}

// meet blocks each part until two parts are in Do at once, or a timeout.
type meet struct {
	mu      sync.Mutex
	in      int
	both    chan struct{}
	overlap atomic.Bool
}

func (m *meet) Do(lo, hi int) {
	m.mu.Lock()
	m.in++
	if m.in == 2 {
		close(m.both)
	}
	m.mu.Unlock()
	select {
	case <-m.both:
		m.overlap.Store(true)
	case <-time.After(2 * time.Second):
	}
}

// A worker takes a part while the caller does its own: the point of the pool.
func TestRunUsesAWorker(t *testing.T) {
	p := New(1, 1)
	defer p.Close()
	m := &meet{both: make(chan struct{})}
	p.Run(new(Fork), m, 2)
	if !m.overlap.Load() {
		t.Fatal("the two parts never ran at the same time")
	}
	if s := p.Stats(); s != (Stats{Batches: 1, Items: 2, WorkerItems: 1}) {
		t.Fatalf("stats %+v, want one batch of 2 with 1 item done by the worker", s)
	}
}

// A nil pool and a batch too small to split stay on the caller.
func TestRunInline(t *testing.T) {
	m := &meet{both: make(chan struct{})}
	var p *Pool
	start := time.Now()
	p.Run(new(Fork), m, 2)
	if m.overlap.Load() || time.Since(start) < time.Second {
		t.Fatal("a nil pool ran parts at the same time")
	}
	q := New(1, 4)
	defer q.Close()
	c := &count{hits: make([]atomic.Int32, 7)}
	q.Run(new(Fork), c, 7) // 7 < 2 parts of 4
	if q.Workers() != 1 || (*Pool)(nil).Workers() != 0 {
		t.Fatal("Workers")
	}
}

// block holds the goroutine that claims its first chunk until released.
type block struct {
	release chan struct{}
	in      chan struct{}
}

func (b *block) Do(lo, hi int) {
	if lo == 0 {
		close(b.in)
		<-b.release
	}
}

// With every worker busy, Run does the whole batch itself instead of waiting.
func TestRunWithBusyWorkers(t *testing.T) {
	p := New(1, 1)
	defer p.Close()
	// Occupy the worker: it alone is invited to this batch's chunk 0.
	b := &block{release: make(chan struct{}), in: make(chan struct{})}
	var bf Fork
	bf.epoch = 7
	bf.claim.Store(uint64(bf.epoch) << 32)
	p.jobs <- job{f: &bf, b: b, n: 1, epoch: bf.epoch}
	<-b.in
	// The channel has room for one job: fill it so no worker can take another.
	p.jobs <- job{f: &bf, b: b, n: 1, epoch: 0}
	c := &count{hits: make([]atomic.Int32, 64)}
	done := make(chan struct{})
	go func() {
		p.Run(new(Fork), c, 64)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Run waited for a busy worker")
	}
	for i := range c.hits {
		if c.hits[i].Load() != 1 {
			t.Fatalf("item %d done %d times", i, c.hits[i].Load())
		}
	}
	close(b.release)
}

// A worker invited to a batch that is over (it woke late) does nothing, even
// when the caller has started its next batch.
func TestLateWorker(t *testing.T) {
	p := New(1, 2)
	defer p.Close()
	var f Fork
	old := &count{hits: make([]atomic.Int32, 16)}
	p.Run(&f, old, 16)
	stale := f.epoch
	// The next batch is under way: its claim counter is open again.
	f.epoch++
	f.done.Store(0)
	f.claim.Store(uint64(f.epoch) << 32)
	p.help(&f, old, 16, stale, true)
	for i := range old.hits {
		if old.hits[i].Load() != 1 {
			t.Fatalf("item %d of the old batch done %d times", i, old.hits[i].Load())
		}
	}
	if f.claim.Load() != uint64(f.epoch)<<32 {
		t.Fatal("a late worker claimed items of the next batch")
	}
}

func TestRunAllocs(t *testing.T) {
	p := New(1, 2)
	defer p.Close()
	var f Fork
	c := &count{hits: make([]atomic.Int32, 64)}
	p.Run(&f, c, 64) // sizes the fork
	if a := testing.AllocsPerRun(200, func() { p.Run(&f, c, 64) }); a != 0 {
		t.Fatalf("Run allocates %.1f times", a)
	}
}

func BenchmarkRun(b *testing.B) {
	p := New(1, 8)
	defer p.Close()
	var f Fork
	c := &count{hits: make([]atomic.Int32, 32)}
	b.ReportAllocs()
	for b.Loop() {
		p.Run(&f, c, 32)
	}
}

// spin is about a microsecond of work per item, as the AEAD of a datagram.
type spin struct {
	sink [64]uint64
	mine atomic.Int64 // items done by workers
	me   int64
}

func (s *spin) Do(lo, hi int) {
	for i := lo; i < hi; i++ {
		x := uint64(i)
		for range 400 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		s.sink[i%64] = x
	}
}

func BenchmarkSpread(b *testing.B) {
	for _, workers := range []int{0, 1} {
		b.Run(map[int]string{0: "alone", 1: "worker"}[workers], func(b *testing.B) {
			p := New(workers, 4)
			defer p.Close()
			var f Fork
			s := new(spin)
			for b.Loop() {
				p.Run(&f, s, 256)
			}
		})
	}
}
