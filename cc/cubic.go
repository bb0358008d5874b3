package cc

import (
	"math"
	"time"
)

// cubicState is RFC 9438 CUBIC's per-path state (windows in segments, times in
// seconds).
type cubicState struct {
	wMax       float64 // window before the last reduction (after fast convergence)
	k          float64 // time from the epoch start to W_cubic = wMax
	cwndEpoch  float64
	wEst       float64 // the Reno-friendly window estimate
	cwndPrior  float64 // window just before the last reduction
	alpha      float64 // W_est's additive increase: 3(1-β)/(1+β) until W_est reaches cwndPrior, then 1
	epochStart time.Time
	epochValid bool
	lastAck    time.Time
}

// cubicW is W_cubic(t) = C (t-K)^3 + W_max.
func (p *Path) cubicW(t float64) float64 {
	d := t - p.cub.k
	return p.c.cfg.CubicC*d*d*d + p.cub.wMax
}

// cubicAvoid is RFC 9438 §4.2–4.4 for n acknowledged segments.
func (p *Path) cubicAvoid(n float64, now time.Time) {
	cfg := &p.c.cfg
	s := &p.cub
	if !s.epochValid {
		s.epochStart, s.epochValid = now, true
		s.cwndEpoch = p.cwnd
		s.wEst = p.cwnd
		s.alpha = 3 * (1 - cfg.CubicBeta) / (1 + cfg.CubicBeta)
		if s.wMax > p.cwnd {
			s.k = math.Cbrt((s.wMax - p.cwnd) / cfg.CubicC)
		} else {
			s.k = 0
			s.wMax = p.cwnd
		}
	}
	t := now.Sub(s.epochStart).Seconds()
	target := p.cubicTarget(t)
	s.wEst += s.alpha * n / p.cwnd
	if s.wEst >= s.cwndPrior {
		s.alpha = 1
	}
	if p.cubicW(t) < s.wEst {
		// Reno-friendly region: at least as fast as Reno would be.
		p.cwnd = s.wEst
		return
	}
	// Concave below W_max, convex above.
	p.cwnd += n * (target - p.cwnd) / p.cwnd
}

// cubicTarget is the window CUBIC aims at one RTT after t seconds into the
// epoch, clamped to [cwnd, 1.5·cwnd] (RFC 9438 §4.2).
func (p *Path) cubicTarget(t float64) float64 {
	return min(max(p.cubicW(t+p.srtt), p.cwnd), 1.5*p.cwnd)
}

// cubicAppLimited keeps the epoch clock still while the path is not limited by
// its window: RFC 9438 excludes such periods from t, otherwise W_cubic(t) would
// run ahead and the window would jump when traffic resumes.
func (p *Path) cubicAppLimited(now time.Time) {
	s := &p.cub
	if s.epochValid && !s.lastAck.IsZero() && now.After(s.lastAck) {
		s.epochStart = s.epochStart.Add(now.Sub(s.lastAck))
	}
	s.lastAck = now
}

// cubicDecrease is RFC 9438 §4.6–4.7: fast convergence, then β·cwnd.
func (p *Path) cubicDecrease() float64 {
	cfg := &p.c.cfg
	s := &p.cub
	w := p.cwnd
	if w < s.wMax {
		s.wMax = w * (1 + cfg.CubicBeta) / 2
	} else {
		s.wMax = w
	}
	s.cwndPrior = w
	s.epochValid = false
	return w * cfg.CubicBeta
}
