package linkemu

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// LossKind selects a loss model.
type LossKind uint8

const (
	LossNone    LossKind = iota // forwards every frame
	LossUniform                 // each frame lost with probability P: netem's `loss random P`
	LossGE                      // the Gilbert-Elliott chain of netem's `loss gemodel p r 1-h 1-k`
)

// Loss describes a loss model as plain comparable numbers (lossChain runs
// it). The GE fields are netem's arguments
// as probabilities in [0,1]: P = p, good to bad after a packet; R = r, bad to
// good; OneMinusH and OneMinusK, the chances a packet is lost in the bad and
// in the good state. LossUniform uses only P.
type Loss struct {
	Kind                       LossKind
	P, R, OneMinusH, OneMinusK float64
}

// UniformLoss is independent loss with probability p.
func UniformLoss(p float64) Loss { return Loss{Kind: LossUniform, P: p} }

// GELoss is netem's `loss gemodel p r 1-h 1-k`, probabilities in [0,1].
func GELoss(p, r, oneMinusH, oneMinusK float64) Loss {
	return Loss{Kind: LossGE, P: p, R: r, OneMinusH: oneMinusH, OneMinusK: oneMinusK}
}

// Validate reports parameters outside [0,1] and unknown kinds.
func (l Loss) Validate() error {
	names := []string{"p", "r", "1-h", "1-k"}
	switch l.Kind {
	case LossNone:
		return nil
	case LossUniform:
		names = names[:1]
	case LossGE:
	default:
		return fmt.Errorf("linkemu: unknown loss kind %d", l.Kind)
	}
	for i, v := range []float64{l.P, l.R, l.OneMinusH, l.OneMinusK}[:len(names)] {
		if math.IsNaN(v) || v < 0 || v > 1 {
			return fmt.Errorf("linkemu: loss %s = %v, want a probability in [0,1]", names[i], v)
		}
	}
	return nil
}

// lossChain is the state a direction runs a Loss with, drawing only from
// the rng it is given: a fixed seed gives the same decisions for the same
// frames. Uniform loss takes one draw per frame, none takes none.
//
// Gilbert-Elliott runs as Linux 6.18's netem does (sch_netem.c,
// loss_gilb_ell): the chain starts good; per packet a first draw may flip
// the state (p when good, r when bad), and a second decides the loss in the
// state the packet arrived in (1-k when good, 1-h when bad), so the first
// packet is always judged good. (Old kernels fell through from the good
// branch and compared the other way.)
type lossChain struct {
	Loss
	bad bool // the next frame is judged in the bad state
}

func (c *lossChain) drop(rng *rand.Rand) bool {
	switch c.Kind {
	case LossUniform:
		return rng.Float64() < c.P
	case LossGE:
		uTrans := rng.Float64()
		return c.step(uTrans, rng.Float64())
	}
	return false
}

// step advances the GE chain by one frame given its two draws in [0,1):
// uTrans decides the transition, uLoss the verdict in the state the frame
// arrived in.
func (c *lossChain) step(uTrans, uLoss float64) (drop bool) {
	if c.bad {
		drop = uLoss < c.OneMinusH
		c.bad = !(uTrans < c.R)
	} else {
		drop = uLoss < c.OneMinusK
		c.bad = uTrans < c.P
	}
	return drop
}
