package sbd

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// queue is a synthetic bottleneck queue: AIMD-like cycles of random length
// around period in which the queueing delay rises fast from lo and then sits
// near lo+amp until the drop (a mostly full queue: negatively skewed delay,
// as RFC 8382 expects of a congested bottleneck).
type queue struct {
	rng                    *rand.Rand
	period, lo, amp        float64 // seconds
	start, length, height  float64
	prevLength, prevHeight float64 // the cycle before, for lagged readers
}

func newQueue(rng *rand.Rand, period, lo, amp time.Duration) *queue {
	q := &queue{rng: rng, period: period.Seconds(), lo: lo.Seconds(), amp: amp.Seconds()}
	q.start = -rng.Float64() * q.period // random phase
	q.newCycle()
	q.prevLength, q.prevHeight = q.length, q.height
	return q
}

func (q *queue) newCycle() {
	q.length = q.period * (0.8 + 0.4*q.rng.Float64())
	q.height = q.amp * (0.8 + 0.2*q.rng.Float64())
}

// at returns the queueing delay at t (seconds). t may go back by less than
// one cycle (paths read the queue with different lags).
func (q *queue) at(t float64) float64 {
	for t >= q.start+q.length {
		q.start += q.length
		q.prevLength, q.prevHeight = q.length, q.height
		q.newCycle()
	}
	start, length, height := q.start, q.length, q.height
	if t < start {
		start, length, height = start-q.prevLength, q.prevLength, q.prevHeight
	}
	phi := max(0, (t-start)/length)
	r := 1 - phi
	return q.lo + height*(1-r*r*r)
}

// pathSpec is one synthetic path: a base delay, the bottleneck queue it goes
// through (nil: none) and exponential jitter (delays are only ever added).
// The sample reported at t saw the queue at t − base/2: an RTT sample is
// taken when the ack arrives, after the packet crossed the bottleneck.
type pathSpec struct {
	base   time.Duration
	q      *queue
	jitter time.Duration
}

// sim feeds the paths' samples (one every 10 ms per path, offset per path)
// into d for dur and calls after at every Tick (every 100 ms) with the
// number of closed base intervals so far.
func sim(d *Detector, rng *rand.Rand, paths []pathSpec, ids []int, dur time.Duration, after func(intervals int, changed bool)) {
	simFrom(d, rng, paths, ids, simStart, dur, after)
}

var simStart = time.Unix(1_700_000_000, 0)

// simFrom is sim starting at t0 (queue time restarts at 0).
func simFrom(d *Detector, rng *rand.Rand, paths []pathSpec, ids []int, t0 time.Time, dur time.Duration, after func(intervals int, changed bool)) {
	const step = 10 * time.Millisecond
	d.Tick(t0)
	for t := time.Duration(0); t < dur; t += step {
		for i, p := range paths {
			at := t + time.Duration(i)*time.Millisecond
			delay := p.base.Seconds() + rng.ExpFloat64()*p.jitter.Seconds()
			if p.q != nil {
				delay += p.q.at((at - p.base/2).Seconds())
			}
			d.OnDelay(ids[i], t0.Add(at), time.Duration(delay*float64(time.Second)))
			d.OnPackets(ids[i], 1, 0)
		}
		if (t+step)%(100*time.Millisecond) == 0 {
			now := t0.Add(t + step)
			ch := d.Tick(now)
			if after != nil {
				after(int((t+step)/d.cfg.Interval), ch)
			}
		}
	}
}

func addFlows(d *Detector, n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = d.AddFlow()
	}
	return ids
}

// sharedPaths: two paths through one bottleneck (3 s cycles, 2–22 ms of
// queueing), different base delays and independent jitter.
func sharedPaths(rng *rand.Rand) []pathSpec {
	q := newQueue(rng, 3*time.Second, 2*time.Millisecond, 20*time.Millisecond)
	return []pathSpec{
		{base: 20 * time.Millisecond, q: q, jitter: time.Millisecond},
		{base: 45 * time.Millisecond, q: q, jitter: time.Millisecond},
	}
}

