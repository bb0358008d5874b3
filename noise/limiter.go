package noise

import (
	"net/netip"
	"sync"
	"time"
)

// Proof is what a server knows of an initiation's source address before any
// Diffie-Hellman.
type Proof uint8

const (
	// Unproven: the source address may be spoofed (no valid mac2, not a known
	// endpoint). Anyone who knows the server's public key can send these from
	// any address.
	Unproven Proof = iota
	// Proven: the initiation carries a valid mac2, so its sender receives at
	// that address and port (it read the cookie the server sent there).
	Proven
	// Known: the source is the endpoint of a validated path of an authenticated
	// client, which answered a challenge there.
	Known
)

// The limiter decides, per initiation, whether its source may make the server
// spend a Diffie-Hellman. Its rules, and why:
//
//   - Buckets of unproven and of proven sources are kept apart. An unproven
//     source can be spoofed, so its buckets say nothing about the host that
//     really owns the address: a spoofer that drains them must not lock that host
//     out. The owner proves itself with a cookie (the server answers a refused
//     unproven initiation with a cookie reply), and from then on it is limited by
//     buckets only proven initiations reach.
//   - Proven and known sources are limited per address and port: a cookie is
//     bound to both, and many clients share one address behind a NAT or CGNAT.
//     Unproven sources are limited per address (IPv4) or prefix (IPv6), since
//     the port of a spoofed datagram is free.
//   - IPv6 sources are grouped by prefix at three levels, /64, /56 and /48 (a
//     host, a home, a site), each with its own bucket, so one customer with a
//     /56 or a /48 spends at most that bucket's rate however many /64s it uses.
//     The /48 bucket is also held to a share of the server's global budget.
//     Proven IPv6 sources pass their address-and-port bucket and all three
//     prefix buckets (owning addresses is cheap in IPv6: proof of one is no
//     bound on how many a host has).
//   - Known sources pass their address-and-port bucket only: an established
//     client is not held back by what its prefix neighbours do.
//   - Table slots are reserved: unproven sources live in a table of half the
//     entries, proven and known ones in the other half, so a flood of spoofed
//     sources cannot take the slots of the sources that proved themselves. A
//     known source is never refused for want of a slot: it takes the least
//     recently used slot of a source that is not known.
//
// Each bucket is a token bucket with its tokens kept in nanoseconds (one
// initiation costs 1e9/rate), so refilling is an addition. Each table is a
// least-recently-used list over a preallocated array. A bucket that has refilled
// completely carries no information and may be forgotten: when a table is full,
// a new bucket replaces the first refilled one among the evictScan least recently
// used, and if there is none the new source is refused rather than given a fresh
// bucket at another's expense (its initiations are retried; the sources already
// in the table keep working).
type limiter struct {
	mu       sync.Mutex
	levels   [numLevels]levelSpec
	unproven table
	proven   table
}

// Bucket levels.
const (
	lvHost = iota // one address and port (proven and known sources)
	lvAddr        // one IPv4 address (unproven)
	lv64          // IPv6 /64
	lv56          // IPv6 /56
	lv48          // IPv6 /48
	numLevels
)

// prefixBits are the IPv6 prefix lengths of lv64, lv56 and lv48.
var prefixBits = [numLevels]int{lv64: 64, lv56: 56, lv48: 48}

// Prefix48Share is the part of the server's global budget (ResponderConfig.Budget)
// one IPv6 /48 may spend at most: a site with many hosts, or one host with a /48,
// cannot take more of the budget than this.
const Prefix48Share = 0.1

// levelSpec is the bucket of one level: ns of tokens per initiation and the
// most a bucket holds.
type levelSpec struct {
	cost, capacity int64
}

func spec(rate float64, burst int) levelSpec {
	cost := int64(float64(time.Second) / rate)
	if cost < 1 {
		cost = 1
	}
	return levelSpec{cost: cost, capacity: cost * int64(burst)}
}

// evictScan bounds the work of finding an evictable entry. Entries are scanned
// from the least recently used, which are the likeliest to have refilled.
const evictScan = 8

// limKey names a bucket: an address (IPv4 mapped into IPv6) masked to its
// level's prefix, and for lvHost the port.
type limKey struct {
	addr  [16]byte
	port  uint16
	level uint8
}

type limEntry struct {
	key        limKey
	last       time.Time
	tokens     int64
	spec       levelSpec
	known      bool // a known source used it: evicted only by force, last
	prev, next int32
}

// table is a fixed-size LRU table of buckets.
type table struct {
	idx  map[limKey]int32
	ents []limEntry
	used int32
	head int32 // most recently used, -1 if empty
	tail int32 // least recently used, -1 if empty
}

func newTable(n int) table {
	n = max(n, 1)
	return table{idx: make(map[limKey]int32, n), ents: make([]limEntry, n), head: -1, tail: -1}
}

// newLimiter returns a limiter that lets each source make rate initiations a
// second with bursts of burst, remembers at most entries buckets, and holds any
// IPv6 /48 to Prefix48Share of budget initiations a second (budget 0: unknown,
// the /48 is held to 4×rate only).
func newLimiter(rate, burst, entries, budget int) *limiter {
	r := float64(rate)
	r48 := 4 * r
	if budget > 0 {
		// The share holds even when it is below a single source's rate
		// (handshake_rate raised for a CGNAT): the budget is what it protects.
		r48 = min(r48, Prefix48Share*float64(budget))
	}
	l := &limiter{unproven: newTable(entries / 2), proven: newTable(entries - entries/2)}
	l.levels[lvHost] = spec(r, burst)
	l.levels[lvAddr] = spec(r, burst)
	l.levels[lv64] = spec(r, burst)
	l.levels[lv56] = spec(2*r, 2*burst)
	l.levels[lv48] = spec(r48, 4*burst)
	return l
}

