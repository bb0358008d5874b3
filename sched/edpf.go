package sched

import "time"

// edpf is the earliest-arrival scheduler (Earliest Delivery Path First): each packet
// goes to the path on which it is expected to reach the receiver first,
//
//	arrival_p = now + wait_p + size/rate_p + BaseOWD_p
//	wait_p    = max(virtual queue_p, OWD_p - BaseOWD_p, cwnd wait_p), at most MaxBacklog
//
// Only differences between paths matter, so the relative one-way delays the engine
// supplies are enough. This answers the paper's open questions together: a long path
// gets traffic only once the short path's queue has grown by the delay difference
// (so packets of a burst arrive roughly in order and little reordering is left to the
// receiver), and a path's share of a saturating load follows its rate, not its RTT.
//
// Virtual queue. Measured OWDs lag by an RTT and cannot see the packets of the
// current burst, so each path keeps a busy-until time: sending size bytes on p moves
// it to (now + wait_p + size/rate_p). The measured queue OWD-BaseOWD enters through
// max(), not a sum: it already contains our own earlier packets; when it exceeds the
// virtual queue (cross traffic, or our rate estimate is too high) the virtual queue is
// lifted to it, which corrects the model without double counting.
//
// Rate. Rate==0 (no estimate yet) uses Config.InitialRate. The delivery rate only
// measures what we sent, so a path that got little traffic looks slow, gets less
// traffic, and would stay underestimated forever. To break that loop a path whose
// measured queue is below ProbeQueue — evidence that it is not saturated — is
// credited with rate×ProbeGain (1.25, BBR's probing gain): its virtual queue drains
// faster than we believe it really does, so it attracts more packets; its delivery
// rate then measures higher and the credit compounds by ~25% per round trip until a
// queue builds, at which point the path is charged its measured rate again. A path
// with a real queue is charged exactly its measured rate, so the probing costs at
// most one ProbeQueue of extra delay. For the same reason an unsaturated path is
// charged at least InitialRate: an idle path's delivery rate is whatever its probes
// carried (a few kbit/s), and charging that would keep it idle forever.
//
// Shared links. In a full mesh several paths cross the same access link; charging
// each its own virtual queue and its own rate would count that link's capacity once
// per path. Paths with the same nonzero Link therefore share one virtual queue, and
// the link's rate is the largest rate any of its paths measured (each path's
// delivery rate is at most the link's). Each path keeps its own one-way delay, so
// within a link the packet still takes the path that arrives first.
//
// Congestion window. With a controller a path whose window is full is no candidate
// (the engine holds the packet until a window opens), and the rate charged is at
// most what the windows allow, cwnd/SRTT summed over the paths of a shared link: a
// path a coupled controller keeps small delivers no faster than its window. The
// windows are only a cap, not the estimate itself: a window larger than the path
// needs (not cwnd-limited, or SRTT inflated by a queue) says nothing about the
// path's capacity, and charging it made the scheduler overload shared links (in the
// end-to-end test aggregation over two 10 Mbit/s links fell from ×1.6+ to ×1.35).
//
// Degraded paths: only when no healthy usable path exists. Ties go to the first path
// in the slice.
type edpf struct {
	cfg     Config
	epoch   time.Time
	started bool
	// busy is, per link key (see linkKey), the time (ns since epoch) at which the
	// last packet we scheduled on that link finishes serialising at the bottleneck.
	busy [2 * MaxPaths]int64
	// lrate is scratch: per link key, the largest rate of its candidate paths;
	// wrate the sum of their congestion windows' rates (cwnd/SRTT).
	lrate, wrate [2 * MaxPaths]float64
	// last is the ID of the path of the previous pick (BurstSlack).
	last    int
	lastSet bool
}

// linkKey indexes the per-link state: a path of its own uses its ID, a shared link
// MaxPaths+Link.
func linkKey(p *PathInfo) int {
	if p.Link > 0 && p.Link < MaxPaths {
		return MaxPaths + p.Link
	}
	return p.ID
}

