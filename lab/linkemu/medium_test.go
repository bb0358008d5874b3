package linkemu

import (
	"strings"
	"testing"
	"time"
)

// Two pipes on one 10 Mbit/s medium: a 1250-byte frame takes 1 ms of the
// medium whoever sends it, so interleaved frames depart 1 ms apart in
// arrival order, and each pipe adds its own delay afterwards.
func TestMediumSharesCapacity(t *testing.T) {
	m := NewMedium(10_000_000, 3)
	a := newPipe(Shape{Delay: 5 * ms, Medium: m}, AtoB)
	b := newPipe(Shape{Delay: 20 * ms, Medium: m}, BtoA)
	steps := []struct {
		p    *pipe
		want verdictAt
	}{
		{a, verdictAt{forward, 1*ms + 5*ms}},
		{b, verdictAt{forward, 2*ms + 20*ms}},
		{a, verdictAt{forward, 3*ms + 5*ms}},
		// Three frames wait or are on the air: the shared queue is full.
		{b, verdictAt{dropQueue, 0}},
	}
	for i, s := range steps {
		at, v := s.p.admit(0, 1250)
		if v != s.want.v || at != s.want.at {
			t.Errorf("frame %d: (%v, %v), want (%v, %v)", i, at, v, s.want.at, s.want.v)
		}
	}
	// After 1 ms the first frame has left: room for one more, which
	// queues behind the third (departs at 4 ms).
	if at, v := b.admit(1*ms, 1250); v != forward || at != 4*ms+20*ms {
		t.Errorf("after 1 ms: (%v, %v), want (24ms, forward)", at, v)
	}
	// An arrival stamped earlier than one already admitted (members read
	// the clock before taking the medium's lock) is treated as simultaneous.
	if at, v := a.admit(0, 1250); v != dropQueue {
		t.Errorf("late stamp: (%v, %v), want a drop: the queue is full at 1 ms", at, v)
	}
	st := m.Stats()
	if st.Frames != 4 || st.Bytes != 4*1250 || st.Dropped != 2 {
		t.Errorf("stats %+v, want 4 frames, 5000 bytes, 2 dropped", st)
	}
}

type verdictAt struct {
	v  verdict
	at time.Duration
}

func TestMediumShapeValidate(t *testing.T) {
	m := NewMedium(1_000_000, 0)
	if err := (Shape{Medium: m, Delay: ms}).Validate(); err != nil {
		t.Errorf("medium with delay: %v", err)
	}
	err := (Shape{Medium: m, Rate: 1000}).Validate()
	if err == nil || !strings.Contains(err.Error(), "shared medium") {
		t.Errorf("medium with its own rate: %v", err)
	}
}