// separatePaths: two paths through two congested bottlenecks of the same
// depth whose queues cycle independently at 3 s and 1.2 s.
func separatePaths(rng *rand.Rand) []pathSpec {
	return []pathSpec{
		{base: 20 * time.Millisecond, q: newQueue(rng, 3*time.Second, 2*time.Millisecond, 20*time.Millisecond), jitter: time.Millisecond},
		{base: 45 * time.Millisecond, q: newQueue(rng, 1200*time.Millisecond, 2*time.Millisecond, 20*time.Millisecond), jitter: time.Millisecond},
	}
}

const detectBound = 60 // intervals (21 s at T = 350 ms)

// runShared runs (a) for dur and returns the interval at which the two flows
// were last put into one group (-1: never together at the end) and the number
// of group changes after that first grouping.
func runShared(seed uint64, dur time.Duration) (detect, flaps int, d *Detector) {
	rng := rand.New(rand.NewPCG(seed, 1))
	d = New(Config{})
	ids := addFlows(d, 2)
	detect = -1
	sim(d, rng, sharedPaths(rng), ids, dur, func(iv int, ch bool) {
		together := d.Group(ids[0]) == d.Group(ids[1])
		if together && detect < 0 {
			detect = iv
		}
		if ch && detect >= 0 && (!together || iv > detect) {
			flaps++
		}
	})
	return detect, flaps, d
}

// (a) Two flows through one oscillating bottleneck are grouped within
// detectBound intervals.
func TestSharedBottleneckGrouped(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		detect, _, d := runShared(seed, 30*time.Second)
		// Not before MinIntervals intervals with samples, then Hold
		// agreeing regroupings (the first regrouping with enough data is at
		// interval MinIntervals).
		if early := d.cfg.MinIntervals + d.cfg.Hold - 1; detect >= 0 && detect < early {
			t.Errorf("seed %d: grouped at interval %d, before %d", seed, detect, early)
		}
		if detect < 0 || detect > detectBound {
			t.Errorf("seed %d: grouped at interval %d, want within %d; stats %+v %+v",
				seed, detect, detectBound, d.Stats(0), d.Stats(1))
		}
		if d.Group(0) != d.Group(1) {
			t.Errorf("seed %d: not together at the end", seed)
		}
	}
}

// (b) Two flows through different congested bottlenecks with independent
// queue processes of different frequencies are kept apart.
func TestSeparateBottlenecksApart(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		rng := rand.New(rand.NewPCG(seed, 2))
		d := New(Config{})
		ids := addFlows(d, 2)
		together := 0
		sim(d, rng, separatePaths(rng), ids, 60*time.Second, func(int, bool) {
			if d.Group(ids[0]) == d.Group(ids[1]) {
				together++
			}
		})
		s0, s1 := d.Stats(ids[0]), d.Stats(ids[1])
		if !s0.Congested || !s1.Congested {
			t.Errorf("seed %d: both bottlenecks are congested, stats %+v %+v", seed, s0, s1)
		}
		if together > 0 {
			t.Errorf("seed %d: grouped at %d ticks; stats %+v %+v", seed, together, s0, s1)
		}
	}
}

// (c) A flow whose delay is flat plus jitter is not congested and stays
// alone — also next to another such flow with the same jitter, and next to a
// shared-bottleneck pair.
func TestUncongestedAlone(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		d := New(Config{})
		paths := append(sharedPaths(rng),
			pathSpec{base: 30 * time.Millisecond, jitter: 2 * time.Millisecond},
			pathSpec{base: 30 * time.Millisecond, jitter: 2 * time.Millisecond})
		ids := addFlows(d, len(paths))
		bad := 0
		sim(d, rng, paths, ids, 40*time.Second, func(int, bool) {
			for _, i := range ids[2:] {
				for _, j := range ids {
					if i != j && d.Group(i) == d.Group(j) {
						bad++
					}
				}
			}
		})
		for _, i := range ids[2:] {
			if st := d.Stats(i); st.Congested || !st.Enough {
				t.Errorf("seed %d: flat flow %d: stats %+v, want enough data and not congested", seed, i, st)
			}
		}
		if bad > 0 {
			t.Errorf("seed %d: a flat flow shared a group %d times", seed, bad)
		}
		if d.Group(ids[0]) != d.Group(ids[1]) {
			t.Errorf("seed %d: the shared pair is apart", seed)
		}
	}
}

