package sched

import "time"

// weighted is the MPUDP prototype's splitter: each packet independently picks a
// path at random with probability proportional to its configured weight (50/50,
// 75/25, 90/10 in the paper). Being memoryless it ignores delay and rate; it exists
// as the paper's baseline and for operators who want a fixed split.
//
// Weights come from PathInfo.Weight when any path in the slice carries one (the
// engine resolved them), else from Options.Weights by path ID, else all paths weigh
// the same. A path whose weight is 0 is on standby: it is used only when no usable
// path with a positive weight exists, so a fixed split never blackholes traffic.
//
// Degraded paths: the configured split takes precedence over health. Candidates are
// tried in tiers — healthy weighted, degraded weighted, healthy standby, degraded
// standby — and the first tier with a positive total weight is drawn from. A degraded
// path thus keeps its share only while no healthy weighted path exists. With a
// congestion controller the draw is among the tier's paths with window room; when
// they are all full nothing is picked (a full path is not a missing one).
type weighted struct {
	weights []float64
	rng     rng
}

func (*weighted) Name() string { return Weighted }

// weight sources for weightOf
const (
	fromInfo = iota
	fromOptions
	equal
)

func (w *weighted) weightOf(p *PathInfo, src int) float64 {
	switch src {
	case fromInfo:
		return max(p.Weight, 0)
	case fromOptions:
		if p.ID < len(w.weights) {
			return max(w.weights[p.ID], 0)
		}
		return 0
	}
	return 1
}

func (w *weighted) Pick(dst []int, paths []PathInfo, size int, flow uint32, now time.Time) []int {
	src := equal
	for i := range paths {
		if paths[i].Weight > 0 {
			src = fromInfo
			break
		}
	}
	if src == equal {
		for _, x := range w.weights {
			if x > 0 {
				src = fromOptions
				break
			}
		}
	}
	for tier := 0; tier < 4; tier++ {
		deg := tier&1 == 1
		s := src
		if tier >= 2 {
			if src == equal {
				break // equal weights were already tried in tiers 0 and 1
			}
			s = equal // standby paths, equal share
		}
		total, tierTotal := 0.0, 0.0
		for i := range paths {
			p := &paths[i]
			if !eligible(p, deg) {
				continue
			}
			if s == equal && src != equal && w.weightOf(p, src) > 0 {
				continue // standby tier: only the zero-weight paths
			}
			tierTotal += w.weightOf(p, s)
			if hasRoom(p, size) {
				total += w.weightOf(p, s)
			}
		}
		if tierTotal <= 0 {
			continue
		}
		if total <= 0 {
			// The tier exists but every window in it is full: wait for room
			// rather than fall through to a lower tier.
			return dst
		}
		u := w.rng.float64() * total
		last := -1
		for i := range paths {
			p := &paths[i]
			if !eligible(p, deg) || !hasRoom(p, size) {
				continue
			}
			if s == equal && src != equal && w.weightOf(p, src) > 0 {
				continue
			}
			x := w.weightOf(p, s)
			if x <= 0 {
				continue
			}
			last = i
			if u < x {
				return append(dst, i)
			}
			u -= x
		}
		return append(dst, last) // rounding left u at the very top of the range
	}
	return dst
}

// rttAware is the paper's proposal (§4.2.1): split traffic at random per packet,
// with each path's share proportional to 1/SRTT, so the path with the shorter RTT
// carries proportionally more (20ms vs 60ms gives 75/25, one of the paper's splits).
// It follows delay changes but not capacity: a short path gets its share even when
// it is slow, which is what earliest-arrival fixes. Degraded paths: only when no
// healthy usable path exists.
type rttAware struct {
	cfg Config
	rng rng
}

func (*rttAware) Name() string { return RTTAware }

// minRTTWeight bounds 1/SRTT so a path with a near-zero RTT (loopback, bogus
// sample) does not take every packet.
const minRTTWeight = 100 * time.Microsecond

func (r *rttAware) weight(p *PathInfo) float64 {
	return 1 / max(rttOf(p, r.cfg.DefaultRTT), minRTTWeight).Seconds()
}

func (r *rttAware) Pick(dst []int, paths []PathInfo, size int, flow uint32, now time.Time) []int {
	deg := useDegraded(paths)
	total := 0.0
	last := -1
	for i := range paths {
		if p := &paths[i]; eligible(p, deg) && hasRoom(p, size) {
			total += r.weight(p)
			last = i
		}
	}
	if last < 0 {
		return dst
	}
	u := r.rng.float64() * total
	for i := range paths {
		p := &paths[i]
		if !eligible(p, deg) || !hasRoom(p, size) {
			continue
		}
		x := r.weight(p)
		if u < x {
			return append(dst, i)
		}
		u -= x
	}
	return append(dst, last)
}
