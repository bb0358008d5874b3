package linkemu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// geVariance is the asymptotic variance per draw of the loss count of a
// Gilbert-Elliott chain: lim Var(S_n)/n for S_n the number of losses in n
// frames. Losses are not independent (they cluster in bad periods), so the
// binomial variance μ(1-μ) understates the spread; the state indicator's
// autocovariance decays like λ^k with λ = 1-p-r, which adds
// 2·(e_b-e_g)²·π_b·π_g·λ/(1-λ). For the brief's p=0.01, r=0.3 the binomial
// term alone would be a third of the total.
func geVariance(l Loss) float64 {
	mu := l.MeanLoss()
	pb := l.P / (l.P + l.R)
	lam := 1 - l.P - l.R
	de := l.OneMinusH - l.OneMinusK
	return mu*(1-mu) + 2*de*de*pb*(1-pb)*lam/(1-lam)
}

// MeanLoss is the long-run fraction of frames the model drops: P for
// uniform loss, and for Gilbert-Elliott the stationary mix
// π_bad·(1-h) + π_good·(1-k) with π_bad = p/(p+r). A chain with p = 0 never
// leaves the good state it starts in, so it loses 1-k.
func (l Loss) MeanLoss() float64 {
	switch {
	case l.Kind == LossUniform:
		return l.P
	case l.Kind != LossGE:
		return 0
	case l.P == 0:
		return l.OneMinusK
	}
	bad := l.P / (l.P + l.R)
	return bad*l.OneMinusH + (1-bad)*l.OneMinusK
}

// newGE returns a chain in the good state.
func newGE(p, r, oneMinusH, oneMinusK float64) *lossChain {
	return &lossChain{Loss: GELoss(p, r, oneMinusH, oneMinusK)}
}

func TestGEMeanLossHandComputed(t *testing.T) {
	cases := []struct {
		l    Loss
		want float64
	}{
		// π_bad = 0.01/0.31; loss = π_bad·0.5 = 0.016129…
		{GELoss(0.01, 0.3, 0.5, 0), 0.01 / 0.31 * 0.5},
		// π_bad = 0.5; 0.5·0.8 + 0.5·0.1 = 0.45
		{GELoss(0.5, 0.5, 0.8, 0.1), 0.45},
		// p = 0: never leaves good.
		{GELoss(0, 0.3, 1, 0.02), 0.02},
		{UniformLoss(0.03), 0.03},
		{Loss{}, 0},
	}
	for _, c := range cases {
		if got := c.l.MeanLoss(); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%+v: MeanLoss = %v, want %v", c.l, got, c.want)
		}
	}
}

// TestGEHandWorkedSequence feeds chosen uniforms to step and checks every
// verdict and state against a sequence worked out by hand with
// p=0.5 r=0.5 1-h=0.8 1-k=0.1. Frames 5 and 6 tell the two possible
// orders apart: judged after the transition they would come out the other
// way.
func TestGEHandWorkedSequence(t *testing.T) {
	g := newGE(0.5, 0.5, 0.8, 0.1)
	steps := []struct {
		uT, uL  float64
		drop    bool
		badNext bool
	}{
		{0.40, 0.05, true, true},   // good: 0.05<0.1 lost; 0.40<p → bad
		{0.90, 0.70, true, true},   // bad: 0.70<0.8 lost; 0.90≥r stays bad
		{0.20, 0.85, false, false}, // bad: 0.85≥0.8 kept; 0.20<r → good
		{0.60, 0.50, false, false}, // good: kept; 0.60≥p stays good
		{0.10, 0.50, false, true},  // good: 0.50≥0.1 kept (bad would lose it); → bad
		{0.30, 0.15, true, false},  // bad: 0.15<0.8 lost (good would keep it); → good
		{0.99, 0.09, true, false},  // good: 0.09<0.1 lost; stays good
	}
	if g.bad {
		t.Fatal("chain must start in the good state")
	}
	for i, s := range steps {
		if got := g.step(s.uT, s.uL); got != s.drop {
			t.Errorf("frame %d: drop = %v, want %v", i+1, got, s.drop)
		}
		if g.bad != s.badNext {
			t.Errorf("frame %d: bad after = %v, want %v", i+1, g.bad, s.badNext)
		}
	}
}

// TestGEFirstFrameJudgedGood: with p = 1 the chain is certain to move to
// bad after the first frame, and the two states have opposite verdicts, so
// the first verdict shows which state judged it, whatever the seed.
func TestGEFirstFrameJudgedGood(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		g := newGE(1, 0, 1, 0) // good never loses, bad always does
		if g.drop(rng) {
			t.Fatalf("seed %d: first frame lost: judged in the bad state", seed)
		}
		if !g.drop(rng) {
			t.Fatalf("seed %d: second frame kept: chain did not move to bad", seed)
		}
		g = newGE(1, 0, 0, 1) // good always loses, bad never does
		if !g.drop(rng) {
			t.Fatalf("seed %d: first frame kept: judged in the bad state", seed)
		}
		if g.drop(rng) {
			t.Fatalf("seed %d: second frame lost", seed)
		}
	}
}

// TestGEDrawOrder: Drop draws the transition number first, then the loss
// number, as netem does.
func TestGEDrawOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	ref := rand.New(rand.NewPCG(5, 6))
	g := newGE(0.3, 0.4, 0.7, 0.2)
	h := newGE(0.3, 0.4, 0.7, 0.2)
	for i := 0; i < 1000; i++ {
		uT, uL := ref.Float64(), ref.Float64()
		if g.drop(rng) != h.step(uT, uL) {
			t.Fatalf("frame %d: Drop disagrees with Step(transition, loss)", i)
		}
	}
}