// (d) Over a long run of (a), once grouped the flows stay grouped and the
// group id never changes.
func TestNoFlapping(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		detect, flaps, d := runShared(seed, 10*time.Minute)
		if detect < 0 || flaps != 0 {
			t.Errorf("seed %d: grouped at %d, %d group changes after that; stats %+v %+v",
				seed, detect, flaps, d.Stats(0), d.Stats(1))
		}
	}
}

// Before enough data each flow is alone with a distinct id; Group of an
// unknown flow is 0.
func TestAloneWithoutData(t *testing.T) {
	d := New(Config{})
	ids := addFlows(d, 3)
	seen := map[uint32]bool{}
	for _, id := range ids {
		g := d.Group(id)
		if g == 0 || seen[g] {
			t.Fatalf("flow %d: group %d not distinct and non-zero", id, g)
		}
		seen[g] = true
	}
	now := time.Unix(0, 0)
	for k := 0; k < 20; k++ { // 20 intervals of identical samples: too few
		now = now.Add(d.cfg.Interval)
		for _, id := range ids {
			d.OnDelay(id, now, time.Duration(10+k%5)*time.Millisecond)
		}
		if d.Tick(now) {
			t.Fatalf("interval %d: groups changed before MinIntervals", k)
		}
	}
	if d.Group(99) != 0 || d.Group(-1) != 0 {
		t.Fatal("Group of an unknown flow is not 0")
	}
}

// A group splits when one flow moves to another bottleneck: the flow that
// stayed keeps the id, the one that left gets a new one.
func TestSplit(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 7))
	d := New(Config{})
	ids := addFlows(d, 2)
	sim(d, rng, sharedPaths(rng), ids, 30*time.Second, nil)
	g0 := d.Group(ids[0])
	if d.Group(ids[1]) != g0 {
		t.Fatalf("setup: not grouped: %+v %+v", d.Stats(0), d.Stats(1))
	}
	paths := separatePaths(rng)
	simFrom(d, rng, paths, ids, simStart.Add(30*time.Second), 40*time.Second, nil)
	if d.Group(ids[0]) != g0 || d.Group(ids[1]) == g0 || d.Group(ids[1]) == 0 {
		t.Fatalf("after the split: groups %d, %d; want %d and another", d.Group(ids[0]), d.Group(ids[1]), g0)
	}
}

// The estimators on a series with known values: per interval three samples
// at 10 ms and one at 30 ms (mean 15 ms: skew_est (3−1)/4 = 0.5, var_est
// (3·5+15)/4 = 7.5 ms, no crossings) and 1 of 10 packets lost. A second
// flow alternates between intervals at 10 ms and at 30 ms: every interval
// mean crosses the 20 ms mean by more than 0.7·10 ms, freq_est 1.
func TestEstimates(t *testing.T) {
	d := New(Config{})
	id := d.AddFlow()
	alt := d.AddFlow()
	now := time.Unix(0, 0)
	d.Tick(now)
	for k := 0; k < 60; k++ {
		for _, ms := range []int{10, 30, 10, 10} {
			now = now.Add(d.cfg.Interval / 5)
			d.OnDelay(id, now, time.Duration(ms)*time.Millisecond)
			d.OnDelay(alt, now, time.Duration(10+20*(k%2))*time.Millisecond)
		}
		d.OnPackets(id, 10, 1)
		now = now.Add(d.cfg.Interval / 5)
		d.Tick(now)
	}
	st := d.Stats(id)
	if math.Abs(st.Skew-0.5) > 1e-9 || (st.Var-7500*time.Microsecond).Abs() > time.Microsecond ||
		st.Freq != 0 || math.Abs(st.Loss-0.1) > 1e-9 || st.Intervals != 50 || !st.Enough || st.Congested {
		t.Fatalf("stats %+v", st)
	}
	if st := d.Stats(alt); st.Freq != 1 || math.Abs(st.Skew) > 0.05 || (st.Var-10*time.Millisecond).Abs() > 500*time.Microsecond {
		t.Fatalf("alternating flow: stats %+v", st)
	}
}

