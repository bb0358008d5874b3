package aqm

import (
	"math"
	"time"
)

// Defaults of Config.
const (
	// DefaultTarget is the acceptable standing queue delay (RFC 8289's 5 ms).
	DefaultTarget = 5 * time.Millisecond
	// DefaultInterval is the window a queue may stay above Target before
	// CoDel acts, and the first gap of the control law (RFC 8289's 100 ms).
	DefaultInterval = 100 * time.Millisecond
	// DefaultMinBytes is the backlog at or below which CoDel never drops:
	// about one full-size packet (RFC 8289's maxpacket, an MTU).
	DefaultMinBytes = 1500
)

// reuseWindow is RFC 8289's 16 intervals: re-entering the dropping state
// this soon after the last scheduled drop starts from the previous drop rate
// rather than from count 1.
const reuseWindow = 16

// Config holds the tunables of a CoDel. Zero fields take the value of
// DefaultConfig, so Config{} is a valid configuration.
type Config struct {
	// Target is the acceptable standing queue delay (default 5ms). A packet
	// whose sojourn time is below Target resets CoDel's above-target timer.
	Target time.Duration
	// Interval is how long the sojourn time must stay at or above Target
	// before the first drop, and the gap the control law starts from
	// (default 100ms). It should be about one worst-case inner RTT.
	Interval time.Duration
	// MinBytes is the backlog at or below which CoDel neither drops nor marks
	// however long the packets waited (RFC 8289's maxpacket rule): a queue
	// holding one packet cannot be drained any faster by dropping. Default
	// 1500; a negative value disables the floor.
	MinBytes int
	// Patient puts off a due drop, once, by one gap of the control law when
	// the backlog has fallen by more than a tenth from its peak since the
	// last drop: the flows are answering it, and a second drop before that
	// answer has drained the queue cuts a responsive flow twice. Once per
	// drop, so that a backlog which only wavers is still dropped at no less
	// than half RFC 8289's rate. Not in RFC 8289, whose Interval is meant to
	// cover a flow's answer; a TCP flow in slow start keeps filling the
	// queue for a round trip after a drop and then drains it over another
	// (PRR), longer than the control law's first gap when the queue
	// itself is a large part of the round trip. A backlog that does not
	// fall (unresponsive or too many flows) is dropped on RFC 8289's
	// schedule.
	Patient bool
}

// DefaultConfig returns the defaults: Target 5ms, Interval 100ms, MinBytes 1500.
func DefaultConfig() Config {
	return Config{Target: DefaultTarget, Interval: DefaultInterval, MinBytes: DefaultMinBytes}
}

// CoDel is the state of RFC 8289's controlled-delay AQM for one FIFO. The
// caller owns the queue and the clock: it timestamps packets on enqueue and
// asks OnDequeue about each packet leaving the head. A CoDel is not safe for
// concurrent use; it belongs to whoever dequeues. The zero value is not
// usable; call New.
type CoDel struct {
	target   time.Duration
	interval time.Duration
	minBytes int

	// firstAbove is RFC 8289's first_above_time: when the sojourn time, if
	// it stays at or above target, will have done so for a whole interval.
	// It is meaningful only while aboveSet (RFC 8289 uses the value 0).
	firstAbove time.Time
	aboveSet   bool
	dropping   bool      // in the dropping state
	dropNext   time.Time // when the next drop is due while dropping
	count      uint32    // drops (or marks) of the current or last dropping episode
	lastCount  uint32    // count when the current or last episode was entered
	patient    bool      // Config.Patient
	peak       int       // Patient: the largest backlog since the last drop
	putOff     bool      // Patient: the drop now due was put off once already
}