// TestGEStationary runs 10^6 frames per parameter set with a fixed seed and
// compares the loss rate with the stationary value, within four standard
// deviations of the chain's own (not the binomial) variance.
func TestGEStationary(t *testing.T) {
	const n = 1_000_000
	sets := []Loss{
		GELoss(0.01, 0.3, 0.5, 0),     // the brief's example
		GELoss(0.01, 0.75, 0.5, 0.01), // the paper's Figure 2 with 1-k = 1%
		GELoss(0.2, 0.5, 0.9, 0.05),
		GELoss(0.05, 0.05, 1, 0),
	}
	for i, l := range sets {
		rng := rand.New(rand.NewPCG(uint64(42+i), 7))
		g := &lossChain{Loss: l}
		lost := 0
		for j := 0; j < n; j++ {
			if g.drop(rng) {
				lost++
			}
		}
		got, want := float64(lost)/n, l.MeanLoss()
		sd := math.Sqrt(geVariance(l) / n)
		t.Logf("p=%v r=%v 1-h=%v 1-k=%v: loss %.5f, stationary %.5f, |diff| %.1f σ (σ=%.2g; binomial σ would be %.2g)",
			l.P, l.R, l.OneMinusH, l.OneMinusK, got, want, math.Abs(got-want)/sd, sd, math.Sqrt(want*(1-want)/n))
		if math.Abs(got-want) > 4*sd {
			t.Errorf("set %d: loss %.5f, want %.5f ± %.5f", i, got, want, 4*sd)
		}
	}
}

// TestGEBurstLength: with 1-h = 1 and 1-k = 0 every loss burst is one stay
// in the bad state, whose length is geometric with mean 1/r.
func TestGEBurstLength(t *testing.T) {
	const n = 1_000_000
	l := GELoss(0.01, 0.3, 1, 0)
	g := &lossChain{Loss: l}
	rng := rand.New(rand.NewPCG(9, 9))
	bursts, lost, run := 0, 0, 0
	for i := 0; i < n; i++ {
		if g.drop(rng) {
			lost++
			run++
			continue
		}
		if run > 0 {
			bursts++
			run = 0
		}
	}
	mean := float64(lost) / float64(bursts)
	// Geometric with success r: sd = sqrt(1-r)/r per burst.
	sem := math.Sqrt(1-l.R) / l.R / math.Sqrt(float64(bursts))
	t.Logf("%d bursts, mean length %.3f (want %.3f ± %.3f)", bursts, mean, 1/l.R, 4*sem)
	if math.Abs(mean-1/l.R) > 4*sem {
		t.Errorf("mean burst length %.3f, want %.3f", mean, 1/l.R)
	}
}

// TestPaperTable1 checks the parameter reading against the seed paper: with
// p=1%, r=75%, 1-h=50% their Table 1 reports 1, 2, 3 and 7% "observed loss"
// (from pings) for 1-k = 0, 0.5, 1, 3%. A ping is lost if the request or
// the reply is (each crosses one emulated direction), so the expected ping
// loss is 1-(1-l)² with l the stationary one-way loss: 1.3, 2.3, 3.3, 7.1%,
// which round to their numbers. Reading "1-k" as k instead would lose
// nearly every frame.
func TestPaperTable1(t *testing.T) {
	for _, c := range []struct{ oneMinusK, observed float64 }{{0, 1}, {0.005, 2}, {0.01, 3}, {0.03, 7}} {
		l := GELoss(0.01, 0.75, 0.5, c.oneMinusK).MeanLoss()
		ping := 100 * (1 - (1-l)*(1-l))
		if math.Round(ping) != c.observed {
			t.Errorf("1-k=%v: one-way %.2f%%, ping %.2f%%, paper %v%%", c.oneMinusK, 100*l, ping, c.observed)
		}
	}
}

func TestUniformLossRate(t *testing.T) {
	const n = 1_000_000
	l := UniformLoss(0.05)
	g := &lossChain{Loss: l}
	rng := rand.New(rand.NewPCG(3, 4))
	lost := 0
	for i := 0; i < n; i++ {
		if g.drop(rng) {
			lost++
		}
	}
	got, sd := float64(lost)/n, math.Sqrt(0.05*0.95/n)
	if math.Abs(got-0.05) > 4*sd {
		t.Errorf("uniform loss %.5f, want 0.05 ± %.5f", got, 4*sd)
	}
	if (&lossChain{}).drop(rng) {
		t.Error("LossNone dropped a frame")
	}
}

func TestLossValidate(t *testing.T) {
	bad := []Loss{
		UniformLoss(-0.1), UniformLoss(1.5), UniformLoss(math.NaN()),
		GELoss(0.1, 1.1, 0.5, 0), GELoss(0.1, 0.2, -1, 0), GELoss(0.1, 0.2, 0.5, 2),
		{Kind: 9},
	}
	for _, l := range bad {
		if l.Validate() == nil {
			t.Errorf("%+v: Validate accepted it", l)
		}
	}
	for _, l := range []Loss{{}, UniformLoss(0), UniformLoss(1), GELoss(0, 0, 0, 0), GELoss(1, 1, 1, 1)} {
		if err := l.Validate(); err != nil {
			t.Errorf("%+v: %v", l, err)
		}
	}
}