// (e) RemoveFlow frees the slot; AddFlow re-uses it with a fresh, alone
// flow; the remaining flow keeps its id.
func TestRemoveAddReuse(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 5))
	d := New(Config{})
	ids := addFlows(d, 3)
	paths := append(sharedPaths(rng), pathSpec{base: 10 * time.Millisecond, jitter: time.Millisecond})
	sim(d, rng, paths, ids, 30*time.Second, nil)
	if d.Group(0) != d.Group(1) {
		t.Fatalf("setup: flows 0 and 1 not grouped: %+v %+v", d.Stats(0), d.Stats(1))
	}
	g0 := d.Group(0)
	d.RemoveFlow(1)
	if d.Group(1) != 0 {
		t.Fatal("removed flow still has a group")
	}
	if d.Group(0) != g0 {
		t.Fatal("remaining flow's group changed on removal")
	}
	if id := d.AddFlow(); id != 1 {
		t.Fatalf("AddFlow = %d, want re-used slot 1", id)
	}
	if g := d.Group(1); g == 0 || g == g0 || g == d.Group(2) {
		t.Fatalf("re-used slot: group %d not fresh (others %d, %d)", g, g0, d.Group(2))
	}
	if st := d.Stats(1); st.Intervals != 0 || st.Enough {
		t.Fatalf("re-used slot kept old state: %+v", st)
	}
	if id := d.AddFlow(); id != 3 {
		t.Fatalf("AddFlow = %d, want new slot 3", id)
	}
	// The re-used slot gets the same bottleneck again and rejoins flow 0.
	rng2 := rand.New(rand.NewPCG(8, 5))
	simFrom(d, rng2, append(sharedPaths(rng2), pathSpec{base: 10 * time.Millisecond, jitter: time.Millisecond}), ids, simStart.Add(31*time.Second), 30*time.Second, nil)
	if d.Group(0) != d.Group(1) {
		t.Fatalf("re-used slot not regrouped: %+v %+v", d.Stats(0), d.Stats(1))
	}
	if d.Group(0) != g0 {
		t.Fatalf("group id changed from %d to %d though flow 0 only gained a member", g0, d.Group(0))
	}
}

// (f) OnDelay, OnPackets and Tick do not allocate in steady state.
func TestNoAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 6))
	d := New(Config{})
	ids := addFlows(d, 4)
	paths := append(sharedPaths(rng), separatePaths(rng)...)
	sim(d, rng, paths, ids, 30*time.Second, nil)
	now := time.Unix(1_700_000_000, 0).Add(30 * time.Second)
	k := 0
	allocs := testing.AllocsPerRun(2000, func() {
		k++
		now = now.Add(5 * time.Millisecond) // an interval closes every 70 runs
		for _, id := range ids {
			d.OnDelay(id, now, time.Duration(20+k%7)*time.Millisecond)
			d.OnPackets(id, 1, k%50/49)
		}
		d.Tick(now)
		_ = d.Group(ids[0])
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run, want 0", allocs)
	}
}

