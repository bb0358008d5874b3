package linkemu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestPipeDelayAndRate(t *testing.T) {
	p := newPipe(Shape{Delay: 20 * ms}, AtoB)
	if at, v := p.admit(3*ms, 1500); v != forward || at != 23*ms {
		t.Errorf("delay only: (%v, %v), want (23ms, forward)", at, v)
	}
	// 10 Mbit/s: 1250 B = 1 ms on the wire, then 20 ms of propagation.
	p = newPipe(Shape{Rate: 10_000_000, Delay: 20 * ms}, AtoB)
	want := []time.Duration{21 * ms, 22 * ms, 23 * ms}
	for i, w := range want {
		if at, v := p.admit(0, 1250); v != forward || at != w {
			t.Errorf("frame %d: (%v, %v), want (%v, forward)", i, at, v, w)
		}
	}
}

func TestPipeDefaultQueue(t *testing.T) {
	p := newPipe(Shape{Rate: 1_000_000}, AtoB)
	fwd := 0
	for i := 0; i < DefaultQueuePackets+10; i++ {
		if _, v := p.admit(0, 100); v == forward {
			fwd++
		} else if v != dropQueue {
			t.Fatalf("verdict %v", v)
		}
	}
	if fwd != DefaultQueuePackets {
		t.Errorf("forwarded %d of a burst, want the default limit %d", fwd, DefaultQueuePackets)
	}
	p = newPipe(Shape{Rate: 1_000_000, QueueBytes: 1000}, AtoB) // explicit byte limit replaces the default
	fwd = 0
	for i := 0; i < 20; i++ {
		if _, v := p.admit(0, 100); v == forward {
			fwd++
		}
	}
	if fwd != 10 {
		t.Errorf("forwarded %d with a 1000-byte limit, want 10", fwd)
	}
}

// A lost frame is dropped before the queue, as in netem: it neither takes
// queue space nor line time.
func TestPipeLossBeforeQueue(t *testing.T) {
	p := newPipe(Shape{Rate: 8_000_000, QueuePackets: 1, Loss: UniformLoss(1)}, AtoB)
	for i := 0; i < 10; i++ {
		if _, v := p.admit(0, 1000); v != dropLoss {
			t.Fatalf("frame %d: verdict %v, want dropLoss", i, v)
		}
	}
	if b, n := backlog(p.ser, 0); b != 0 || n != 0 {
		t.Errorf("lost frames left a backlog of %d B / %d", b, n)
	}
	p.loss = lossChain{}
	if at, v := p.admit(0, 1000); v != forward || at != 1*ms {
		t.Errorf("after loss-free: (%v, %v), want (1ms, forward)", at, v)
	}
}

func jitterSamples(t *testing.T, s Shape, n int) []time.Duration {
	t.Helper()
	p := newPipe(s, AtoB)
	out := make([]time.Duration, n)
	for i := range out {
		at, v := p.admit(0, 100)
		if v != forward {
			t.Fatalf("verdict %v", v)
		}
		out[i] = at
	}
	return out
}

func meanSD(xs []time.Duration) (mean, sd float64) {
	for _, x := range xs {
		mean += float64(x)
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		sd += (float64(x) - mean) * (float64(x) - mean)
	}
	return mean, math.Sqrt(sd / float64(len(xs)-1))
}

func TestPipeJitterUniform(t *testing.T) {
	const n = 100_000
	xs := jitterSamples(t, Shape{Delay: 10 * ms, Jitter: 4 * ms, Seed: 1}, n)
	for _, x := range xs {
		if x < 6*ms || x >= 14*ms {
			t.Fatalf("uniform jitter sample %v outside [6ms, 14ms)", x)
		}
	}
	mean, sd := meanSD(xs)
	wantSD := float64(4*ms) / math.Sqrt(3)
	if math.Abs(mean-float64(10*ms)) > 4*wantSD/math.Sqrt(n) {
		t.Errorf("mean %v, want 10ms", time.Duration(mean))
	}
	if math.Abs(sd-wantSD)/wantSD > 0.02 {
		t.Errorf("sd %v, want %v", time.Duration(sd), time.Duration(wantSD))
	}
}

func TestPipeJitterNormal(t *testing.T) {
	const n = 100_000
	xs := jitterSamples(t, Shape{Delay: 50 * ms, Jitter: 5 * ms, JitterDist: JitterNormal, Seed: 2}, n)
	mean, sd := meanSD(xs)
	if math.Abs(mean-float64(50*ms)) > 4*float64(5*ms)/math.Sqrt(n) {
		t.Errorf("mean %v, want 50ms", time.Duration(mean))
	}
	if math.Abs(sd-float64(5*ms))/float64(5*ms) > 0.02 {
		t.Errorf("sd %v, want 5ms", time.Duration(sd))
	}
	// Jitter larger than the delay: totals below zero are clamped.
	xs = jitterSamples(t, Shape{Delay: 1 * ms, Jitter: 5 * ms, JitterDist: JitterNormal, Seed: 3}, 10_000)
	zeros := 0
	for _, x := range xs {
		if x < 0 {
			t.Fatalf("negative send time %v", x)
		}
		if x == 0 {
			zeros++
		}
	}
	// P(N(1ms, 5ms) < 0) = Φ(-0.2) ≈ 0.42.
	if f := float64(zeros) / 10_000; math.Abs(f-0.42) > 0.03 {
		t.Errorf("clamped fraction %.3f, want ≈0.42", f)
	}
}

