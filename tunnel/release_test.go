package tunnel

import (
	"testing"
	"time"

	"github.com/braid-vpn/braid/aqm"
)

// The per-peer queue takes its rings with the first packet that waits, keeps
// them while packets wait, and gives them back empty; packets queued after a
// release leave in order, and the per-flow counts start from zero again.
func TestCCQueueRelease(t *testing.T) {
	var q ccQueue
	q.init(16, 8, aqm.DefaultConfig())
	if q.mem != nil {
		t.Fatal("rings taken before any packet")
	}
	now := time.Now()
	for round := range 3 {
		for id := range 10 {
			pb := &packetBuf{b: []byte{byte(id)}, end: 1}
			if !q.push(ccEntry{pb: pb, at: now, flow: 3}) {
				t.Fatalf("round %d: push %d refused", round, id)
			}
		}
		q.release()
		if q.mem == nil || q.len() != 10 {
			t.Fatalf("round %d: released with %d packets waiting", round, q.len())
		}
		for id := range 10 {
			r := q.next()
			if r == nil || r.front().pb.b[0] != byte(id) {
				t.Fatalf("round %d: packet %d out of order", round, id)
			}
			q.pop(r)
		}
		if q.inq[3] != 0 || q.inSparse[3] != 0 || q.bulk.bytes != 0 {
			t.Fatalf("round %d: counts left: %d %d %d", round, q.inq[3], q.inSparse[3], q.bulk.bytes)
		}
		q.release()
		if q.mem != nil || q.inq != nil || q.next() != nil {
			t.Fatalf("round %d: empty queue kept its rings", round)
		}
	}
}