// TestMeasure measures the detection time of (a) and the false grouping rate
// of (b) over 20 seeds each, with the default configuration and with the
// RFC 8382 algorithm alone (CorrThreshold −1); docs/sbd.md quotes its log
// (go test -run Measure -v ./sbd/).
func TestMeasure(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	const seeds = 20
	for _, m := range []struct {
		name string
		cfg  Config
	}{{"default", Config{}}, {"RFC 8382 only", Config{CorrThreshold: -1}}} {
		var det []int
		missed, flaps := 0, 0
		for s := uint64(100); s < 100+seeds; s++ {
			rng := rand.New(rand.NewPCG(s, 1))
			d := New(m.cfg)
			ids := addFlows(d, 2)
			iv := -1
			sim(d, rng, sharedPaths(rng), ids, 120*time.Second, func(k int, ch bool) {
				together := d.Group(ids[0]) == d.Group(ids[1])
				if together && iv < 0 {
					iv = k
				} else if ch && iv >= 0 {
					flaps++
				}
			})
			if iv < 0 {
				missed++
				continue
			}
			det = append(det, iv)
		}
		lo, hi, sum := math.MaxInt, 0, 0
		for _, v := range det {
			lo, hi, sum = min(lo, v), max(hi, v), sum+v
		}
		if len(det) > 0 {
			t.Logf("%s: (a) shared bottleneck, %d seeds × 120 s: grouped in %d; detection min %d, mean %.1f, max %d intervals (max %.1f s); %d group changes after grouping",
				m.name, seeds, len(det), lo, float64(sum)/float64(len(det)), hi, float64(hi)*0.35, flaps)
		}
		if missed > 0 || hi > detectBound || flaps > 0 {
			t.Errorf("%s (a): %d seeds never grouped, slowest %d intervals, %d flaps", m.name, missed, hi, flaps)
		}

		// (b): the fraction of regroupings (after MinIntervals) at which
		// the two flows of separate bottlenecks shared a group.
		for _, c := range []struct {
			name       string
			slow, fast time.Duration
			amp2       time.Duration
			bound      float64 // for the default configuration; −1: none
		}{
			{"3 s vs 1.2 s cycles, same depth", 3 * time.Second, 1200 * time.Millisecond, 20 * time.Millisecond, 0.01},
			{"5 s vs 2 s cycles, same depth", 5 * time.Second, 2 * time.Second, 20 * time.Millisecond, 0.01},
			{"3 s vs 2 s cycles, same depth", 3 * time.Second, 2 * time.Second, 20 * time.Millisecond, 0.01},
			{"3 s vs 3 s cycles, same depth", 3 * time.Second, 3 * time.Second, 20 * time.Millisecond, -1},
			{"3 s vs 3 s cycles, 20 vs 30 ms deep", 3 * time.Second, 3 * time.Second, 30 * time.Millisecond, -1},
		} {
			ticks, together, seedsEver := 0, 0, 0
			for s := uint64(100); s < 100+seeds; s++ {
				rng := rand.New(rand.NewPCG(s, 2))
				d := New(m.cfg)
				ids := addFlows(d, 2)
				paths := []pathSpec{
					{base: 20 * time.Millisecond, q: newQueue(rng, c.slow, 2*time.Millisecond, 20*time.Millisecond), jitter: time.Millisecond},
					{base: 45 * time.Millisecond, q: newQueue(rng, c.fast, 2*time.Millisecond, c.amp2), jitter: time.Millisecond},
				}
				ever := false
				sim(d, rng, paths, ids, 120*time.Second, func(iv int, _ bool) {
					if iv < d.cfg.MinIntervals {
						return
					}
					ticks++
					if d.Group(ids[0]) == d.Group(ids[1]) {
						together++
						ever = true
					}
				})
				if ever {
					seedsEver++
				}
			}
			rate := float64(together) / float64(ticks)
			t.Logf("%s: (b) %s, %d seeds × 120 s: falsely grouped at %.1f%% of ticks; %d of %d seeds ever grouped",
				m.name, c.name, seeds, 100*rate, seedsEver, seeds)
			if m.cfg.CorrThreshold == 0 && c.bound >= 0 && rate > c.bound {
				t.Errorf("%s (b) %s: false grouping rate %.3f > %.3f", m.name, c.name, rate, c.bound)
			}
		}
	}
}
