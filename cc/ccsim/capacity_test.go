package ccsim

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Capacity changes (docs/congestion.md, "rate", "Capacity falls and rises"):
// one "rate" path through one link of 50 ms RTT and a 500-packet buffer, the
// cellular case, whose rate steps or fades. Samples every 10 ms.

const (
	capRTT    = 50 * time.Millisecond
	capBuffer = 500 * 1500
	capStep   = 10 * time.Second
	capEvery  = 10 * time.Millisecond
)

// capacityRun runs one "rate" flow on a link of rate r0 (bits/s) and calls
// change(s, l) to schedule the link's rate changes, until end.
func capacityRun(t testing.TB, seed uint64, r0 float64, end time.Duration, change func(*Sim, *Link)) (*Sim, *Link, *Flow) {
	s := New(Config{Seed: seed, PaceTick: paceTick, SampleEvery: capEvery})
	l := s.AddLink(LinkConfig{Name: "cell", Rate: r0, Delay: capRTT / 2, Buffer: capBuffer})
	f := mustFlow(t, s, FlowConfig{Name: "rate", CC: "rate", Routes: routes(1, l), Start: start(s)})
	change(s, l)
	s.Run(end)
	return s, l, f
}

// stepDown: 20 → 2 Mbit/s at capStep. It returns how long after the step the
// pacing rate first fell below 1.25 × 2 Mbit/s, when the queueing delay was
// last at or above 2 min RTTs (100 ms), its peak, and its mean over the 5 s
// from 2 s after the step.
func stepDown(t testing.TB, seed uint64) (pace, drained, peak, mean time.Duration) {
	const hi, lo = 20e6, 2e6
	s, l, f := capacityRun(t, seed, hi, capStep+8*time.Second, func(s *Sim, l *Link) {
		s.At(capStep, func() { l.SetRate(lo) })
	})
	i0 := s.sampleIndex(capStep)
	pace = -1
	for i := i0; i < len(f.PacingSamples); i++ {
		at := time.Duration(s.sampleTimes[i]) - capStep
		if pace < 0 && f.PacingSamples[i][0]*8 < 1.25*lo {
			pace = at
		}
		if d := l.DelaySamples[i]; d >= 2*capRTT {
			drained = at
		}
		peak = max(peak, l.DelaySamples[i])
	}
	var sum time.Duration
	j0, j1 := s.sampleIndex(capStep+2*time.Second), s.sampleIndex(capStep+7*time.Second)
	for _, d := range l.DelaySamples[j0:j1] {
		sum += d
	}
	return pace, drained, peak, sum / time.Duration(j1-j0)
}

// A 10× fall of capacity: the model must notice it within a few round trips,
// let the queue its old rate built drain, and keep it short afterwards. The
// first sample that shows the fall (≈ 2 min RTTs after it) spans the old rate
// too, so bw falls to a few times the new one first, and to it with the next
// sample, which comes a (by then inflated, ≈ 0.6 s) round trip later: hence
// the bound of 1 s for the pacing rate.
// The queue that the old rate builds before any ack can tell (one round trip
// at 20 Mbit/s, ≈ 80 packets = 450 ms at 2 Mbit/s) takes 0.45 s at the new
// rate to leave whatever the sender does: that, not the reaction, bounds how
// soon the delay is back under 2 min RTTs.
//
// The simulation is chaotic: a change anywhere before the step (a different
// Startup) moves the state the fall meets, and the drain time of one seed
// moves by ±0.3 s with it. Over seeds 1–40 it had a median of 0.76–0.77 s and
// a 90th percentile of 1.27–1.30 s both before and after Startup's pacing
// floor (cc/rate.go, ratePacingRate), so the test reads twenty seeds and
// bounds the median and the worst, not the worst of five.
func TestRateCapacityFall(t *testing.T) {
	var paces, drains []time.Duration
	var worstPeak, worstMean time.Duration
	for seed := uint64(1); seed <= fallSeeds; seed++ {
		pace, drained, peak, mean := stepDown(t, seed)
		t.Logf("seed %d: 20→2 Mbit/s: pacing < 2.5 Mbit/s after %v (%.1f min RTTs); queue delay ≥ 100 ms until %v after the step, peak %v; mean %v from 2 s to 7 s after",
			seed, pace, pace.Seconds()/capRTT.Seconds(), drained, peak, mean)
		if pace < 0 {
			pace = time.Hour
		}
		paces, drains = append(paces, pace), append(drains, drained)
		worstPeak, worstMean = max(worstPeak, peak), max(worstMean, mean)
	}
	slices.Sort(paces)
	slices.Sort(drains)
	worstPace, worstDrain, medianDrain := paces[len(paces)-1], drains[len(drains)-1], drains[len(drains)/2]
	t.Logf("over %d seeds: pacing below 1.25 × the new capacity after at most %v; queue delay under 100 ms for good after %v (median), %v (worst); peak %v, mean %v",
		fallSeeds, worstPace, medianDrain, worstDrain, worstPeak, worstMean)
	if worstPace > time.Second {
		t.Errorf("pacing fell below 1.25 × the new capacity only %v after the step", worstPace)
	}
	if medianDrain > time.Second || worstDrain > 1500*time.Millisecond {
		t.Errorf("queueing delay ≥ 100 ms until %v after the step (median; worst %v), want ≤ 1 s (worst ≤ 1.5 s)", medianDrain, worstDrain)
	}
	if worstMean > capRTT/2 {
		t.Errorf("mean queueing delay %v after the fall, want ≤ %v", worstMean, capRTT/2)
	}
}

