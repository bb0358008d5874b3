package aqm

import (
	"testing"
	"time"
)

// base is the simulated clock's origin; at(d) is base+d.
var base = time.Unix(1_000_000, 0)

func at(d time.Duration) time.Time { return base.Add(d) }

const (
	ms      = time.Millisecond
	big     = 1 << 20                // a backlog far above MinBytes
	high    = 50 * ms                // a sojourn time far above Target
	low     = 4 * ms                 // below Target
	below   = 5*ms - 1               // just below Target
	atLimit = 5 * ms                 // exactly Target: counts as above
	step    = 100 * time.Microsecond // the packet spacing of the sweeps
)

// Hand-computed control-law gaps for Interval = 100ms: 100ms/sqrt(n),
// truncated to the nanosecond.
const (
	gap1 = 100_000_000 * time.Nanosecond // 100ms / sqrt(1)
	gap2 = 70_710_678 * time.Nanosecond  // 100ms / 1.41421356...
	gap3 = 57_735_026 * time.Nanosecond  // 100ms / 1.73205080...
	gap4 = 50_000_000 * time.Nanosecond  // 100ms / 2
	gap5 = 44_721_359 * time.Nanosecond  // 100ms / 2.23606797...
)

// mustDequeue calls OnDequeue and fails if the answer is not want.
func mustDequeue(t *testing.T, c *CoDel, sojourn time.Duration, backlog int, now time.Duration, want bool) {
	t.Helper()
	if got := c.OnDequeue(sojourn, backlog, at(now)); got != want {
		t.Fatalf("OnDequeue(sojourn %v, backlog %d) at %v = %v, want %v (dropping %v, count %d)",
			sojourn, backlog, now, got, want, c.Dropping(), c.Count())
	}
}

// sweepNoDrop dequeues one packet every 100µs in [from, to) with the given sojourn
// and backlog and fails on any drop.
func sweepNoDrop(t *testing.T, c *CoDel, sojourn time.Duration, backlog int, from, to time.Duration) {
	t.Helper()
	for now := from; now < to; now += step {
		mustDequeue(t, c, sojourn, backlog, now, false)
	}
}

func TestDefaults(t *testing.T) {
	d := DefaultConfig()
	if d.Target != 5*ms || d.Interval != 100*ms || d.MinBytes != 1500 {
		t.Fatalf("DefaultConfig() = %+v", d)
	}
	c := New(Config{})
	if c.target != 5*ms || c.interval != 100*ms || c.minBytes != 1500 {
		t.Fatalf("New(Config{}) = target %v interval %v minBytes %d", c.target, c.interval, c.minBytes)
	}
	c = New(Config{Target: 2 * ms, Interval: 40 * ms, MinBytes: -1})
	if c.target != 2*ms || c.interval != 40*ms || c.minBytes != -1 {
		t.Fatalf("New(custom) = target %v interval %v minBytes %d", c.target, c.interval, c.minBytes)
	}
}

func TestBelowTargetNeverDrops(t *testing.T) {
	c := New(Config{})
	sweepNoDrop(t, c, below, big, 0, 10*time.Second)
	sweepNoDrop(t, c, 0, big, 10*time.Second, 11*time.Second)
	if c.Dropping() || c.Count() != 0 {
		t.Fatalf("dropping %v count %d", c.Dropping(), c.Count())
	}
}

func TestAboveTargetShorterThanIntervalNeverDrops(t *testing.T) {
	c := New(Config{})
	// Above target from 0 to just before 100ms: first_above_time is 100ms.
	sweepNoDrop(t, c, high, big, 0, 100*ms)
	mustDequeue(t, c, atLimit, big, 100*ms-1, false)
	// One packet below target resets the timer...
	mustDequeue(t, c, low, big, 100*ms, false)
	// ...so 100ms-and-a-bit above target again, starting at 100.1ms, is
	// again less than an interval: first_above_time is 200.1ms.
	sweepNoDrop(t, c, high, big, 100*ms+step, 200*ms+step)
	mustDequeue(t, c, low, big, 200*ms+step, false)
	// The queue running empty resets it too.
	sweepNoDrop(t, c, high, big, 300*ms, 400*ms)
	c.OnEmpty(at(400 * ms))
	sweepNoDrop(t, c, high, big, 400*ms, 500*ms)
	if c.Dropping() {
		t.Fatal("dropping")
	}
}