// burstMinRun: Config.BurstSlack applies only where this many packets fit in
// it on the earliest path (above about 180 Mbit/s with the default 1 ms), so
// that slower paths keep their per-packet choices.
const burstMinRun = 16

func newEDPF(cfg Config) *edpf { return &edpf{cfg: cfg} }

func (*edpf) Name() string { return EarliestArrival }

// windowRate is the rate a congestion window allows, cwnd/SRTT in bytes/s, when
// p has a controller and an RTT sample.
func windowRate(p *PathInfo) (float64, bool) {
	if p.CwndRoom < 0 || p.SRTT <= 0 {
		return 0, false
	}
	return float64(p.InFlight+p.CwndRoom) / p.SRTT.Seconds(), true
}

// rate returns the rate charged to p given its measured queueing delay mq.
func (e *edpf) rate(p *PathInfo, mq time.Duration) float64 {
	k := linkKey(p)
	r := e.lrate[k]
	if mq < e.cfg.ProbeQueue {
		// No queue: the path is not saturated, so its delivery rate (which only
		// measures what we sent, e.g. probes on an idle path) is a lower bound, not
		// its capacity. Charging that would starve the path for good.
		r = max(r, e.cfg.InitialRate)
		r *= e.cfg.ProbeGain
	}
	if _, ok := windowRate(p); ok {
		// The windows cap what the link's paths may carry: a coupled controller
		// that keeps a path small means the path delivers no faster than that.
		r = min(r, e.wrate[k])
	}
	return max(r, e.cfg.MinRate)
}

func (e *edpf) Pick(dst []int, paths []PathInfo, size int, flow uint32, now time.Time) []int {
	if !e.started {
		e.epoch, e.started = now, true
	}
	t := int64(now.Sub(e.epoch))
	deg := useDegraded(paths)
	for i := range paths {
		if uint(paths[i].ID) < MaxPaths {
			k := linkKey(&paths[i])
			e.lrate[k], e.wrate[k] = 0, 0
		}
	}
	for i := range paths {
		p := &paths[i]
		if !eligible(p, deg) {
			continue
		}
		k := linkKey(p)
		if r, ok := windowRate(p); ok {
			// Each path's window is its own share of a shared link: they add up.
			e.wrate[k] += r
		}
		r := p.Rate
		if r <= 0 {
			r = e.cfg.InitialRate
		}
		e.lrate[k] = max(e.lrate[k], r)
	}
	best, prev := -1, -1
	var bestArr, bestEnd, bestTx, prevArr, prevEnd int64
	for i := range paths {
		p := &paths[i]
		if !eligible(p, deg) || !hasRoom(p, size) {
			continue
		}
		mq := max(p.OWD-p.BaseOWD, 0)
		rate := e.rate(p, mq)
		tx := int64(float64(size) * 1e9 / rate)
		wait := max(e.busy[linkKey(p)]-t, int64(mq))
		wait = min(wait, int64(e.cfg.MaxBacklog))
		arr := wait + tx + int64(p.BaseOWD)
		if best < 0 || arr < bestArr {
			best, bestArr, bestEnd, bestTx = i, arr, t+wait+tx, tx
		}
		if e.lastSet && p.ID == e.last {
			prev, prevArr, prevEnd = i, arr, t+wait+tx
		}
	}
	if best < 0 {
		return dst
	}
	if prev >= 0 && prev != best && bestTx*burstMinRun <= int64(e.cfg.BurstSlack) && prevArr <= bestArr+int64(e.cfg.BurstSlack) {
		best, bestEnd = prev, prevEnd // see Config.BurstSlack
	}
	e.busy[linkKey(&paths[best])] = bestEnd
	e.last, e.lastSet = paths[best].ID, true
	return append(dst, best)
}
