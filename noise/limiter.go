package noise

import (
	"net/netip"
	"sync"
	"time"
)

// limiter is a token bucket per source address with a fixed-size table.
//
// Tokens are kept in nanoseconds (one initiation costs 1e9/rate), so refilling is
// an addition. The table is a least-recently-used list over a preallocated array.
// A source whose bucket has refilled completely carries no information and may be
// evicted. When the table is full, a new source replaces the first refilled one
// among the evictScan least recently used; if there is none, the table is full of
// active sources and the new source is refused rather than given a fresh bucket
// at another's expense. That is WireGuard's choice too: under a flood from more
// sources than the table holds, the server keeps its Diffie-Hellman budget
// bounded, at the price of new sources waiting (clients retry every
// handshake retry) until entries refill. Sources already in the table keep working.
type limiter struct {
	mu       sync.Mutex
	cost     int64 // ns of tokens per initiation
	capacity int64 // burst × cost
	idx      map[netip.Addr]int32
	ents     []limEntry
	used     int32
	head     int32 // most recently used, -1 if empty
	tail     int32 // least recently used, -1 if empty
}

// evictScan bounds the work of finding an evictable entry. Entries are scanned
// from the least recently used, which are the likeliest to have refilled.
const evictScan = 8

type limEntry struct {
	key        netip.Addr
	last       time.Time
	tokens     int64
	prev, next int32
}

func newLimiter(rate, burst, entries int) *limiter {
	cost := int64(time.Second) / int64(rate)
	if cost < 1 {
		cost = 1
	}
	return &limiter{
		cost:     cost,
		capacity: cost * int64(burst),
		idx:      make(map[netip.Addr]int32, entries),
		ents:     make([]limEntry, entries),
		head:     -1,
		tail:     -1,
	}
}

// limiterKey groups sources that one attacker controls cheaply: an IPv6 host
// usually owns a whole /64.
func limiterKey(a netip.Addr) netip.Addr {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, err := a.Prefix(64)
		if err == nil {
			return p.Addr()
		}
	}
	return a
}

// allow takes a token from src's bucket and reports whether there was one.
func (l *limiter) allow(src netip.Addr, now time.Time) bool {
	key := limiterKey(src)
	l.mu.Lock()
	defer l.mu.Unlock()
	if i, ok := l.idx[key]; ok {
		e := &l.ents[i]
		if elapsed := int64(now.Sub(e.last)); elapsed > 0 {
			if elapsed >= l.capacity-e.tokens {
				e.tokens = l.capacity
			} else {
				e.tokens += elapsed
			}
			e.last = now
		}
		l.touch(i)
		if e.tokens < l.cost {
			return false
		}
		e.tokens -= l.cost
		return true
	}
	var i int32
	if int(l.used) < len(l.ents) {
		i = l.used
		l.used++
	} else {
		i = l.tail
		for n := 0; ; n++ {
			if i < 0 || n == evictScan {
				return false
			}
			if l.refilledBy(&l.ents[i], now) {
				break
			}
			i = l.ents[i].prev
		}
		delete(l.idx, l.ents[i].key)
		l.unlink(i)
	}
	l.ents[i] = limEntry{key: key, last: now, tokens: l.capacity - l.cost, prev: -1, next: -1}
	l.idx[key] = i
	l.pushFront(i)
	return true
}

// refilledBy reports whether e's bucket is full at now, i.e. forgetting e changes
// nothing.
func (l *limiter) refilledBy(e *limEntry, now time.Time) bool {
	return int64(now.Sub(e.last)) >= l.capacity-e.tokens
}

func (l *limiter) touch(i int32) {
	if l.head == i {
		return
	}
	l.unlink(i)
	l.pushFront(i)
}

func (l *limiter) unlink(i int32) {
	e := &l.ents[i]
	if e.prev >= 0 {
		l.ents[e.prev].next = e.next
	} else {
		l.head = e.next
	}
	if e.next >= 0 {
		l.ents[e.next].prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

func (l *limiter) pushFront(i int32) {
	e := &l.ents[i]
	e.prev, e.next = -1, l.head
	if l.head >= 0 {
		l.ents[l.head].prev = i
	}
	l.head = i
	if l.tail < 0 {
		l.tail = i
	}
}

// len returns the number of sources remembered (for tests).
func (l *limiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.idx)
}