// enterDropping puts c (default config) above target from time 0 and checks
// the first drop at 100ms: the first packet sets first_above_time to 100ms,
// the packet at 100ms is dropped and the next one, at the same instant, is
// sent.
func enterDropping(t *testing.T, c *CoDel) {
	t.Helper()
	sweepNoDrop(t, c, high, big, 0, 100*ms)
	mustDequeue(t, c, high, big, 100*ms-1, false)
	mustDequeue(t, c, high, big, 100*ms, true)
	if !c.Dropping() || c.Count() != 1 {
		t.Fatalf("after first drop: dropping %v count %d, want true 1", c.Dropping(), c.Count())
	}
	mustDequeue(t, c, high, big, 100*ms, false) // the caller's loop: next packet is sent
}

// dropAt checks that the packet dequeued 1ns before due is sent, the one at
// due dropped (count becomes wantCount) and the one after it, at the same
// instant, sent.
func dropAt(t *testing.T, c *CoDel, due time.Duration, wantCount uint32) {
	t.Helper()
	mustDequeue(t, c, high, big, due-1, false)
	mustDequeue(t, c, high, big, due, true)
	if c.Count() != wantCount {
		t.Fatalf("drop at %v: count %d, want %d", due, c.Count(), wantCount)
	}
	mustDequeue(t, c, high, big, due, false)
}

func TestControlLawDropTimes(t *testing.T) {
	c := New(Config{})
	enterDropping(t, c)
	// Nothing between the first drop and the second, an Interval later
	// (count 1: 100ms/sqrt(1)).
	sweepNoDrop(t, c, high, big, 100*ms+step, 200*ms)
	// Then the gaps shrink as 100ms/sqrt(count), count = drops so far.
	due := 100*ms + gap1 // 200ms
	dropAt(t, c, due, 2)
	due += gap2 // 270.710678ms
	if due != 270_710_678*time.Nanosecond {
		t.Fatalf("hand computation: %v", due)
	}
	dropAt(t, c, due, 3)
	due += gap3 // 328.445704ms
	dropAt(t, c, due, 4)
	due += gap4 // 378.445704ms
	dropAt(t, c, due, 5)
	due += gap5 // 423.167063ms
	if due != 423_167_063*time.Nanosecond {
		t.Fatalf("hand computation: %v", due)
	}
	dropAt(t, c, due, 6)
}

func TestDropLoopCatchesUp(t *testing.T) {
	// A caller that dequeues rarely (here: nothing between 100ms and 300ms)
	// drops in one loop every packet whose drop was due: at 300ms drop_next
	// is 200ms (count 1), then 270.71ms (count 2), then 328.45ms (count 3).
	c := New(Config{})
	enterDropping(t, c)
	mustDequeue(t, c, high, big, 300*ms, true)
	mustDequeue(t, c, high, big, 300*ms, true)
	mustDequeue(t, c, high, big, 300*ms, false)
	if c.Count() != 3 {
		t.Fatalf("count %d, want 3", c.Count())
	}
	dropAt(t, c, 100*ms+gap1+gap2+gap3, 4)
}

func TestLeaveDroppingBelowTarget(t *testing.T) {
	c := New(Config{})
	enterDropping(t, c)
	dropAt(t, c, 200*ms, 2)
	// One packet below target ends the dropping state.
	mustDequeue(t, c, below, big, 210*ms, false)
	if c.Dropping() {
		t.Fatal("still dropping after a packet below target")
	}
	// And first_above_time restarts: no drop until a whole interval above
	// target again, although drop_next (270.71ms) has long passed.
	sweepNoDrop(t, c, high, big, 211*ms, 311*ms)
	mustDequeue(t, c, high, big, 311*ms, true)
	if !c.Dropping() {
		t.Fatal("not dropping again")
	}
}

func TestLeaveDroppingOnEmpty(t *testing.T) {
	c := New(Config{})
	enterDropping(t, c)
	c.OnEmpty(at(150 * ms))
	if c.Dropping() {
		t.Fatal("still dropping after OnEmpty")
	}
	sweepNoDrop(t, c, high, big, 150*ms, 250*ms)
	mustDequeue(t, c, high, big, 250*ms, true)
}

