package linkemu

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Schedule changes a direction's delay over time and drops every frame
// during short bursts (a satellite handover). Its time is the direction's
// time since the trace's (re)start (Shape.Trace), with or without a trace.
// Like a Trace it is read, never written, by the links using it: do not
// change it while one runs.
type Schedule struct {
	Period time.Duration // the schedule repeats after this (0 = does not repeat: the last step holds)
	Steps  []Step        // sorted by At, At < Period when Period > 0
}

// Step is one change of a Schedule.
type Step struct {
	At      time.Duration // from the (re)start
	Delay   time.Duration // the one-way delay from At on (replaces Shape.Delay; Shape.Delay holds before the first step)
	DropFor time.Duration // frames arriving in [At, At+DropFor) are lost (Stats.DroppedBurst)
}

// Validate reports steps out of order, negative values, and bursts that run
// into the next step (or past the period): a burst belongs to its step, so
// at most one burst covers any time.
func (s *Schedule) Validate() error {
	if s == nil {
		return nil
	}
	if s.Period < 0 {
		return fmt.Errorf("linkemu: schedule period %v is negative", s.Period)
	}
	for i, st := range s.Steps {
		switch {
		case st.At < 0 || st.Delay < 0 || st.DropFor < 0:
			return fmt.Errorf("linkemu: schedule step %d: negative time (at %v, delay %v, drop for %v)", i, st.At, st.Delay, st.DropFor)
		case i > 0 && st.At <= s.Steps[i-1].At:
			return fmt.Errorf("linkemu: schedule step %d at %v not after step %d at %v", i, st.At, i-1, s.Steps[i-1].At)
		case s.Period > 0 && st.At >= s.Period:
			return fmt.Errorf("linkemu: schedule step %d at %v, not within the period %v", i, st.At, s.Period)
		}
		end, next := st.At+st.DropFor, s.Period
		if i+1 < len(s.Steps) {
			next = s.Steps[i+1].At
		}
		if next > 0 && end > next {
			return fmt.Errorf("linkemu: schedule step %d: loss burst until %v runs past %v (the next step or the period)", i, end, next)
		}
	}
	return nil
}

// step returns the index of the step in effect at t (-1 before the first
// step of the first period) and how long it has been in effect.
func (s *Schedule) step(t time.Duration) (int, time.Duration) {
	if s == nil || len(s.Steps) == 0 {
		return -1, 0
	}
	t = max(t, 0)
	wrapped := false
	if s.Period > 0 {
		wrapped, t = t >= s.Period, t%s.Period
	}
	i, found := slices.BinarySearchFunc(s.Steps, t, func(st Step, t time.Duration) int { return cmp.Compare(st.At, t) })
	if !found {
		i--
	}
	switch {
	case i >= 0:
		return i, t - s.Steps[i].At
	case wrapped: // before the first step: the last of the previous period holds
		i = len(s.Steps) - 1
		return i, t + s.Period - s.Steps[i].At
	}
	return -1, 0
}

// DelayAt is the one-way delay the schedule sets at t, or 0 before its
// first step (where the direction's Shape.Delay holds).
func (s *Schedule) DelayAt(t time.Duration) time.Duration {
	if i, _ := s.step(t); i >= 0 {
		return s.Steps[i].Delay
	}
	return 0
}

// DroppingAt reports whether a frame arriving at t falls in a loss burst.
func (s *Schedule) DroppingAt(t time.Duration) bool {
	i, since := s.step(t)
	return i >= 0 && since < s.Steps[i].DropFor
}
