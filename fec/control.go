package fec

import "math"

// Policy is what a traffic class asks of the repair-rate controller.
type Policy struct {
	// Target is the residual loss per source packet to reach.
	Target float64
	// MinLoss: below this measured loss no repairs are sent.
	MinLoss float64
	// MaxK bounds the block (latency: a block waits for up to MaxK sources or
	// MaxDelay).
	MaxK int
	// The overhead m/k plus the residual it leaves to resend may not exceed
	// CapBase + CapPerLoss × loss.
	CapBase, CapPerLoss float64
}

// The two classes.
var (
	// Bulk: residual ≤ 1e-3 with overhead ≤ 2·loss + 5 %.
	Bulk = Policy{Target: 1e-3, MinLoss: 1e-3, MaxK: MaxK, CapBase: 0.05, CapPerLoss: 2}
	// RealTime: residual ≤ 1e-4 with overhead ≤ 35 %; blocks of at most 16 (most
	// close by MaxDelay long before).
	RealTime = Policy{Target: 1e-4, MinLoss: 1e-3, MaxK: 16, CapBase: 0.35}
)

const maxN = MaxK + MaxM

// lossDist holds, for every block length n ≤ maxN, the distribution of the number
// of lost symbols: p[n][j] = P(X = j) among n symbols.
type lossDist struct {
	p [maxN + 1][maxN + 1]float64
}

// fill computes the distribution under a Gilbert (two-state, every packet lost in
// the Bad state, none in Good) loss process with stationary loss rate loss and mean
// burst length burst, seen by symbols spread packets apart (interleaving depth).
// burst is clamped to at least 1/(1-loss), which is independent loss: then it is
// the binomial distribution.
//
// With r = 1/burst (Bad→Good) and q = loss·r/(1-loss) (Good→Bad), one packet step
// has eigenvalue λ = 1-q-r = 1 - r/(1-loss), and D steps give
// P(Good→Bad) = loss·(1-λ^D), P(Bad→Bad) = loss + (1-loss)·λ^D.
func (d *lossDist) fill(loss, burst float64, spread int) {
	loss = min(max(loss, 0), 0.999)
	burst = max(burst, 1/(1-loss))
	lambda := max(1-1/(burst*(1-loss)), 0)
	ld := math.Pow(lambda, float64(max(spread, 1)))
	gb := loss * (1 - ld)
	bb := loss + (1-loss)*ld
	// good[j], bad[j]: P(j lost so far, current symbol's state).
	var good, bad, ng, nb [maxN + 1]float64
	good[0], bad[1] = 1-loss, loss
	d.p[0] = [maxN + 1]float64{}
	d.p[0][0] = 1
	for n := 1; ; n++ {
		for j := 0; j <= n; j++ {
			d.p[n][j] = good[j] + bad[j]
		}
		if n == maxN {
			return
		}
		ng, nb = [maxN + 1]float64{}, [maxN + 1]float64{}
		for j := 0; j <= n; j++ {
			ng[j] += good[j]*(1-gb) + bad[j]*(1-bb)
			nb[j+1] += good[j]*gb + bad[j]*bb
		}
		good, bad = ng, nb
	}
}

// block returns, for k sources and m repairs, the probability that the block cannot
// be decoded (more than m of its k+m symbols lost) and the residual loss per source
// packet, Σ_{j>m} j/(k+m) · P(X = j) (a lost symbol is a source with probability
// k/(k+m), and a failed block rebuilds nothing).
func (d *lossDist) block(k, m int) (fail, residual float64) {
	n := k + m
	for j := m + 1; j <= n; j++ {
		fail += d.p[n][j]
		residual += float64(j) / float64(n) * d.p[n][j]
	}
	return fail, residual
}