// Same seed, same decisions; the two directions and loss vs jitter use
// different streams.
func TestPipeSeeds(t *testing.T) {
	s := Shape{Delay: 10 * ms, Jitter: 5 * ms, Loss: UniformLoss(0.3), Seed: 77}
	run := func(dir Direction, seed uint64) []time.Duration {
		s := s
		s.Seed = seed
		p := newPipe(s, dir)
		var out []time.Duration
		for i := 0; i < 200; i++ {
			at, v := p.admit(0, 100)
			if v != forward {
				at = -1
			}
			out = append(out, at)
		}
		return out
	}
	a, b := run(AtoB, 77), run(AtoB, 77)
	if !slices.Equal(a, b) {
		t.Error("same seed gave different decisions")
	}
	if slices.Equal(a, run(BtoA, 77)) {
		t.Error("the two directions drew the same stream")
	}
	if slices.Equal(a, run(AtoB, 78)) {
		t.Error("different seeds gave the same decisions")
	}
	// The loss stream does not depend on whether jitter is drawn.
	l1, l2 := newRNG(77, streamLoss, AtoB), newRNG(77, streamJitter, AtoB)
	if l1.Uint64() == l2.Uint64() {
		t.Error("loss and jitter streams coincide")
	}
}

func TestShapeValidate(t *testing.T) {
	bad := []Shape{
		{Delay: -1}, {Jitter: -1}, {JitterDist: 7}, {QueueBytes: -1}, {QueuePackets: -2},
		{Loss: UniformLoss(2)},
	}
	for _, s := range bad {
		if s.Validate() == nil {
			t.Errorf("%+v accepted", s)
		}
	}
	if err := (Shape{Rate: 1e7, Delay: ms, Jitter: ms, Loss: GELoss(0.01, 0.3, 0.5, 0)}).Validate(); err != nil {
		t.Error(err)
	}
}

// ---- histogram ----

func TestHistogramBuckets(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for i := 0; i < 100_000; i++ {
		v := int64(rng.Uint64() >> uint(rng.IntN(64)+1))
		lo, hi := histRange(histIndex(v))
		if v < lo || v > hi {
			t.Fatalf("value %d in bucket [%d, %d]", v, lo, hi)
		}
		if v >= histSub && float64(hi-lo) > float64(lo)/histSub {
			t.Fatalf("bucket [%d, %d] wider than 1/%d of its value", lo, hi, histSub)
		}
	}
}

func TestHistogramStats(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Microsecond)
	}
	st := h.stats()
	if st.Count != 1000 || st.Min != time.Microsecond || st.Max != ms || st.Mean != 500500*time.Nanosecond {
		t.Fatalf("stats %+v", st)
	}
	for _, c := range []struct {
		got, want time.Duration
	}{{st.P50, 500 * time.Microsecond}, {st.P90, 900 * time.Microsecond}, {st.P99, 990 * time.Microsecond}} {
		if math.Abs(float64(c.got-c.want))/float64(c.want) > 0.004 {
			t.Errorf("percentile %v, want %v ± 0.4%%", c.got, c.want)
		}
	}
	var empty histogram
	if empty.stats() != (DelayStats{}) {
		t.Error("empty histogram has stats")
	}
}

// TestPipeReseed: a reseeded direction makes, from then on, the loss and
// jitter decisions of a fresh one with that seed, whatever it did before
// (the Gilbert-Elliott chain restarts in the good state), and Drops is its
// loss sequence.
func TestPipeReseed(t *testing.T) {
	for _, loss := range []Loss{UniformLoss(0.1), GELoss(0.05, 0.3, 0.8, 0.01)} {
		s := Shape{Delay: 10 * ms, Jitter: 2 * ms, Loss: loss, Seed: 1}
		decisions := func(p *pipe, n int) (drops []bool, at []time.Duration) {
			for i := 0; i < n; i++ {
				t, v := p.admit(0, 100)
				drops = append(drops, v == dropLoss)
				at = append(at, t)
			}
			return drops, at
		}
		used := newPipe(s, BtoA)
		decisions(used, 777) // some history, maybe in the bad state
		used.reseed(42, BtoA)
		s.Seed = 42
		fresh := newPipe(s, BtoA)
		d1, a1 := decisions(used, 2000)
		d2, a2 := decisions(fresh, 2000)
		if !slices.Equal(d1, d2) || !slices.Equal(a1, a2) {
			t.Errorf("%v: a reseeded pipe decides otherwise than a fresh one", loss.Kind)
		}
		if !slices.Equal(d1, Drops(s, BtoA, 2000)) {
			t.Errorf("%v: Drops differs from the pipe's decisions", loss.Kind)
		}
		if slices.Equal(d1, Drops(s, AtoB, 2000)) {
			t.Errorf("%v: both directions drop alike", loss.Kind)
		}
		s.Seed = 43
		if slices.Equal(d1, Drops(s, BtoA, 2000)) {
			t.Errorf("%v: seeds 42 and 43 drop alike", loss.Kind)
		}
		// The marks count from the reseed, and name the first drops.
		var want []uint64
		for i, lost := range d1 {
			if lost && len(want) < FirstLosses {
				want = append(want, uint64(i))
			}
		}
		if m := used.marks; m.judged != 2000 || !slices.Equal(m.first[:m.n], want) || m.n != FirstLosses {
			t.Errorf("%v: marks %d judged, first losses %v; want 2000, %v", loss.Kind, m.judged, m.first[:m.n], want)
		}
	}
}
