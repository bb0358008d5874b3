package replay

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
)

// accept is Check followed by Update, the way a receiver uses the window.
func accept(w *Window, c uint64) bool {
	if !w.Check(c) {
		return false
	}
	return w.Update(c)
}

func TestNewSizes(t *testing.T) {
	cases := []struct{ in, want int }{
		{0, DefaultSize},
		{-5, DefaultSize},
		{1, MinSize},
		{128, 128},
		{129, 256},
		{1000, 1024},
		{65536, 65536},
		{MaxSize * 4, MaxSize},
	}
	for _, c := range cases {
		w := New(c.in)
		if w.Size() != c.want {
			t.Errorf("New(%d).Size() = %d, want %d", c.in, w.Size(), c.want)
		}
		if got, want := len(w.words), c.want/64+1; got != want {
			t.Errorf("New(%d): %d words, want %d", c.in, got, want)
		}
	}
}

func TestInOrder(t *testing.T) {
	w := New(0)
	if _, ok := w.Highest(); ok {
		t.Fatal("fresh window reports a highest counter")
	}
	for c := uint64(0); c < 10000; c++ {
		if !accept(w, c) {
			t.Fatalf("in-order counter %d rejected", c)
		}
		if h, ok := w.Highest(); !ok || h != c {
			t.Fatalf("after %d: Highest = %d,%v", c, h, ok)
		}
	}
	for _, c := range []uint64{0, 1, 5000, 9999} {
		if w.Check(c) || w.Update(c) {
			t.Fatalf("duplicate %d accepted", c)
		}
	}
}

func TestOutOfOrderWithinWindow(t *testing.T) {
	w := New(1024)
	// Two interleaved "paths": evens arrive first up to 2000, then the odds.
	for c := uint64(0); c <= 2000; c += 2 {
		if !accept(w, c) {
			t.Fatalf("even %d rejected", c)
		}
	}
	// 2000-1023 = 977 is the oldest counter still inside a 1024 window.
	for c := uint64(977); c < 2000; c += 2 {
		if !accept(w, c) {
			t.Fatalf("late odd %d within window rejected", c)
		}
	}
	for c := uint64(1); c < 977; c += 2 {
		if w.Check(c) || w.Update(c) {
			t.Fatalf("odd %d outside the window accepted", c)
		}
	}
	// Every counter 977..2000 has now been seen.
	for c := uint64(977); c <= 2000; c++ {
		if w.Check(c) {
			t.Fatalf("seen counter %d passes Check", c)
		}
	}
}

func TestWindowEdgeExact(t *testing.T) {
	// The window must hold exactly size counters whatever the bit position of the
	// newest counter inside its word.
	for _, size := range []int{128, 256, 4096} {
		for r := uint64(0); r < 64; r++ {
			w := New(size)
			newest := uint64(10*size) + r
			if !w.Update(newest) {
				t.Fatal("first update rejected")
			}
			oldestIn := newest - uint64(size) + 1
			if !w.Check(oldestIn) || !w.Update(oldestIn) {
				t.Fatalf("size %d newest %d: %d (newest-size+1) rejected", size, newest, oldestIn)
			}
			if w.Check(oldestIn-1) || w.Update(oldestIn-1) {
				t.Fatalf("size %d newest %d: %d (newest-size) accepted", size, newest, oldestIn-1)
			}
			// Every counter between must be new and acceptable exactly once.
			for c := oldestIn + 1; c < newest; c++ {
				if !w.Update(c) {
					t.Fatalf("size %d newest %d: %d rejected", size, newest, c)
				}
				if w.Update(c) {
					t.Fatalf("size %d newest %d: %d accepted twice", size, newest, c)
				}
			}
		}
	}
}

func TestTooOld(t *testing.T) {
	w := New(128)
	if !accept(w, 1000) {
		t.Fatal("1000 rejected")
	}
	for _, c := range []uint64{0, 1, 871, 872} {
		if w.Check(c) || w.Update(c) {
			t.Errorf("counter %d (1000-%d behind) accepted in a 128 window", c, 1000-c)
		}
	}
	if !accept(w, 873) {
		t.Error("counter 873 (127 behind) rejected")
	}
}

func TestDuplicateDoesNotAdvance(t *testing.T) {
	w := New(128)
	accept(w, 5)
	if w.Update(5) {
		t.Fatal("duplicate accepted")
	}
	if h, _ := w.Highest(); h != 5 {
		t.Fatalf("Highest = %d after duplicate, want 5", h)
	}
}