// keysFor appends the buckets an initiation from src with proof must pass.
func keysFor(dst []limKey, src netip.AddrPort, proof Proof) []limKey {
	a := src.Addr().Unmap().WithZone("")
	v6 := a.Is6()
	if proof != Unproven {
		dst = append(dst, limKey{addr: a.As16(), port: src.Port(), level: lvHost})
		if proof == Known || !v6 {
			return dst
		}
	} else if !v6 {
		return append(dst, limKey{addr: a.As16(), level: lvAddr})
	}
	for _, lv := range []uint8{lv64, lv56, lv48} {
		p, _ := a.Prefix(prefixBits[lv])
		dst = append(dst, limKey{addr: p.Addr().As16(), level: lv})
	}
	return dst
}

// allow takes a token from every bucket an initiation from src with proof must
// pass, and reports whether each had one (if one has none, none is taken).
func (l *limiter) allow(src netip.AddrPort, proof Proof, now time.Time) bool {
	var buf [4]limKey
	keys := keysFor(buf[:0], src, proof)
	l.mu.Lock()
	defer l.mu.Unlock()
	t := &l.proven
	if proof == Unproven {
		t = &l.unproven
	}
	return t.take(keys, &l.levels, proof == Known, now)
}

// take is allow on one table; force (a known source) evicts to make room.
func (t *table) take(keys []limKey, levels *[numLevels]levelSpec, force bool, now time.Time) bool {
	var at [4]int32
	// Existing buckets first: a bucket that is short refuses before any new
	// entry displaces another.
	missing := false
	for i, k := range keys {
		j, ok := t.idx[k]
		if !ok {
			at[i] = -1
			missing = true
			continue
		}
		at[i] = j
		e := &t.ents[j]
		if elapsed := int64(now.Sub(e.last)); elapsed > 0 {
			e.tokens = min(e.spec.capacity, e.tokens+elapsed)
			e.last = now
		}
		e.known = e.known || force
		t.touch(j)
		if e.tokens < e.spec.cost {
			return false
		}
	}
	if missing {
		for i, k := range keys {
			if at[i] >= 0 {
				continue
			}
			j := t.slot(at[:len(keys)], force, now)
			if j < 0 {
				return false
			}
			s := levels[k.level]
			t.ents[j] = limEntry{key: k, last: now, tokens: s.capacity, spec: s, known: force, prev: -1, next: -1}
			t.idx[k] = j
			t.pushFront(j)
			at[i] = j
		}
	}
	for _, j := range at[:len(keys)] {
		t.ents[j].tokens -= t.ents[j].spec.cost
	}
	return true
}

// slot returns a free entry, or evicts one: the first refilled one among the
// evictScan least recently used, or with force the least recently used entry
// not of a known source (any entry, failing that). It never evicts the entries
// in keep (the buckets of the initiation being admitted). -1: none.
func (t *table) slot(keep []int32, force bool, now time.Time) int32 {
	if int(t.used) < len(t.ents) {
		t.used++
		return t.used - 1
	}
	kept := func(i int32) bool {
		for _, k := range keep {
			if k == i {
				return true
			}
		}
		return false
	}
	victim := int32(-1)
	for i, n := t.tail, 0; i >= 0 && n < evictScan; i, n = t.ents[i].prev, n+1 {
		if !kept(i) && t.refilledBy(&t.ents[i], now) {
			victim = i
			break
		}
	}
	if victim < 0 && force {
		// A known client is never refused a slot: it takes the least recently
		// used entry of a source that is not known, or if every entry is
		// known, the least recently used. At worst that scans the whole list,
		// which only known sources (a bounded set) can cause, and only while
		// every bucket is active.
		for i := t.tail; i >= 0; i = t.ents[i].prev {
			if kept(i) {
				continue
			}
			if victim < 0 {
				victim = i
			}
			if !t.ents[i].known {
				victim = i
				break
			}
		}
	}
	if victim < 0 {
		return -1
	}
	delete(t.idx, t.ents[victim].key)
	t.unlink(victim)
	return victim
}

// refilledBy reports whether e's bucket is full at now, i.e. forgetting e changes
// nothing.
func (t *table) refilledBy(e *limEntry, now time.Time) bool {
	return int64(now.Sub(e.last)) >= e.spec.capacity-e.tokens
}

func (t *table) touch(i int32) {
	if t.head == i {
		return
	}
	t.unlink(i)
	t.pushFront(i)
}

func (t *table) unlink(i int32) {
	e := &t.ents[i]
	if e.prev >= 0 {
		t.ents[e.prev].next = e.next
	} else {
		t.head = e.next
	}
	if e.next >= 0 {
		t.ents[e.next].prev = e.prev
	} else {
		t.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

func (t *table) pushFront(i int32) {
	e := &t.ents[i]
	e.prev, e.next = -1, t.head
	if t.head >= 0 {
		t.ents[t.head].prev = i
	}
	t.head = i
	if t.tail < 0 {
		t.tail = i
	}
}

// len returns the number of buckets remembered (for tests).
func (l *limiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.unproven.idx) + len(l.proven.idx)
}
