package cc

import (
	"math"
	"time"
)

// cubicState is RFC 9438 CUBIC's per-window state (windows in segments, times
// in seconds).
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

// w is W_cubic(t) = C (t-K)^3 + W_max.
func (s *cubicState) w(cfg *Config, t float64) float64 {
	d := t - s.k
	return cfg.CubicC*d*d*d + s.wMax
}

// avoid is RFC 9438 §4.2–4.4 for n acknowledged segments on window *w with
// smoothed RTT srtt (seconds).
func (s *cubicState) avoid(cfg *Config, w *float64, n, srtt float64, now time.Time) {
	if !s.epochValid {
		s.epochStart, s.epochValid = now, true
		s.cwndEpoch = *w
		s.wEst = *w
		s.alpha = 3 * (1 - cfg.CubicBeta) / (1 + cfg.CubicBeta)
		if s.wMax > *w {
			s.k = math.Cbrt((s.wMax - *w) / cfg.CubicC)
		} else {
			s.k = 0
			s.wMax = *w
		}
	}
	t := now.Sub(s.epochStart).Seconds()
	target := s.target(cfg, *w, srtt, t)
	s.wEst += s.alpha * n / *w
	if s.wEst >= s.cwndPrior {
		s.alpha = 1
	}
	if s.w(cfg, t) < s.wEst {
		// Reno-friendly region: at least as fast as Reno would be.
		*w = s.wEst
		return
	}
	// Concave below W_max, convex above.
	*w += n * (target - *w) / *w
}

// target is the window CUBIC aims at one RTT after t seconds into the epoch,
// clamped to [w, 1.5·w] (RFC 9438 §4.2).
func (s *cubicState) target(cfg *Config, w, srtt, t float64) float64 {
	return min(max(s.w(cfg, t+srtt), w), 1.5*w)
}

// appLimited keeps the epoch clock still while the window does not limit the
// path: RFC 9438 excludes such periods from t, otherwise W_cubic(t) would run
// ahead and the window would jump when traffic resumes.
func (s *cubicState) appLimited(now time.Time) {
	if s.epochValid && !s.lastAck.IsZero() && now.After(s.lastAck) {
		s.epochStart = s.epochStart.Add(now.Sub(s.lastAck))
	}
	s.lastAck = now
}

// decrease is RFC 9438 §4.6–4.7 for window w: fast convergence, then β·w.
func (s *cubicState) decrease(cfg *Config, w float64) float64 {
	if w < s.wMax {
		s.wMax = w * (1 + cfg.CubicBeta) / 2
	} else {
		s.wMax = w
	}
	s.cwndPrior = w
	s.epochValid = false
	return w * cfg.CubicBeta
}