// BinomialResidual is block failure and residual loss of RS(k+m) under independent
// loss p (recovery.md's formula), for 1 ≤ k, 0 ≤ m, k+m ≤ MaxK+MaxM.
func BinomialResidual(k, m int, p float64) (fail, residual float64) {
	n := k + m
	for j := m + 1; j <= n; j++ {
		pj := binom(n, j) * math.Pow(p, float64(j)) * math.Pow(1-p, float64(n-j))
		fail += pj
		residual += float64(j) / float64(n) * pj
	}
	return fail, residual
}

func binom(n, j int) float64 {
	c := 1.0
	for i := 1; i <= j; i++ {
		c = c * float64(n-j+i) / float64(i)
	}
	return c
}

// Residual is block failure and residual loss of RS(k+m) under Gilbert loss with
// mean burst length burst and interleaving depth spread (see Choose).
func Residual(k, m int, loss, burst float64, spread int) (fail, residual float64) {
	if k < 1 || m < 0 || k+m > maxN {
		return 1, loss
	}
	var d lossDist
	d.fill(loss, burst, spread)
	return d.block(k, m)
}

// Choose picks the rate for a measured loss rate and mean burst length (packets;
// ≤ 1/(1-loss) means independent loss). spread is the interleaving depth: how many
// packets of the same loss process separate two consecutive symbols of a block (1
// if the engine sends them back to back on one path; see the package doc).
//
// The rule: no repairs if loss < pol.MinLoss. Otherwise, among the (k, m) with
// 1 ≤ k ≤ pol.MaxK, 1 ≤ m ≤ MaxM and m/k plus the residual within the cap (the
// residual is resent), take the lowest overhead m/k whose residual meets
// pol.Target (ties: lower residual); if none does, the lowest residual within the
// cap (best effort). Where no (k, m) keeps both within it, the cap bounds m/k
// alone. A block closed early with n < k
// sources gets the fewest repairs, up to M[K], that meet the target for n sources
// (Rate.M[n]); if it holds bulk sources only, no more repairs per source than a
// full block (Rate.Bulk[n], rounded down; the encoder adds one when the credit of
// earlier blocks allows: Rate.BulkCap).
func Choose(pol Policy, loss, burst float64, spread int) Rate {
	var r Rate
	if !(loss >= pol.MinLoss) || loss <= 0 { // also NaN
		return r
	}
	var d lossDist
	d.fill(loss, burst, spread)
	maxK := min(max(pol.MaxK, 1), MaxK)
	limit := pol.CapBase + pol.CapPerLoss*loss + 1e-12
	bk, bm, bres, bok, bfits := 0, 0, math.Inf(1), false, false
	for k := 1; k <= maxK; k++ {
		for m := 1; m <= MaxM; m++ {
			ov := float64(m) / float64(k)
			if ov > limit {
				break
			}
			_, res := d.block(k, m)
			ok := res <= pol.Target
			// What the repairs leave unrecovered is resent, so the cap is
			// first on both together; on repairs alone only where no rate
			// keeps both within it (a cap below the loss rate).
			fits := ov+res <= limit
			better := false
			switch {
			case bk == 0:
				better = true
			case fits != bfits:
				better = fits
			case ok != bok:
				better = ok
			case ok: // both meet the target: lowest overhead, then residual
				bov := float64(bm) / float64(bk)
				better = ov < bov-1e-12 || math.Abs(ov-bov) <= 1e-12 && res < bres
			default: // neither: lowest residual, then overhead
				better = res < bres || res == bres && ov < float64(bm)/float64(bk)
			}
			if better {
				bk, bm, bres, bok, bfits = k, m, res, ok, fits
			}
		}
	}
	if bk == 0 {
		return r
	}
	r.K = bk
	r.M[bk] = uint8(bm)
	// Bulk blocks closed short get the full block's repairs per source.
	r.BulkCap = float64(bm) / float64(bk)
	for n := 1; n < bk; n++ {
		r.M[n] = uint8(bm)
		for m := 0; m < bm; m++ {
			if _, res := d.block(n, m); res <= pol.Target {
				r.M[n] = uint8(m)
				break
			}
		}
		// A block of bulk flows alone keeps within the cap even when closed
		// short; what rounds down here it gets from the encoder's credit
		// (Rate.BulkCap).
		r.Bulk[n] = min(r.M[n], uint8(r.BulkCap*float64(n)))
	}
	r.Bulk[bk] = r.M[bk]
	return r
}