func TestCountReuse(t *testing.T) {
	c := New(Config{})
	enterDropping(t, c) // count 1, lastcount 1, drop_next 200ms
	dropAt(t, c, 200*ms, 2)
	dropAt(t, c, 200*ms+gap2, 3)
	dropAt(t, c, 200*ms+gap2+gap3, 4) // 328.445704ms; drop_next 378.445704ms
	mustDequeue(t, c, low, big, 330*ms, false)
	if c.Dropping() || c.Count() != 4 {
		t.Fatalf("after leaving: dropping %v count %d", c.Dropping(), c.Count())
	}
	// Above target again from 331ms: first_above_time 431ms. At 431ms,
	// delta = count - lastcount = 4 - 1 = 3 > 1 and now - drop_next =
	// 431 - 378.445704 = 52.55ms < 16 intervals, so count restarts at 3 and
	// drop_next = 431ms + 100ms/sqrt(3) = 488.735026ms.
	sweepNoDrop(t, c, high, big, 331*ms, 431*ms)
	mustDequeue(t, c, high, big, 431*ms, true)
	if c.Count() != 3 {
		t.Fatalf("count after re-entry %d, want 3 (reused)", c.Count())
	}
	mustDequeue(t, c, high, big, 431*ms, false)
	sweepNoDrop(t, c, high, big, 431*ms+step, 431*ms+gap3)
	due := 431*ms + gap3
	if due != 488_735_026*time.Nanosecond {
		t.Fatalf("hand computation: %v", due)
	}
	dropAt(t, c, due, 4)
	dropAt(t, c, due+gap4, 5) // 538.735026ms
	// Leave again; lastcount is now 3, count 5, drop_next 538.735026+44.721359.
	mustDequeue(t, c, low, big, 540*ms, false)
	// Re-enter: delta = 5 - 3 = 2 > 1, so count 2: drop_next = now + gap2.
	sweepNoDrop(t, c, high, big, 541*ms, 641*ms)
	mustDequeue(t, c, high, big, 641*ms, true)
	if c.Count() != 2 {
		t.Fatalf("count after second re-entry %d, want 2", c.Count())
	}
	mustDequeue(t, c, high, big, 641*ms, false)
	dropAt(t, c, 641*ms+gap2, 3)
}

func TestCountReuseExpires(t *testing.T) {
	c := New(Config{})
	enterDropping(t, c)
	dropAt(t, c, 200*ms, 2)
	dropAt(t, c, 200*ms+gap2, 3)
	dropAt(t, c, 200*ms+gap2+gap3, 4) // drop_next 378.445704ms
	c.OnEmpty(at(330 * ms))
	// Above target from 1.9s: re-entry at 2s, when now - drop_next =
	// 2000 - 378.445704 = 1621.55ms, more than 16 intervals (1600ms): the
	// count restarts at 1 and the next drop is a whole interval later.
	sweepNoDrop(t, c, high, big, 1900*ms, 2000*ms)
	mustDequeue(t, c, high, big, 2000*ms, true)
	if c.Count() != 1 {
		t.Fatalf("count %d, want 1 (reuse window expired)", c.Count())
	}
	mustDequeue(t, c, high, big, 2000*ms, false)
	sweepNoDrop(t, c, high, big, 2000*ms+step, 2100*ms)
	dropAt(t, c, 2100*ms, 2)
}

func TestCountReuseNeedsDeltaAboveOne(t *testing.T) {
	c := New(Config{})
	enterDropping(t, c)
	dropAt(t, c, 200*ms, 2) // count 2, lastcount 1: delta 1
	mustDequeue(t, c, low, big, 210*ms, false)
	sweepNoDrop(t, c, high, big, 211*ms, 311*ms)
	mustDequeue(t, c, high, big, 311*ms, true)
	if c.Count() != 1 {
		t.Fatalf("count %d, want 1 (delta 1 is not reused)", c.Count())
	}
	mustDequeue(t, c, high, big, 311*ms, false)
	sweepNoDrop(t, c, high, big, 311*ms+step, 411*ms)
	dropAt(t, c, 411*ms, 2)
}

func TestMinBytesNeverDrops(t *testing.T) {
	c := New(Config{})
	// A sojourn of a second but only one packet's worth of bytes behind it.
	sweepNoDrop(t, c, time.Second, 1500, 0, 10*time.Second)
	sweepNoDrop(t, c, time.Second, 0, 10*time.Second, 11*time.Second)
	if c.Dropping() {
		t.Fatal("dropping")
	}
	// One byte more is a queue: the first packet with 1501 bytes behind it
	// starts the interval.
	sweepNoDrop(t, c, time.Second, 1501, 11*time.Second, 11*time.Second+100*ms)
	mustDequeue(t, c, time.Second, 1501, 11*time.Second+100*ms, true)
	// In the dropping state, a backlog at MinBytes leaves it.
	mustDequeue(t, c, time.Second, 1500, 11*time.Second+300*ms, false)
	if c.Dropping() {
		t.Fatal("still dropping with backlog at MinBytes")
	}
}

func TestMinBytesConfigured(t *testing.T) {
	c := New(Config{MinBytes: 9000})
	sweepNoDrop(t, c, high, 9000, 0, time.Second)
	// Negative: no floor, even an empty backlog counts.
	c = New(Config{MinBytes: -1})
	sweepNoDrop(t, c, high, 0, 0, 100*ms)
	mustDequeue(t, c, high, 0, 100*ms, true)
}