func TestBigJumpClearsWords(t *testing.T) {
	w := New(256) // 5 words
	for c := uint64(0); c < 256; c++ {
		accept(w, c)
	}
	// Jump exactly one ring length of blocks: every word is reused for a new block,
	// so stale bits would make fresh counters look seen.
	base := uint64(256 + 5*64)
	if !accept(w, base+63) {
		t.Fatal("jump target rejected")
	}
	for c := base + 63 - 255; c < base+63; c++ {
		if !w.Check(c) {
			t.Fatalf("after jump, unseen counter %d fails Check (stale bit)", c)
		}
	}
	// A huge jump (far beyond the ring) must also leave a clean window.
	far := uint64(1) << 40
	if !accept(w, far) {
		t.Fatal("far jump rejected")
	}
	for c := far - 255; c < far; c++ {
		if !accept(w, c) {
			t.Fatalf("after far jump, counter %d rejected", c)
		}
	}
	if accept(w, base+63) {
		t.Fatal("old counter accepted after far jump")
	}
}

func TestSmallJumpsPartialClear(t *testing.T) {
	// Advance by one block at a time and make sure only the skipped words are
	// cleared: counters seen in the still-valid part of the window stay seen.
	w := New(1024)
	for c := uint64(0); c < 1024; c++ {
		accept(w, c)
	}
	if !accept(w, 1024+64) { // moves into block 17, clearing blocks 16 and 17
		t.Fatal("advance rejected")
	}
	for c := uint64(1024 + 64 - 1023); c < 1024; c++ {
		if w.Check(c) {
			t.Fatalf("seen counter %d looks unseen after a partial clear", c)
		}
	}
	for c := uint64(1024); c < 1024+64; c++ {
		if !w.Check(c) {
			t.Fatalf("skipped counter %d looks seen", c)
		}
	}
}

func TestMaxCounterNeverAccepted(t *testing.T) {
	w := New(128)
	if w.Check(math.MaxUint64) || w.Update(math.MaxUint64) {
		t.Fatal("2^64-1 accepted")
	}
	if !accept(w, math.MaxUint64-1) {
		t.Fatal("2^64-2 rejected")
	}
	if !accept(w, math.MaxUint64-2) || accept(w, math.MaxUint64-1) {
		t.Fatal("window near the top of the counter space misbehaves")
	}
}

func TestReset(t *testing.T) {
	w := New(128)
	for c := uint64(0); c < 300; c++ {
		accept(w, c)
	}
	w.Reset()
	if _, ok := w.Highest(); ok {
		t.Fatal("Highest after Reset")
	}
	for c := uint64(0); c < 300; c++ {
		if !accept(w, c) {
			t.Fatalf("counter %d rejected after Reset", c)
		}
	}
}

func TestCheckIsSideEffectFree(t *testing.T) {
	w := New(128)
	for i := 0; i < 3; i++ {
		if !w.Check(7) {
			t.Fatal("Check(7) false on a fresh window")
		}
	}
	if _, ok := w.Highest(); ok {
		t.Fatal("Check recorded a counter")
	}
}

// Many goroutines authenticate overlapping counter sets; every counter must be
// accepted exactly once in total.
func TestConcurrentExactlyOnce(t *testing.T) {
	const (
		workers = 8
		n       = 20000
	)
	w := New(1 << 15) // bigger than n: nothing falls out of the window
	var wins [n]atomic.Int32
	var wg sync.WaitGroup
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < n; i++ {
				// Each worker walks the counters in its own rotated order.
				c := uint64((i + g*997) % n)
				if w.Check(c) && w.Update(c) {
					wins[c].Add(1)
				}
			}
		}(g)
	}
	wg.Wait()
	for c := range wins {
		if got := wins[c].Load(); got != 1 {
			t.Fatalf("counter %d accepted %d times, want 1", c, got)
		}
	}
}

func TestAllocs(t *testing.T) {
	w := New(0)
	var c uint64
	n := testing.AllocsPerRun(1000, func() {
		c += 3
		w.Check(c)
		w.Update(c)
		w.Update(c - 1)
	})
	if n != 0 {
		t.Fatalf("%v allocations per Check+Update", n)
	}
}

func BenchmarkInOrder(b *testing.B) {
	w := New(0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c := uint64(i)
		if w.Check(c) {
			w.Update(c)
		}
	}
}

func BenchmarkReordered(b *testing.B) {
	// Two paths, one 1000 counters behind the other.
	w := New(0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c := uint64(i)
		if i&1 == 1 {
			c = uint64(i) + 1000
		}
		if w.Check(c) {
			w.Update(c)
		}
	}
}

func BenchmarkParallel(b *testing.B) {
	w := New(0)
	var next atomic.Uint64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c := next.Add(1)
			if w.Check(c) {
				w.Update(c)
			}
		}
	})
}
