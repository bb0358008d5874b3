package lanes

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// waitBlocked reports whether Wait(t) is still blocked after d; the channel
// gets what Wait returns.
func waitBlocked(o *Order, t *Ticket, d time.Duration) (bool, <-chan Set) {
	ch := make(chan Set, 1)
	go func() { ch <- o.Wait(t) }()
	select {
	case s := <-ch:
		ch <- s
		return false, ch
	case <-time.After(d):
		return true, ch
	}
}

func TestSameLaneWaits(t *testing.T) {
	var o Order
	var a, b Ticket
	o.Take(&a, Set(0).Add(Of(3)))
	o.Take(&b, Set(0).Add(Of(3+N))) // another flow folded into the same lane
	if s := o.Wait(&a); s != Set(0).Add(3) {
		t.Fatalf("first ticket: Wait = %b", s)
	}
	isBlocked, ch := waitBlocked(&o, &b, 50*time.Millisecond)
	if !isBlocked {
		t.Fatal("a later ticket of the same lane went before the earlier one was done")
	}
	o.Done(&a, Set(0).Add(3))
	select {
	case s := <-ch:
		if s != Set(0).Add(3) {
			t.Fatalf("second ticket: Wait = %b", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the later ticket did not go once the earlier was done")
	}
	o.Done(&b, b.Pending())
	if !o.Idle() || b.Pending() != 0 {
		t.Fatal("tickets left after all were done")
	}
}

// TestLaneByLane: a ticket whose lanes are partly held up goes on with the
// others, and waits for the rest.
func TestLaneByLane(t *testing.T) {
	var o Order
	var a, b Ticket
	o.Take(&a, Set(0).Add(1).Add(2))
	o.Take(&b, Set(0).Add(2).Add(5))
	// a's write of lane 2 hangs; b shares lane 2 with it, not lane 5.
	isBlocked, ch := waitBlocked(&o, &b, 2*time.Second)
	if isBlocked {
		t.Fatal("a ticket waited although one of its lanes was free")
	}
	if s := <-ch; s != Set(0).Add(5) {
		t.Fatalf("Wait = %b, want lane 5 alone", s)
	}
	o.Done(&b, Set(0).Add(5))
	isBlocked, ch = waitBlocked(&o, &b, 50*time.Millisecond)
	if !isBlocked {
		t.Fatal("lane 2 went before the earlier ticket was done with it")
	}
	if s := o.Wait(&a); s != Set(0).Add(1).Add(2) {
		t.Fatalf("earliest ticket: Wait = %b", s)
	}
	o.Done(&a, Set(0).Add(2))
	if s := <-ch; s != Set(0).Add(2) {
		t.Fatalf("Wait = %b, want lane 2", s)
	}
	o.Done(&b, Set(0).Add(2))
	if o.Idle() {
		t.Fatal("Idle with lane 1 outstanding")
	}
	o.Done(&a, a.Pending())
	if !o.Idle() {
		t.Fatal("not idle after all were done")
	}
}

// TestOrderKept has writers decide their writes under one lock, in random
// lanes, and write them lane by lane after letting it go, with random
// delays: each lane must see its writes in the order they were decided.
func TestOrderKept(t *testing.T) {
	const writers, rounds = 6, 400
	var (
		o       Order
		decide  sync.Mutex
		decided [N][]int
		wmu     sync.Mutex
		written [N][]int
		wg      sync.WaitGroup
		seq     int
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			var tk Ticket
			for range rounds {
				var s Set
				for range 1 + r.IntN(4) {
					s = s.Add(uint(r.IntN(8))) // few lanes, so they collide
				}
				decide.Lock()
				id := seq
				seq++
				for l := range uint(N) {
					if s.Has(l) {
						decided[l] = append(decided[l], id)
					}
				}
				o.Take(&tk, s)
				decide.Unlock()
				for tk.Pending() != 0 {
					ready := o.Wait(&tk)
					for l := range uint(N) {
						if !ready.Has(l) {
							continue
						}
						if r.IntN(4) == 0 {
							time.Sleep(time.Duration(r.IntN(50)) * time.Microsecond)
						}
						wmu.Lock()
						written[l] = append(written[l], id)
						wmu.Unlock()
						o.Done(&tk, Set(0).Add(l))
					}
				}
			}
		}()
	}
	wg.Wait()
	for l := range N {
		if len(decided[l]) != len(written[l]) {
			t.Fatalf("lane %d: %d decided, %d written", l, len(decided[l]), len(written[l]))
		}
		for i := range decided[l] {
			if decided[l][i] != written[l][i] {
				t.Fatalf("lane %d: write %d is ticket %d, decided %d", l, i, written[l][i], decided[l][i])
			}
		}
	}
	if !o.Idle() {
		t.Fatal("not idle at the end")
	}
}

func TestWrap(t *testing.T) {
	var o Order
	o.next[7], o.done[7] = ^uint32(0), ^uint32(0)
	var a, b Ticket
	o.Take(&a, Set(0).Add(7))
	o.Take(&b, Set(0).Add(7))
	o.Wait(&a)
	isBlocked, ch := waitBlocked(&o, &b, 20*time.Millisecond)
	if !isBlocked {
		t.Fatal("the turn counter's wrap let a later ticket pass")
	}
	o.Done(&a, a.Pending())
	<-ch
	o.Done(&b, b.Pending())
	if !o.Idle() {
		t.Fatal("not idle after the wrap")
	}
}

func TestNoAllocs(t *testing.T) {
	var o Order
	var tk Ticket
	s := Set(0).Add(1).Add(40)
	if n := testing.AllocsPerRun(100, func() {
		o.Take(&tk, s)
		o.Done(&tk, o.Wait(&tk))
	}); n != 0 {
		t.Fatalf("%v allocations per write", n)
	}
}

func BenchmarkTakeWaitDone(b *testing.B) {
	var o Order
	var tk Ticket
	s := Set(0).Add(1).Add(2).Add(3)
	for b.Loop() {
		o.Take(&tk, s)
		o.Done(&tk, o.Wait(&tk))
	}
}