// fallSeeds is how many seeds TestRateCapacityFall runs (0.02 s each).
const fallSeeds = 20

// stepUp: 2 → 20 Mbit/s at capStep. It returns how long after the step the
// goodput over a window of two min RTTs first reached 90 % of 20 Mbit/s.
func stepUp(t testing.TB, seed uint64) (reach time.Duration) {
	const lo, hi = 2e6, 20e6
	s, _, f := capacityRun(t, seed, lo, capStep+5*time.Second, func(s *Sim, l *Link) {
		s.At(capStep, func() { l.SetRate(hi) })
	})
	win := 2 * capRTT
	for i := s.sampleIndex(capStep); i+int(win/capEvery) < len(s.sampleTimes); i++ {
		from := time.Duration(s.sampleTimes[i])
		if f.Goodput(-1, from, from+win) >= 0.9*hi {
			// The window ends then: that is when the rate was reached.
			return from + win - capStep
		}
	}
	return time.Hour
}

// A 10× rise: the goodput reaches 90 % of the new capacity within a few round
// trips. Nothing in the acks shows a rise while the model cruises at its
// estimate: it is found by the next 1.25 probe of the gain cycle, up to 7 min
// RTTs after the step, so the bound is that wait plus the growth.
func TestRateCapacityRise(t *testing.T) {
	var sum, worst time.Duration
	for _, seed := range seeds {
		r := stepUp(t, seed)
		t.Logf("seed %d: 2→20 Mbit/s: goodput over 100 ms ≥ 18 Mbit/s %v after the step (%.1f min RTTs)", seed, r, r.Seconds()/capRTT.Seconds())
		sum += r
		worst = max(worst, r)
	}
	mean := sum / time.Duration(len(seeds))
	t.Logf("mean %v (%.1f min RTTs), worst %v (%.1f)", mean, mean.Seconds()/capRTT.Seconds(), worst, worst.Seconds()/capRTT.Seconds())
	// Before the re-entry into Startup: mean 65, worst 74 min RTTs. The
	// issue's target, 5, is not met: see docs/congestion.md.
	if mean > 12*capRTT || worst > 25*capRTT {
		t.Errorf("90 %% of the new capacity after %.1f min RTTs on average, %.1f at worst, want ≤ 12 and ≤ 25", mean.Seconds()/capRTT.Seconds(), worst.Seconds()/capRTT.Seconds())
	}
}

// fading is a seeded Markov-modulated rate process: holding times
// exponential with mean 1 s, each new rate log-uniform between 1 and
// 20 Mbit/s (an order of magnitude within seconds, as on LTE). It schedules
// the changes on l until end and returns the bytes the link offers in
// [from, end).
func fading(s *Sim, l *Link, seed uint64, from, end time.Duration) (offered float64) {
	rng := rand.New(rand.NewPCG(seed, 0xfade))
	rate := l.Rate
	for at := time.Duration(0); at < end; {
		next := min(at+time.Duration(rng.ExpFloat64()*float64(time.Second)), end)
		if next > from {
			offered += rate / 8 * (next - max(at, from)).Seconds()
		}
		at = next
		rate = math.Exp(math.Log(1e6) + rng.Float64()*math.Log(20))
		r := rate
		s.At(at, func() { l.SetRate(r) })
	}
	return offered
}

// On a fading link the mean queueing delay stays bounded and the model
// still carries most of what the link offers (measured after 5 s).
func TestRateFadingLink(t *testing.T) {
	const from, end = 5 * time.Second, 65 * time.Second
	var util, qmean, q95 float64
	for _, seed := range seeds {
		var offered float64
		var b0 uint64
		s, l, _ := capacityRun(t, seed, 5e6, end, func(s *Sim, l *Link) {
			offered = fading(s, l, seed, from, end)
			s.At(from, func() { b0 = l.BytesOut })
		})
		u := float64(l.BytesOut-b0) / offered
		ds := l.DelaySamples[s.sampleIndex(from):]
		m, p := meanP95(ds)
		t.Logf("seed %d: utilization %.2f of offered, queueing delay mean %v, p95 %v", seed, u, m, p)
		util += u
		qmean += m.Seconds()
		q95 += p.Seconds()
	}
	k := float64(len(seeds))
	util, qmean, q95 = util/k, qmean/k, q95/k
	t.Logf("fading 1–20 Mbit/s: utilization %.2f, queueing delay mean %.0f ms, p95 %.0f ms", util, qmean*1e3, q95*1e3)
	// Before the fall and rise reactions: 0.74 and 184 ms (p95 791 ms).
	if util < 0.75 {
		t.Errorf("utilization %.2f of what the link offered, want ≥ 0.75", util)
	}
	if qmean > 0.1 {
		t.Errorf("mean queueing delay %.0f ms, want ≤ 100 ms (2 min RTTs)", qmean*1e3)
	}
}

// meanP95 returns the mean and the 95th percentile of ds.
func meanP95(ds []time.Duration) (mean, p95 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds)), sorted[len(sorted)*95/100]
}
