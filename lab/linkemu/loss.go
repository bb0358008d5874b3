package linkemu

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// LossKind selects a loss model.
type LossKind uint8

const (
	// LossNone forwards every frame.
	LossNone LossKind = iota
	// LossUniform drops each frame independently with probability P
	// (netem's `loss random P` without correlation).
	LossUniform
	// LossGE is the two-state Gilbert-Elliott chain of netem's
	// `loss gemodel p r 1-h 1-k`.
	LossGE
)

func (k LossKind) String() string {
	switch k {
	case LossNone:
		return "none"
	case LossUniform:
		return "uniform"
	case LossGE:
		return "gemodel"
	}
	return fmt.Sprintf("LossKind(%d)", uint8(k))
}

// Loss describes a loss model as plain numbers, so a Shape can be copied,
// compared and written to a scenario file; NewModel turns it into the
// stateful model one direction runs.
//
// The GE fields use netem's command-line names and meanings (probabilities in
// [0,1], not percent): P = p, the chance to go from the good to the bad state
// after a packet; R = r, bad to good; OneMinusH = 1-h, the chance a packet
// is lost in the bad state; OneMinusK = 1-k, the chance a packet is lost in
// the good state. For LossUniform only P is used.
type Loss struct {
	Kind      LossKind
	P         float64
	R         float64
	OneMinusH float64
	OneMinusK float64
}

// UniformLoss is independent loss with probability p.
func UniformLoss(p float64) Loss { return Loss{Kind: LossUniform, P: p} }

// GELoss is netem's `loss gemodel p r 1-h 1-k`, probabilities in [0,1].
func GELoss(p, r, oneMinusH, oneMinusK float64) Loss {
	return Loss{Kind: LossGE, P: p, R: r, OneMinusH: oneMinusH, OneMinusK: oneMinusK}
}

func checkProb(name string, v float64) error {
	if math.IsNaN(v) || v < 0 || v > 1 {
		return fmt.Errorf("linkemu: loss %s = %v, want a probability in [0,1]", name, v)
	}
	return nil
}

// Validate reports parameters outside [0,1] and unknown kinds.
func (l Loss) Validate() error {
	switch l.Kind {
	case LossNone:
		return nil
	case LossUniform:
		return checkProb("p", l.P)
	case LossGE:
		for _, c := range []struct {
			n string
			v float64
		}{{"p", l.P}, {"r", l.R}, {"1-h", l.OneMinusH}, {"1-k", l.OneMinusK}} {
			if err := checkProb(c.n, c.v); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("linkemu: unknown loss kind %d", l.Kind)
}

// MeanLoss is the long-run fraction of frames the model drops: P for
// uniform loss, and for Gilbert-Elliott the stationary mix
// π_bad·(1-h) + π_good·(1-k) with π_bad = p/(p+r). A chain with p = 0 never
// leaves the good state it starts in, so it loses 1-k.
func (l Loss) MeanLoss() float64 {
	switch l.Kind {
	case LossUniform:
		return l.P
	case LossGE:
		if l.P == 0 {
			return l.OneMinusK
		}
		bad := l.P / (l.P + l.R)
		return bad*l.OneMinusH + (1-bad)*l.OneMinusK
	}
	return 0
}

// NewModel returns a fresh model in its initial state (GE: good).
func (l Loss) NewModel() LossModel {
	switch l.Kind {
	case LossUniform:
		return &Uniform{P: l.P}
	case LossGE:
		return NewGilbertElliott(l.P, l.R, l.OneMinusH, l.OneMinusK)
	}
	return noLoss{}
}

// LossModel decides, frame by frame, whether a frame is lost. Models keep
// their state between calls and draw only from rng, so a fixed seed gives
// the same decisions for the same sequence of frames.
type LossModel interface {
	Drop(rng *rand.Rand) bool
}

type noLoss struct{}

func (noLoss) Drop(*rand.Rand) bool { return false }

// Uniform drops each frame independently with probability P.
type Uniform struct{ P float64 }

// Drop draws one uniform number per frame.
func (u *Uniform) Drop(rng *rand.Rand) bool { return rng.Float64() < u.P }

// GilbertElliott is the two-state loss chain of netem's `loss gemodel`.
//
// What netem does (net/sched/sch_netem.c, loss_gilb_ell, read in the Linux
// 6.18 tree; the tc side is iproute2's tc/q_netem.c): the qdisc keeps a
// state that is GOOD when the model is configured. For every packet it
// draws two 32-bit random numbers. The first is compared with the
// transition probability out of the current state (p when good, r when
// bad) and may flip the state. The second decides the loss, but the
// comparison sits in the branch of the state the packet arrived in, so it
// uses that state's loss probability even when the first draw has just
// flipped the state: the verdict belongs to the state before the
// transition, and the flip only affects the next packet. In the good branch
// a packet is lost when the draw is below k1, which tc fills directly with
// the "1-k" argument; in the bad branch it is lost when the draw is above
// h, and tc converts its "1-h" argument into h = 1 - (1-h) before sending
// it, so the loss chance in the bad state is 1-h. tc's defaults when
// arguments are omitted are r = 100%, 1-h = 100%, 1-k = 0. Old kernels
// differ: their good branch had no break and fell through into the bad
// branch, and they compared the bad-state draw the other way round. The
// behaviour described here is that of current kernels and tc.
//
// Step reproduces exactly that: the transition draw first, then the loss
// draw judged against the pre-transition state. So the first packet is
// always judged in the good state and is lost with probability 1-k.
type GilbertElliott struct {
	P, R, OneMinusH, OneMinusK float64

	bad bool
}

// NewGilbertElliott returns a chain in the good state.
func NewGilbertElliott(p, r, oneMinusH, oneMinusK float64) *GilbertElliott {
	return &GilbertElliott{P: p, R: r, OneMinusH: oneMinusH, OneMinusK: oneMinusK}
}

// Drop draws the transition number, then the loss number, as netem does.
func (g *GilbertElliott) Drop(rng *rand.Rand) bool {
	uTrans := rng.Float64()
	uLoss := rng.Float64()
	return g.Step(uTrans, uLoss)
}

// Step advances the chain by one frame given its two uniform draws in
// [0,1): uTrans decides the transition, uLoss the verdict, which uses the
// state the frame arrived in.
func (g *GilbertElliott) Step(uTrans, uLoss float64) (drop bool) {
	if g.bad {
		drop = uLoss < g.OneMinusH
		if uTrans < g.R {
			g.bad = false
		}
		return drop
	}
	drop = uLoss < g.OneMinusK
	if uTrans < g.P {
		g.bad = true
	}
	return drop
}

// Bad reports whether the next frame will be judged in the bad state.
func (g *GilbertElliott) Bad() bool { return g.bad }

// Reset puts the chain back in the good state.
func (g *GilbertElliott) Reset() { g.bad = false }
