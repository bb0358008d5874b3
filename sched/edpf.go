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
// most one ProbeQueue of extra delay.
//
// Congestion window. When a controller exists and has less than size bytes of room,
// the packet cannot leave before (size-room)/rate, which is added to the wait.
//
// Degraded paths: only when no healthy usable path exists. Ties go to the first path
// in the slice.
type edpf struct {
	cfg     Config
	epoch   time.Time
	started bool
	// busy is, per path ID, the time (ns since epoch) at which the last packet we
	// scheduled on that path finishes serialising at the bottleneck.
	busy [MaxPaths]int64
}

func newEDPF(cfg Config) *edpf { return &edpf{cfg: cfg} }

func (*edpf) Name() string { return EarliestArrival }

// rate returns the rate charged to p given its measured queueing delay mq.
func (e *edpf) rate(p *PathInfo, mq time.Duration) float64 {
	r := p.Rate
	if r <= 0 {
		r = e.cfg.InitialRate
	}
	if mq < e.cfg.ProbeQueue {
		r *= e.cfg.ProbeGain
	}
	return max(r, e.cfg.MinRate)
}

func (e *edpf) Pick(dst []int, paths []PathInfo, size int, flow uint32, now time.Time) []int {
	if !e.started {
		e.epoch, e.started = now, true
	}
	t := int64(now.Sub(e.epoch))
	deg := useDegraded(paths)
	best := -1
	var bestArr, bestEnd int64
	for i := range paths {
		p := &paths[i]
		if !eligible(p, deg) {
			continue
		}
		mq := max(p.OWD-p.BaseOWD, 0)
		rate := e.rate(p, mq)
		tx := int64(float64(size) * 1e9 / rate)
		wait := max(e.busy[p.ID]-t, int64(mq))
		if p.CwndRoom >= 0 && p.CwndRoom < size {
			wait = max(wait, int64(float64(size-p.CwndRoom)*1e9/rate))
		}
		wait = min(wait, int64(e.cfg.MaxBacklog))
		arr := wait + tx + int64(p.BaseOWD)
		if best < 0 || arr < bestArr {
			best, bestArr, bestEnd = i, arr, t+wait+tx
		}
	}
	if best < 0 {
		return dst
	}
	e.busy[paths[best].ID] = bestEnd
	return append(dst, best)
}