// LossEstimator measures loss rate and mean burst length from per-packet outcomes
// (a Gilbert model fitted by counting: loss = lost/total, P(lost | previous lost) =
// lostAfterLost/lostPrev, mean burst = 1/(1 - that)). Counts are halved when total
// reaches Window, so the estimate follows the last ~Window packets. Zero value:
// Window 4096.
type LossEstimator struct {
	Window float64

	total, lost, prevLost, lostLost float64
	prev                            bool
	started                         bool
}

// Observe records one packet's outcome, in send order as far as the engine knows it.
func (e *LossEstimator) Observe(lost bool) {
	w := e.Window
	if w <= 0 {
		w = 4096
	}
	if e.total >= w {
		e.total, e.lost, e.prevLost, e.lostLost = e.total/2, e.lost/2, e.prevLost/2, e.lostLost/2
	}
	e.total++
	if lost {
		e.lost++
	}
	if e.started && e.prev {
		e.prevLost++
		if lost {
			e.lostLost++
		}
	}
	e.prev, e.started = lost, true
}

// Samples is the (decayed) number of packets behind the estimate.
func (e *LossEstimator) Samples() float64 { return e.total }

// Loss is the loss rate.
func (e *LossEstimator) Loss() float64 {
	if e.total == 0 {
		return 0
	}
	return e.lost / e.total
}

// Burst is the mean loss burst length in packets (1 if none seen).
func (e *LossEstimator) Burst() float64 {
	if e.prevLost == 0 {
		return 1
	}
	c := e.lostLost / e.prevLost
	if c >= 1 {
		return float64(MaxK + MaxM) // everything lost in a row: cap it
	}
	return 1 / (1 - c)
}

// MinSamples is how many packets a Controller wants before it sends repairs:
// 100, a sixth of a second of a 1 Mbit/s real-time flow of 200-byte packets.
// With 500 such a flow went its first 0.8 s without repairs, its losses then
// went to resends alone, and some arrived past a 40 ms deadline (lab,
// recovery-realtime, 2 % loss, the session's first repetition: 4–6 packets late
// up to 62 ms; 0 with 100). At 2 % loss 100 packets hold about 2 losses: enough
// to start, and the estimate keeps improving.
const MinSamples = 100

// Controller couples a LossEstimator with a Policy: the engine calls Observe for
// every packet whose fate it learns from acks, and Rate (e.g. every tick, or when
// the estimate changed) to feed Encoder.SetRate.
type Controller struct {
	Policy Policy
	// Spread is the interleaving depth the engine gives a block's symbols (1:
	// back to back; see the package doc).
	Spread int
	// Cost is the bytes a repair or a resend puts on the paths per byte of user
	// payload it protects (0 or less: 1): the policy's cap is on payload bytes,
	// and a full-size repair carries its symbol's length prefix, the DATA
	// header, the inner packet's IP and TCP headers and its own header (about
	// 1.05 at a 1500-byte MTU). Counted per packet, two bursty paths at the cap
	// spent 8.6 % of the payload against a cap of 8.3 % (lab, recovery-ge).
	Cost float64
	Est  LossEstimator
}

// Observe records one packet's outcome.
func (c *Controller) Observe(lost bool) { c.Est.Observe(lost) }

// Rate chooses the rate from the current estimate; no repairs before MinSamples.
func (c *Controller) Rate() Rate {
	if c.Est.Samples() < MinSamples {
		return Rate{}
	}
	pol := c.Policy
	if c.Cost > 1 {
		pol.CapBase /= c.Cost
		pol.CapPerLoss /= c.Cost
	}
	return Choose(pol, c.Est.Loss(), c.Est.Burst(), c.Spread)
}
