// Package lanes keeps the writes of several goroutines in order within each
// lane while writes to different lanes pass each other.
//
// The tunnel's receive side has one reader per path socket. A reader decides
// what a peer's reorder buffer releases under the peer's lock, and that
// decision fixes the order in which the packets must reach the TUN device. The
// write itself is slow (a copy into the kernel per packet) and needs no peer
// state, so it is done after the lock is let go; what must survive is the
// order of the writes that touch the same flow. A writer takes a ticket while
// it still holds the lock that ordered its work, naming the lanes (flow
// buckets) its packets belong to; it then writes each lane when the earlier
// tickets of that lane are done, and waits for nothing else.
//
// The cost is a few lock operations per batch and lane, none per packet.
package lanes

import (
	"math/bits"
	"sync"
)

// N is the number of lanes. Flow buckets are folded into lanes (Of); two flows
// in one lane are kept in order with each other, which is harmless.
const N = 64

// Of is the lane of flow bucket flow.
func Of(flow uint16) uint { return uint(flow) % N }

// Set is a set of lanes, one bit each.
type Set uint64

// Add returns s with lane l in it.
func (s Set) Add(l uint) Set { return s | 1<<l }

// Has reports whether lane l is in s.
func (s Set) Has(l uint) bool { return s&(1<<l) != 0 }

// Order orders the tickets of each lane. The zero value is ready to use.
type Order struct {
	mu   sync.Mutex
	cond sync.Cond // on mu; signalled when a lane is done
	next [N]uint32 // per lane: the turn the next ticket gets
	done [N]uint32 // per lane: the turn whose writer may go now
	// waiting counts the writers blocked in Wait, so that Done signals only
	// when somebody listens.
	waiting int
}

// Ticket is one writer's place in the lanes it takes. It is the caller's
// scratch: reuse it, one per goroutine.
type Ticket struct {
	pending Set // lanes taken and not done yet
	turn    [N]uint32
}

// Pending is the set of t's lanes not done yet.
func (t *Ticket) Pending() Set { return t.pending }

// Take gives t the next turn in every lane of s. Call it while holding the
// lock that decided the order of the writes, with t's earlier lanes all done;
// every lane taken must be done (Wait, then Done), or that lane stops.
func (o *Order) Take(t *Ticket, s Set) {
	t.pending = s
	o.mu.Lock()
	for m := uint64(s); m != 0; m &= m - 1 {
		l := bits.TrailingZeros64(m)
		t.turn[l] = o.next[l]
		o.next[l]++
	}
	o.mu.Unlock()
}

// Wait blocks until the turn of at least one of t's pending lanes has come
// and returns those lanes. A writer goes lane by lane, so one lane held up by
// an earlier writer does not hold up t's other lanes.
//
// Tickets are taken in one order, so the earliest ticket with lanes pending
// has its turn in all of them: somebody can always go, and no set of writers
// waits on each other.
func (o *Order) Wait(t *Ticket) Set {
	o.mu.Lock()
	s := o.ready(t)
	if s == 0 && t.pending != 0 {
		if o.cond.L == nil {
			o.cond.L = &o.mu
		}
		o.waiting++
		for s == 0 {
			o.cond.Wait()
			s = o.ready(t)
		}
		o.waiting--
	}
	o.mu.Unlock()
	return s
}

func (o *Order) ready(t *Ticket) Set {
	var s Set
	for m := uint64(t.pending); m != 0; m &= m - 1 {
		l := bits.TrailingZeros64(m)
		if o.done[l] == t.turn[l] {
			s = s.Add(uint(l))
		}
	}
	return s
}

// Done lets the next ticket of each lane of s go; s is a set Wait returned,
// or part of it.
func (o *Order) Done(t *Ticket, s Set) {
	s &= t.pending
	t.pending &^= s
	o.mu.Lock()
	for m := uint64(s); m != 0; m &= m - 1 {
		o.done[bits.TrailingZeros64(m)]++
	}
	if o.waiting > 0 {
		o.cond.Broadcast()
	}
	o.mu.Unlock()
}

// Idle reports whether every ticket taken is done (for tests and checks).
func (o *Order) Idle() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.next == o.done
}