// New returns a CoDel with cfg's tunables; zero fields take the defaults of
// DefaultConfig (as do negative Target and Interval).
func New(cfg Config) *CoDel {
	if cfg.Target <= 0 {
		cfg.Target = DefaultTarget
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.MinBytes == 0 {
		cfg.MinBytes = DefaultMinBytes
	}
	return &CoDel{target: cfg.Target, interval: cfg.Interval, minBytes: cfg.MinBytes, patient: cfg.Patient}
}

// Retune sets Target and Interval (values ≤ 0 leave one as it is), keeping
// the state: an owner whose flows' round-trip time changes retunes CoDel to it
// (RFC 8289 §4.4: Interval on the order of the worst-case RTT through the
// bottleneck, Target a fraction of it).
func (c *CoDel) Retune(target, interval time.Duration) {
	if target > 0 {
		c.target = target
	}
	if interval > 0 {
		c.interval = interval
	}
}

// Dropping reports whether CoDel is in its dropping state, in which it drops
// (or marks) packets at the rate of the control law for as long as the
// sojourn time stays at or above Target.
func (c *CoDel) Dropping() bool { return c.dropping }

// Count returns the number of drops (or marks) of the current dropping
// episode, or of the last one once CoDel has left the dropping state; it
// includes the count carried over by RFC 8289's reuse rule. It sets the
// current drop rate: the gap to the next drop is Interval/sqrt(Count).
func (c *CoDel) Count() uint32 { return c.count }

// OnDequeue is called for the packet at the head of the queue as it is about
// to leave, at time now. sojourn is how long that packet waited in the queue;
// backlog is the number of bytes still queued behind it, NOT counting the
// packet itself (RFC 8289 measures bytes() after base_dequeue).
//
// It reports true when the packet must be dropped, or CE-marked instead if it
// is ECN-capable (see MarkCE). A caller that drops the packet calls OnDequeue
// again, at the same now, for the next packet, and so on until OnDequeue
// reports false (that packet is sent) or the queue runs empty (OnEmpty): this
// is RFC 8289's dequeue loop, which drops as many packets as the control law
// has fallen behind. A caller that marks the packet sends it and does not
// loop.
//
//	for {
//		p, ok := q.pop()
//		if !ok {
//			c.OnEmpty(now)
//			return nil
//		}
//		if !c.OnDequeue(now.Sub(p.enqueued), q.bytes, now) || aqm.MarkCE(p.data) {
//			return p
//		}
//		drop(p)
//	}
func (c *CoDel) OnDequeue(sojourn time.Duration, backlog int, now time.Time) bool {
	okToDrop := c.okToDrop(sojourn, backlog, now)
	if c.dropping {
		if !okToDrop {
			// The sojourn time went below target (or the queue is nearly
			// empty): leave the dropping state.
			c.dropping = false
			return false
		}
		c.peak = max(c.peak, backlog)
		if now.Before(c.dropNext) {
			return false
		}
		if c.patient && !c.putOff && backlog*10 < c.peak*9 {
			// The flows are answering: drop one gap later, at the same
			// count, if the sojourn is still above target then.
			c.dropNext, c.putOff = c.controlLaw(now), true
			return false
		}
		// A drop is due. RFC 8289 schedules the next one (drop_next =
		// control_law(drop_next, count)) only if the following packet is
		// still ok to drop; we schedule it now, as Linux does for a mark,
		// because the caller may mark and not loop. See the package
		// documentation.
		if c.count < math.MaxUint32 {
			c.count++
		}
		c.dropNext = c.controlLaw(c.dropNext)
		c.peak, c.putOff = backlog, false
		return true
	}
	if !okToDrop {
		return false
	}
	// The sojourn time has stayed at or above target for a whole interval:
	// drop this packet and enter the dropping state. If the last episode
	// ended recently, start from the drop rate it had reached (its count
	// minus the count it was entered with) rather than from 1, since the
	// rate that controlled the queue then is probably about right now.
	c.dropping = true
	delta := c.count - c.lastCount
	c.count = 1
	if delta > 1 && now.Sub(c.dropNext) < reuseWindow*c.interval {
		c.count = delta
	}
	c.dropNext = c.controlLaw(now)
	c.lastCount = c.count
	c.peak, c.putOff = backlog, false
	return true
}

// OnEmpty tells CoDel that the queue ran empty at now. As RFC 8289's dequeue
// of an empty queue does, it clears first_above_time (the next packet above
// target starts a new interval) and leaves the dropping state; the count of
// the last episode is kept for the reuse rule.
func (c *CoDel) OnEmpty(now time.Time) {
	c.aboveSet = false
	c.dropping = false
}

// okToDrop is RFC 8289's dodequeue: it tracks whether the sojourn time has
// been at or above target for a whole interval and reports whether it has.
func (c *CoDel) okToDrop(sojourn time.Duration, backlog int, now time.Time) bool {
	if sojourn < c.target || backlog <= c.minBytes {
		c.aboveSet = false
		return false
	}
	if !c.aboveSet {
		c.firstAbove = now.Add(c.interval)
		c.aboveSet = true
		return false
	}
	return !now.Before(c.firstAbove)
}

// controlLaw is RFC 8289's control_law: t + interval/sqrt(count).
func (c *CoDel) controlLaw(t time.Time) time.Time {
	if c.count <= 1 {
		return t.Add(c.interval)
	}
	return t.Add(time.Duration(float64(c.interval) / math.Sqrt(float64(c.count))))
}
