package cc

import (
	"math"
	"time"
)

// vegasState is weighted Vegas's per-path state (Cao, Xu, Fu; the structure of
// mptcp_wvegas.c in float64). Times in seconds, windows in segments.
type vegasState struct {
	baseRTT     float64 // smallest RTT sample (+Inf before the first)
	sumRTT      float64 // samples of the current round
	cntRTT      int
	roundStart  time.Time // acks of packets sent after this end the round
	instantRate float64   // cwnd/rtt at the last weight update; 0 = none
	weight      float64   // this path's share of the session's rate
	alpha       float64   // segments this path may keep queued
	queueDelay  float64   // smallest queueing delay seen since the last drain; 0 = unset
}

func (v *vegasState) reset(cfg *Config) {
	v.sumRTT, v.cntRTT = 0, 0
	v.roundStart = time.Time{}
	v.instantRate = 0
	v.weight = 1
	v.alpha = cfg.VegasAlpha
	v.queueDelay = 0
}

// restart is wVegas's re-entry into the Open state after a recovery: weights
// and targets start over, the base RTT is kept.
func (v *vegasState) restart(cfg *Config, now time.Time) {
	v.reset(cfg)
	v.roundStart = now
}

// vegasAck runs wVegas for one ack. Once per round (an ack of a packet sent
// after the round began) it compares the round's mean RTT with the base RTT:
// diff = cwnd·(rtt−base)/rtt is the number of this path's segments queued in the
// network. Slow start ends when diff exceeds gamma; in congestion avoidance the
// window moves by one segment per round toward diff = alpha_r, where alpha_r is
// the path's share (by rate) of the session's TotalAlpha. A queueing delay that
// doubled since its minimum drains the queue. Between round ends only slow start
// grows the window.
func (p *Path) vegasAck(a *Ack, sent time.Time, n float64, limited bool) {
	cfg := &p.c.cfg
	v := &p.veg
	if a.RTT > 0 {
		r := a.RTT.Seconds()
		v.baseRTT = min(v.baseRTT, r)
		v.sumRTT += r
		v.cntRTT++
	}
	if !v.roundStart.IsZero() && !sent.After(v.roundStart) {
		if limited && p.cwnd < p.ssthresh {
			p.slowStart(n)
		}
		return
	}
	v.roundStart = a.Now
	if v.cntRTT <= 2 {
		// Too few samples to judge: one Reno step.
		if limited {
			if rest := p.slowStart(n); rest > 0 {
				p.cwnd += rest / p.cwnd
			}
		}
		v.sumRTT, v.cntRTT = 0, 0
		return
	}
	rtt := v.sumRTT / float64(v.cntRTT)
	v.sumRTT, v.cntRTT = 0, 0
	base := v.baseRTT
	diff := floorSeg(p.cwnd * (rtt - base) / rtt)
	if p.cwnd < p.ssthresh {
		if diff > cfg.VegasGamma {
			target := floorSeg(p.cwnd * base / rtt)
			p.cwnd = min(p.cwnd, target+1)
			p.ssthresh = min(p.ssthresh, p.cwnd-1)
		} else if limited {
			p.slowStart(n)
		}
	} else {
		if diff >= v.alpha {
			v.instantRate = p.cwnd / rtt
			sum := 0.0
			for _, q := range p.peers() {
				sum += q.veg.instantRate
			}
			if !p.active {
				sum += v.instantRate
			}
			if sum > 0 && v.instantRate > 0 {
				v.weight = v.instantRate / sum
			}
			v.alpha = max(cfg.VegasAlpha, floorSeg(v.weight*cfg.VegasTotalAlpha))
		}
		switch {
		case diff > v.alpha:
			p.cwnd--
			p.ssthresh = min(p.ssthresh, p.cwnd-1)
		case diff < v.alpha && limited:
			p.cwnd++
		}
		// Drain: the queue doubled since its smallest value, so others (or we)
		// built one; halve below the base rate to let it empty. A zero queue
		// never drains (mptcp_wvegas.c does, when the average RTT equals the
		// base RTT exactly, and halves a perfectly behaved window every round).
		if q := rtt - base; q > 0 {
			if v.queueDelay == 0 || v.queueDelay > q {
				v.queueDelay = q
			}
			if q >= 2*v.queueDelay {
				p.cwnd = floorSeg(p.cwnd * base / (2 * rtt))
				v.queueDelay = 0
			}
		}
	}
	p.cwnd = min(max(p.cwnd, cfg.MinWindow), cfg.MaxWindow)
	p.ssthresh = max(p.ssthresh, floorSeg(p.cwnd/2)+floorSeg(p.cwnd/4))
}

// floorSeg rounds down to whole segments, as wVegas counts queued packets, but
// forgives float64 noise: 10·0.020/0.025 is 7.999999999999999 in binary floating
// point and must count as 8 segments (the kernel works in integer microseconds).
func floorSeg(x float64) float64 { return math.Floor(x + 1e-9) }
