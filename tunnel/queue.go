package tunnel

import (
	"sync"
	"time"

	"github.com/braid-vpn/braid/aqm"
)

// The per-peer queue (congestion != "none"): packets wait here while every
// usable path's window or pacer is full. It holds two FIFO rings:
//
//   - sparse: a packet whose flow has nothing queued, or only up to
//     sparsePerFlow-1 packets and all of them here, goes here and leaves
//     first — the new-flow priority of FQ-CoDel (RFC 8290 §4.1) without its
//     per-flow queues. A ping, a DNS query, a voice frame or the inner TCP's
//     own ACKs then do not wait behind a bulk transfer's standing queue;
//   - bulk: everything else, in order, managed by CoDel.
//
// Order within a flow holds: a flow's packet goes to the sparse ring only when
// none of its packets waits in the bulk ring, so the sparse ring holds a
// flow's oldest packets, and the bulk ring lets a packet leave only when its
// flow has none in the sparse ring. A flow has at most sparsePerFlow packets
// there; one that keeps a backlog (a bulk transfer) has none. With one packet
// per flow, two pings that arrived together (the first still waiting for
// room) sent the second to the bulk ring, and every later ping followed it
// there to keep the order: the ping flow then waited the whole standing queue
// for as long as it stood (seen in the lab as probes delayed 40 ms at the
// server while 10 ms apart). So that a stream of one-packet flows cannot starve the
// bulk ring, one bulk packet leaves after sparseRun sparse ones (as FQ-CoDel
// moves a new flow to the old list after a quantum). Flows are the reorder
// buffer's flow buckets (reorder.FlowID), so two flows hashed to one bucket count as one.

// ccEntry is a packet waiting for window room.
type ccEntry struct {
	pb   *packetBuf
	at   time.Time
	flow uint16
}

// ccRing is a FIFO ring of waiting packets.
type ccRing struct {
	buf        []ccEntry
	head, size int
	bytes      int
}

func (r *ccRing) push(e ccEntry) bool {
	if r.size == len(r.buf) {
		return false
	}
	r.buf[(r.head+r.size)%len(r.buf)] = e
	r.size++
	r.bytes += e.pb.end - e.pb.start
	return true
}

func (r *ccRing) front() *ccEntry { return &r.buf[r.head] }

func (r *ccRing) pop() ccEntry {
	e := r.buf[r.head]
	r.bytes -= e.pb.end - e.pb.start
	r.buf[r.head] = ccEntry{}
	r.head = (r.head + 1) % len(r.buf)
	r.size--
	return e
}

// sparseSlots bounds the sparse ring; beyond it one-packet flows wait in the
// bulk ring.
const sparseSlots = 64

// sparsePerFlow is how many packets of one flow may wait in the sparse ring.
const sparsePerFlow = 4

// sparseRun is how many sparse packets may leave in a row while bulk packets
// wait.
const sparseRun = 8

// ccQueue is the per-peer queue: the two rings, the per-flow count that picks
// between them, and CoDel on the bulk ring.
type ccQueue struct {
	bulk, sparse ccRing
	inq          []uint16 // queued packets per flow bucket
	inSparse     []uint8  // the flow bucket's packets in the sparse ring
	// mem holds the rings and counts while packets may wait (nil: released,
	// see release); packets and flows are their sizes.
	mem            *ccQueueMem
	packets, flows int
	run            int // sparse packets that left in a row while bulk ones waited
	codel          *aqm.CoDel
	// sojourn is the smoothed time packets waited (EWMA 1/16 per packet leaving
	// the queue); marks and drops count CoDel's verdicts.
	sojourn      time.Duration
	marks, drops uint64
}

func (q *ccQueue) init(packets, flows int, cfg aqm.Config) {
	q.packets, q.flows = max(packets, 1), max(flows, 1)
	q.codel = aqm.New(cfg)
}

// ccQueueMem is a ccQueue's memory (about 50 KiB with the default tunables):
// taken when a packet first has to wait, given back when the peer is idle.
type ccQueueMem struct {
	bulk, sparse []ccEntry
	inq          []uint16
	inSparse     []uint8
}

// ccQueueMems recycles the memory of idle peers' queues.
var ccQueueMems sync.Pool

// take gives the queue its memory; its counts are all zero (an empty queue).
func (q *ccQueue) take() {
	m, _ := ccQueueMems.Get().(*ccQueueMem)
	if m == nil || len(m.bulk) != q.packets || len(m.inq) != q.flows {
		m = &ccQueueMem{
			bulk:     make([]ccEntry, q.packets),
			sparse:   make([]ccEntry, sparseSlots),
			inq:      make([]uint16, q.flows),
			inSparse: make([]uint8, q.flows),
		}
	}
	q.mem = m
	q.bulk = ccRing{buf: m.bulk}
	q.sparse = ccRing{buf: m.sparse}
	q.inq, q.inSparse = m.inq, m.inSparse
}

// release gives the memory of an empty queue back (packets that wait keep it).
func (q *ccQueue) release() {
	if q.mem == nil || q.len() > 0 {
		return
	}
	ccQueueMems.Put(q.mem)
	q.mem = nil
	q.bulk, q.sparse = ccRing{}, ccRing{}
	q.inq, q.inSparse = nil, nil
}

func (q *ccQueue) len() int { return q.bulk.size + q.sparse.size }

// push queues e in its ring; false when that ring is full.
func (q *ccQueue) push(e ccEntry) bool {
	if q.mem == nil {
		q.take()
	}
	r := &q.bulk
	if n := q.inSparse[e.flow]; uint16(n) == q.inq[e.flow] && n < sparsePerFlow && q.sparse.size < len(q.sparse.buf) {
		r = &q.sparse
	}
	if q.inq[e.flow] == ^uint16(0) || !r.push(e) {
		return false
	}
	q.inq[e.flow]++
	if r == &q.sparse {
		q.inSparse[e.flow]++
	}
	return true
}

// next is the ring the next packet leaves from (nil when both are empty): the
// sparse ring, unless sparseRun of its packets left in a row while bulk ones
// waited and the bulk ring's front has nothing older in the sparse ring.
func (q *ccQueue) next() *ccRing {
	switch {
	case q.sparse.size > 0 && (q.bulk.size == 0 || q.run < sparseRun || q.inSparse[q.bulk.front().flow] > 0):
		return &q.sparse
	case q.bulk.size > 0:
		return &q.bulk
	}
	return nil
}

// pop removes r's front packet.
func (q *ccQueue) pop(r *ccRing) {
	if r == &q.sparse && q.bulk.size > 0 {
		q.run++
	} else {
		q.run = 0
	}
	e := r.pop()
	q.inq[e.flow]--
	if r == &q.sparse {
		q.inSparse[e.flow]--
	}
}
