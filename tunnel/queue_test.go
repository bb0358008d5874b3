package tunnel

import (
	"testing"
	"time"

	"github.com/braid-vpn/braid/aqm"
)

// The per-peer queue: a packet of a flow with nothing in the bulk ring (and up
// to sparsePerFlow of its packets waiting) leaves before the bulk backlog; a
// flow's own packets keep their order; a flow that keeps a backlog never jumps
// the queue.
func TestCCQueueSparseFirst(t *testing.T) {
	var q ccQueue
	q.init(16, 8, aqm.DefaultConfig())
	now := time.Now()
	pkt := func(id int) *packetBuf {
		pb := &packetBuf{b: make([]byte, 100)}
		pb.b[0] = byte(id)
		pb.start, pb.end = 0, 100
		return pb
	}
	push := func(id int, flow uint16) {
		if !q.push(ccEntry{pb: pkt(id), at: now, flow: flow}) {
			t.Fatalf("push %d refused", id)
		}
	}
	// Bulk flow 1: packets 1–6; its first sparsePerFlow (4) go to the sparse
	// ring and leave, 5 and 6 wait in the bulk ring.
	for id := 1; id <= 6; id++ {
		push(id, 1)
	}
	var got []int
	for range sparsePerFlow {
		r := q.next()
		got = append(got, int(r.front().pb.b[0]))
		q.pop(r)
	}
	// Two pings of flow 2 arrive together, then flow 1 again: both pings
	// leave before flow 1's backlog (with one sparse packet per flow the
	// second ping went behind the backlog, and every later ping after it).
	push(7, 2)
	push(8, 2)
	push(9, 1)
	for r := q.next(); r != nil; r = q.next() {
		got = append(got, int(r.front().pb.b[0]))
		q.pop(r)
	}
	want := []int{1, 2, 3, 4, 7, 8, 5, 6, 9}
	if len(got) != len(want) {
		t.Fatalf("left in order %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("left in order %v, want %v", got, want)
		}
	}
	if q.len() != 0 || q.bulk.bytes != 0 || q.sparse.bytes != 0 {
		t.Fatalf("drained queue: len %d, bytes %d/%d", q.len(), q.bulk.bytes, q.sparse.bytes)
	}
	for f, n := range q.inq {
		if n != 0 {
			t.Fatalf("flow %d still counts %d queued", f, n)
		}
	}
	// A flow has at most sparsePerFlow packets in the sparse ring.
	var one ccQueue
	one.init(16, 8, aqm.DefaultConfig())
	for id := range sparsePerFlow + 2 {
		one.push(ccEntry{pb: pkt(id), at: now, flow: 3})
	}
	if one.sparse.size != sparsePerFlow || one.bulk.size != 2 || one.inSparse[3] != sparsePerFlow {
		t.Fatalf("one flow: sparse %d, bulk %d, counted %d; want %d, 2, %d", one.sparse.size, one.bulk.size, one.inSparse[3], sparsePerFlow, sparsePerFlow)
	}
	// The sparse ring is bounded: beyond sparseSlots one-packet flows the rest
	// wait in the bulk ring.
	var big ccQueue
	big.init(2*sparseSlots, 4*sparseSlots, aqm.DefaultConfig())
	for f := 0; f < sparseSlots+3; f++ {
		if !big.push(ccEntry{pb: pkt(f), at: now, flow: uint16(f)}) {
			t.Fatalf("push flow %d refused", f)
		}
	}
	if big.sparse.size != sparseSlots || big.bulk.size != 3 {
		t.Fatalf("sparse %d, bulk %d; want %d and 3", big.sparse.size, big.bulk.size, sparseSlots)
	}
}

// One-packet flows cannot starve the bulk ring: after sparseRun of them one
// bulk packet leaves — unless its flow still has its older packet in the
// sparse ring, which must leave first.
func TestCCQueueSparseRun(t *testing.T) {
	var q ccQueue
	q.init(64, 128, aqm.DefaultConfig())
	now := time.Now()
	id := 0
	push := func(flow uint16) {
		id++
		pb := &packetBuf{b: make([]byte, 100)}
		pb.b[0], pb.b[1] = byte(id), byte(flow)
		pb.start, pb.end = 0, 100
		if !q.push(ccEntry{pb: pb, at: now, flow: flow}) {
			t.Fatalf("push %d refused", id)
		}
	}
	for range sparsePerFlow {
		push(1) // sparse: flow 1's first packets
	}
	push(1) // bulk
	push(1) // bulk
	for f := uint16(10); f < 30; f++ {
		push(f) // 20 one-packet flows: sparse
	}
	var flows []int
	for r := q.next(); r != nil; r = q.next() {
		flows = append(flows, int(r.front().pb.b[1]))
		q.pop(r)
	}
	// Flow 1's sparse packets leave first; after sparseRun sparse packets in
	// a row (flow 1's four and four more) a bulk one (flow 1's fifth), then
	// eight sparse and the sixth.
	want := []int{1, 1, 1, 1, 10, 11, 12, 13, 1, 14, 15, 16, 17, 18, 19, 20, 21, 1}
	for i, w := range want {
		if flows[i] != w {
			t.Fatalf("flows left in order %v, want %v first", flows, want)
		}
	}

	// Flow 5's first packet is deep in the sparse ring when its second is at
	// the bulk ring's front and the run is spent: the sparse ring goes on.
	var q2 ccQueue
	q2.init(64, 128, aqm.DefaultConfig())
	q = q2
	for f := uint16(10); f < 20; f++ {
		push(f)
	}
	for range sparsePerFlow {
		push(5) // sparse, behind ten others
	}
	push(5) // bulk front
	flows = flows[:0]
	for r := q.next(); r != nil; r = q.next() {
		flows = append(flows, int(r.front().pb.b[1]))
		q.pop(r)
	}
	for _, f := range flows[len(flows)-sparsePerFlow-1:] {
		if f != 5 {
			t.Fatalf("flows left in order %v: flow 5's packets must be the last %d", flows, sparsePerFlow+1)
		}
	}
}
