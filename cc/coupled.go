package cc

// The coupled algorithms' congestion-avoidance increases, per acknowledged
// segment, recomputed from the current windows and smoothed RTTs of the active
// paths of the path's group (Path.SetGroup: the paths that share its
// bottleneck) on every ACK (RFC 6356 allows recomputing alpha as often as one likes; a
// handful of paths costs a few tens of nanoseconds). A path outside the active
// set, or the only one in it, behaves as Reno: every formula below reduces to
// 1/w_r for N = 1, and a path without an RTT sample has no rate to couple.
//
// Windows inside the sums are the current windows. RFC 6356 and OLIA use ssthresh
// for a path in fast recovery because TCP inflates its window there; this package
// sets the window to ssthresh at the congestion event and never inflates it, so
// the two are the same.

// coupledIncrease returns the increase of p's window per acknowledged segment.
func (c *Controller) coupledIncrease(p *Path) float64 {
	w := p.cwnd
	if p.alone() {
		if c.alg == algEWTCP && c.cfg.EWTCPWeight > 0 {
			return c.cfg.EWTCPWeight / w
		}
		return 1 / w
	}
	switch c.alg {
	case algLIA:
		return c.liaIncrease(p)
	case algOLIA:
		return c.oliaIncrease(p)
	case algBALIA:
		return c.baliaIncrease(p)
	case algCoupled:
		// Kelly–Voice / htsim FULLY_COUPLED (A = 1): 1/w_total, never more than
		// TCP's 1/w_r (which w_total >= w_r guarantees anyway).
		return min(1/c.totalWindow(p), 1/w)
	case algEWTCP:
		a := c.cfg.EWTCPWeight
		if a <= 0 {
			n := float64(len(p.peers()))
			a = 1 / (n * n)
		}
		return a / w
	}
	return 1 / w
}

// totalWindow is Σ w over the active paths of p's group.
func (c *Controller) totalWindow(p *Path) float64 {
	t := 0.0
	for _, q := range p.peers() {
		t += q.cwnd
	}
	return t
}

// liaIncrease is RFC 6356 eq. (1) per segment: min(alpha/w_total, 1/w_r), with
// alpha = w_total · max_k(w_k/rtt_k²) / (Σ_k w_k/rtt_k)² (eq. 2), so
// alpha/w_total = max_k(w_k/rtt_k²) / (Σ_k w_k/rtt_k)².
func (c *Controller) liaIncrease(p *Path) float64 {
	return c.lia(p, func(q *Path) float64 { return q.cwnd })
}

// lia is liaIncrease over the windows w returns: the active paths of p's group
// for which w is positive take part (the "rate" model's contention windows, 0 on paths not
// contending, use it too); 1/w(p) when none has an RTT.
func (c *Controller) lia(p *Path, w func(*Path) float64) float64 {
	best, sum := 0.0, 0.0
	for _, q := range p.peers() {
		wq := w(q)
		if wq <= 0 || q.srtt <= 0 {
			continue
		}
		x := wq / q.srtt
		sum += x
		best = max(best, x/q.srtt)
	}
	if sum <= 0 {
		return 1 / w(p)
	}
	return min(best/(sum*sum), 1/w(p))
}

// oliaIncrease is OLIA's per-segment increase
//
//	(w_r/rtt_r²) / (Σ_p w_p/rtt_p)²  +  alpha_r / w_r
//
// where, with l_p = max(bytes acked between the last two losses, bytes acked
// since the last loss) and quality q_p = l_p/rtt_p², B is the set of paths with
// the largest q, M those with the largest window and C = B \ M:
// alpha_r = 1/(N·|C|) for r in C, −1/(N·|M|) for r in M when C is not empty,
// 0 otherwise (N = active paths). The alphas sum to zero: OLIA moves window from
// the largest paths to the best ones without changing the total increase.
func (c *Controller) oliaIncrease(p *Path) float64 {
	sum, maxQ, maxW := 0.0, 0.0, 0.0
	peers := p.peers()
	for i, q := range peers {
		sum += q.cwnd / q.srtt
		qq := q.oliaQuality()
		if i == 0 || qq > maxQ {
			maxQ = qq
		}
		if i == 0 || q.cwnd > maxW {
			maxW = q.cwnd
		}
	}
	nC, nM := 0, 0
	for _, q := range peers {
		inM := q.cwnd == maxW
		if inM {
			nM++
		} else if q.oliaQuality() == maxQ {
			nC++
		}
	}
	n := float64(len(peers))
	alpha := 0.0
	if nC > 0 {
		switch {
		case p.cwnd == maxW:
			alpha = -1 / (n * float64(nM))
		case p.oliaQuality() == maxQ:
			alpha = 1 / (n * float64(nC))
		}
	}
	return p.cwnd/(p.srtt*p.srtt)/(sum*sum) + alpha/p.cwnd
}

func (p *Path) oliaQuality() float64 { return max(p.l1, p.l2) / (p.srtt * p.srtt) }

// baliaIncrease is BALIA's per-segment increase with x_k = w_k/rtt_k and
// alpha_r = x_max/x_r:
//
//	x_r/(rtt_r·(Σx)²) · (1+alpha_r)/2 · (4+alpha_r)/5 = (x_r+x_max)(4x_r+x_max) / (10·w_r·(Σx)²)
func (c *Controller) baliaIncrease(p *Path) float64 {
	sum, xmax := 0.0, 0.0
	for _, q := range p.peers() {
		x := q.cwnd / q.srtt
		sum += x
		xmax = max(xmax, x)
	}
	xr := p.cwnd / p.srtt
	return (xr + xmax) * (4*xr + xmax) / (10 * p.cwnd * sum * sum)
}

// baliaAlpha is x_max/x_r (1 for a path outside the coupling set): BALIA cuts
// w_r/2·min(alpha_r, 1.5), so the fastest path halves and slower ones cut up to 75 %.
func (c *Controller) baliaAlpha(p *Path) float64 {
	if p.alone() {
		return 1
	}
	xmax := 0.0
	for _, q := range p.peers() {
		xmax = max(xmax, q.cwnd/q.srtt)
	}
	return xmax / (p.cwnd / p.srtt)
}