func TestCustomTargetInterval(t *testing.T) {
	c := New(Config{Target: 1 * ms, Interval: 20 * ms})
	sweepNoDrop(t, c, 1*ms-1, big, 0, time.Second)
	sweepNoDrop(t, c, 1*ms, big, time.Second, time.Second+20*ms)
	mustDequeue(t, c, 1*ms, big, time.Second+20*ms, true)
	mustDequeue(t, c, 1*ms, big, time.Second+20*ms, false)
	// 20ms/sqrt(1), then 20ms/sqrt(2) = 14.142135ms.
	mustDequeue(t, c, 1*ms, big, time.Second+40*ms-1, false)
	mustDequeue(t, c, 1*ms, big, time.Second+40*ms, true)
	mustDequeue(t, c, 1*ms, big, time.Second+40*ms+14_142_135-1, false)
	mustDequeue(t, c, 1*ms, big, time.Second+40*ms+14_142_135, true)
}

// TestMarkingCaller drives CoDel as a caller that marks instead of dropping:
// it sends the marked packet and asks about the next one only when it leaves.
// The marks fall at the same times as the drops.
func TestMarkingCaller(t *testing.T) {
	c := New(Config{})
	var marks []time.Duration
	for now := time.Duration(0); now < 430*ms; now += step {
		if c.OnDequeue(high, big, at(now)) {
			marks = append(marks, now)
		}
	}
	// Packets every 100µs: each mark falls on the first packet at or after
	// its due time (100, 200, 270.710678, 328.445704, 378.445704,
	// 423.167063ms).
	want := []time.Duration{100 * ms, 200 * ms, 270_800_000, 328_500_000, 378_500_000, 423_200_000}
	if len(marks) != len(want) {
		t.Fatalf("marks at %v, want %v", marks, want)
	}
	for i := range want {
		if marks[i] != want[i] {
			t.Fatalf("marks at %v, want %v", marks, want)
		}
	}
}

// Patient: after the first drop the backlog first grows (a slow start still
// filling the queue for a round trip) and then falls (its cut): the drop due
// at 200ms finds it a fifth below its peak and is put off one gap (count
// still 1: to 300ms), by which time the sojourn is below target and CoDel
// leaves the dropping state. RFC 8289's CoDel drops at 200ms.
func TestPatientWaitsForAnswer(t *testing.T) {
	for _, patient := range []bool{false, true} {
		c := New(Config{Patient: patient})
		enterDropping(t, c)
		// 100–150ms: the backlog grows to 2·big; 150–200ms: it falls to 1.5·big.
		for now := 100*ms + step; now < 200*ms; now += step {
			b := big + int(float64(big)*float64(now-100*ms)/float64(50*ms))
			if now > 150*ms {
				b = 2*big - int(float64(big)*float64(now-150*ms)/float64(100*ms))
			}
			mustDequeue(t, c, high, b, now, false)
		}
		if !patient {
			mustDequeue(t, c, high, 3*big/2, 200*ms, true)
			continue
		}
		mustDequeue(t, c, high, 3*big/2, 200*ms, false)
		if !c.Dropping() || c.Count() != 1 {
			t.Fatalf("after the put-off: dropping %v count %d, want true 1", c.Dropping(), c.Count())
		}
		sweepNoDrop(t, c, high, 3*big/2, 200*ms+step, 300*ms)
		mustDequeue(t, c, low, big/2, 300*ms, false)
		if c.Dropping() {
			t.Fatal("still dropping with the sojourn below target")
		}
	}
}

// Patient, against a backlog that does not fall (flows that do not answer,
// or too many): the drops come on RFC 8289's schedule; a put-off delays the
// drop by one gap, and only once: the drop then comes even if the backlog
// is still falling.
func TestPatientDropsWhenBacklogStands(t *testing.T) {
	c := New(Config{Patient: true})
	enterDropping(t, c)
	sweepNoDrop(t, c, high, big, 100*ms+step, 200*ms)
	due := 100*ms + gap1
	dropAt(t, c, due, 2)
	due += gap2
	dropAt(t, c, due, 3)
	// The backlog falls by a third before the next drop is due: put off one
	// gap (count 3: 57.7ms) from then; it keeps falling, and the drop comes.
	mustDequeue(t, c, high, 2*big/3, due+gap3, false)
	if c.Count() != 3 {
		t.Fatalf("count %d after a put-off, want 3", c.Count())
	}
	sweepNoDrop(t, c, high, big/2, due+gap3+step, due+2*gap3)
	mustDequeue(t, c, high, big/3, due+2*gap3, true) // still falling: no second put-off
	if c.Count() != 4 {
		t.Fatalf("count %d, want 4", c.Count())
	}
}
