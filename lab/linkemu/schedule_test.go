package linkemu

import (
	"strings"
	"testing"
	"time"
)

func TestScheduleValidate(t *testing.T) {
	for _, c := range []struct {
		s    Schedule
		want string
	}{
		{Schedule{Period: -1}, "period"},
		{Schedule{Steps: []Step{{At: -1}}}, "step 0: negative"},
		{Schedule{Steps: []Step{{Delay: -1}}}, "step 0: negative"},
		{Schedule{Steps: []Step{{At: 1, DropFor: -1}}}, "step 0: negative"},
		{Schedule{Steps: []Step{{At: 5}, {At: 5}}}, "step 1 at 5ns not after step 0"},
		{Schedule{Period: 10, Steps: []Step{{At: 10}}}, "not within the period"},
		{Schedule{Steps: []Step{{At: 0, DropFor: 6}, {At: 5}}}, "step 0: loss burst until 6ns runs past 5ns"},
		{Schedule{Period: 10, Steps: []Step{{At: 5, DropFor: 6}}}, "step 0: loss burst"},
	} {
		err := c.s.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.s, err, c.want)
		}
	}
	for _, s := range []*Schedule{nil, {}, {Period: 10, Steps: []Step{{At: 5, DropFor: 5}}}, {Steps: []Step{{At: 5, DropFor: time.Hour}}}} {
		if err := s.Validate(); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
}

func TestScheduleAt(t *testing.T) {
	steps := []Step{{At: 10 * ms, Delay: 30 * ms, DropFor: 2 * ms}, {At: 50 * ms, Delay: 5 * ms}}
	once := &Schedule{Steps: steps}
	every := &Schedule{Period: 100 * ms, Steps: steps}
	for _, c := range []struct {
		s    *Schedule
		t    time.Duration
		d    time.Duration
		drop bool
	}{
		{once, 0, 0, false}, // before the first step: Shape.Delay holds
		{once, 10*ms - 1, 0, false},
		{once, 10 * ms, 30 * ms, true},
		{once, 12*ms - 1, 30 * ms, true},
		{once, 12 * ms, 30 * ms, false},
		{once, 50 * ms, 5 * ms, false},
		{once, time.Hour, 5 * ms, false}, // the last step holds
		{once, 110 * ms, 5 * ms, false},
		{every, 5 * ms, 0, false},
		{every, 105 * ms, 5 * ms, false}, // the previous period's last step
		{every, 110 * ms, 30 * ms, true},
		{every, 111 * ms, 30 * ms, true},
		{every, 150 * ms, 5 * ms, false},
		{every, 1000*time.Second + 11*ms, 30 * ms, true},
		{(*Schedule)(nil), time.Second, 0, false},
	} {
		if d, drop := c.s.DelayAt(c.t), c.s.DroppingAt(c.t); d != c.d || drop != c.drop {
			t.Errorf("period %v at %v: delay %v, dropping %v; want %v, %v", c.s.period(), c.t, d, drop, c.d, c.drop)
		}
	}
}

func (s *Schedule) period() time.Duration {
	if s == nil {
		return -1
	}
	return s.Period
}

// The pipe takes the schedule's delay at a frame's departure from the
// bottleneck, Shape.Delay before the first step, drops in bursts by
// arrival time (counted apart from the loss model's), and keeps the FIFO
// when the delay falls.
func TestPipeSchedule(t *testing.T) {
	sc := &Schedule{Steps: []Step{{At: 100 * ms, Delay: 40 * ms, DropFor: 10 * ms}}}
	p := newPipe(Shape{Delay: 20 * ms, Schedule: sc}, AtoB)
	p.restart(time.Second)
	for _, c := range []struct {
		now, at time.Duration
		v       verdict
	}{
		{1050 * ms, 1070 * ms, forward},
		{1100 * ms, 0, dropBurst},
		{1110*ms - 1, 0, dropBurst},
		{1110 * ms, 1150 * ms, forward},
	} {
		if at, v := p.admit(c.now, 100); at != c.at || v != c.v {
			t.Errorf("at %v: (%v, %v), want (%v, %v)", c.now, at, v, c.at, c.v)
		}
	}

	// 1 opportunity per ms: frame i (full size, all arriving at 0) departs
	// at i+1 ms. The delay falls from 50 to 10 ms at 10 ms: frames leaving
	// the bottleneck from then on would arrive before earlier ones.
	fall := &Schedule{Steps: []Step{{At: 0, Delay: 50 * ms}, {At: 10 * ms, Delay: 10 * ms}}}
	p = newPipe(Shape{Trace: everyMs(t, 1), Schedule: fall}, AtoB)
	prev := time.Duration(0)
	for i := range 100 {
		dep := time.Duration(i+1) * ms
		want := dep + 50*ms
		if dep >= 10*ms {
			want = max(dep+10*ms, 59*ms) // not before the frame that left at 9 ms
		}
		at, v := p.admit(0, TraceMTU)
		if v != forward || at != want || at < prev {
			t.Fatalf("frame %d (departs %v): sent at %v (%v), want %v after %v", i, dep, at, v, want, prev)
		}
		prev = at
	}
}

// A burst's frames are still judged by the loss model: its decisions do
// not depend on when the bursts fall.
func TestBurstAfterLoss(t *testing.T) {
	s := Shape{Loss: UniformLoss(0.5), Seed: 9, Schedule: &Schedule{Steps: []Step{{At: 0, DropFor: time.Hour}}}}
	p := newPipe(s, AtoB)
	want := Drops(s, AtoB, 100)
	for i := range 100 {
		_, v := p.admit(time.Duration(i), 100)
		if lost := v == dropLoss; lost != want[i] || !lost && v != dropBurst {
			t.Fatalf("frame %d: verdict %v, loss model says lost=%v", i, v, want[i])
		}
	}
}
