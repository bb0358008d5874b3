// Package sbd is shared bottleneck detection for braid's paths, after RFC 8382
// (Hayes, Ferlin, Ros, Islam, Welzl, "Shared Bottleneck Detection for Coupled
// Congestion Control for RTP Media", 2018).
//
// braid couples the congestion controllers of a session's paths (package cc).
// Coupling is only right for paths that share a bottleneck; paths through
// different bottlenecks should each be allowed a full TCP's share. This package
// infers which paths share a congested bottleneck from summary statistics of
// their delay and loss, and hands out a group id per path: paths with the same
// group id are believed to share a bottleneck.
//
// The package is pure logic: no I/O, no goroutines, no clock. The caller passes
// the time in. A Detector is not safe for concurrent use (the tunnel calls it
// under its own lock). In steady state, OnDelay, OnPackets, Tick and Group do
// not allocate; AddFlow may (it grows per-flow buffers).
//
// # Use
//
//   - AddFlow when a path comes up (it returns a flow id; ids of removed flows
//     are re-used), RemoveFlow when it goes away.
//   - OnDelay for every delay sample of the path: a one-way delay, or, what
//     braid's sender has, an RTT sample. braid's reverse direction carries only
//     acknowledgements and is normally not congested, so the variation of the
//     RTT stands for the variation of the forward one-way delay; absolute values
//     do not matter (only each flow's own distribution is used), so OWDs with an
//     unknown clock offset are fine too. Do not mix OWD and RTT on one flow.
//   - OnPackets with the packets sent and lost on the path since the last call;
//     the counts go to the base interval that is open at the time.
//   - Tick on a timer at least once per Config.Interval (more often is fine and
//     cheap). It closes the base intervals that have ended, recomputes the
//     groups, and reports whether any flow's group id changed. When it did, the
//     caller applies Group(id) to each path's congestion controller
//     (cc's Path.SetGroup(g): paths with the same group are coupled).
//
// # Semantics
//
// Group ids are never 0 for a live flow (Group of an unknown id is 0). A flow
// that is not congested, or that has not yet collected Config.MinIntervals base
// intervals with delay samples within the last N, is alone: its group id is
// shared with no other flow. So right after AddFlow, and for a path that is idle
// or whose bottleneck is not congested, the caller couples nothing: each path
// runs its controller as its own group.
//
// Group ids are stable: while the membership of a group does not change, its id
// does not change; when groups merge or split, the new group takes the id that
// most of its members already had (if no other new group took it first).
//
// Two hysteresis mechanisms keep the grouping from flapping: a flow becomes
// congested when skew_est < c_s (or pl_est > p_l) but stays congested until
// skew_est ≥ c_h (RFC 8382), and a new partition of the flows into groups is
// adopted only after it has been computed at Config.Hold consecutive base
// intervals (a braid addition; the RFC leaves damping to the user).
//
// # Algorithm
//
// Per base interval T and flow, the detector keeps the number of delay samples,
// their sum, the number below minus the number above the reference mean
// (skewness base), the sum of absolute deviations from the reference mean
// (variability base), whether the interval's mean crossed the reference mean
// significantly, and the packets sent and lost. The reference mean is the mean
// delay over the last M closed intervals; samples of the open interval are
// compared with it as they arrive, so no sample is stored. Over the last N
// intervals:
//
//	skew_est = Σ(below − above) / Σ samples            in [−1, 1]
//	var_est  = Σ |delay − mean| / Σ samples            mean absolute deviation
//	freq_est = significant crossings / intervals        a crossing: the interval
//	           mean moves from above mean + p_v·var_est to below mean − p_v·var_est
//	           or back
//	pl_est   = Σ lost / Σ sent
//
// A flow is congested when skew_est < c_s, or skew_est < c_h and it was
// congested at the previous interval, or pl_est > p_l. Congested flows are
// sorted by freq_est and split where consecutive values differ by more than
// p_f; each part is sorted by var_est and split where var_est(n+1) − var_est(n)
// > p_mad·var_est(n+1); then by skew_est, split at differences above p_s; then,
// among flows whose pl_est > p_l, by pl_est, split where pl_est(n+1) − pl_est(n)
// > p_d·pl_est(n+1). Last, a braid addition (Config.CorrThreshold): a part
// stays together only if the per-interval mean delays of every pair of its
// flows correlate (Pearson, over the last N intervals) at 0.5 or more. The
// parts are the groups. docs/sbd.md has the measurements and the caveats.
package sbd

import (
	"math"
	"time"
)

// Config holds the detector's parameters. A zero field takes the default
// (RFC 8382 §3.1 for the RFC's parameters); a threshold cannot therefore be set
// to exactly 0 — use a tiny value instead.
type Config struct {
	// Interval is the base interval T (default 350 ms).
	Interval time.Duration
	// N is the number of base intervals the estimates cover (default 50).
	N int
	// M is the number of base intervals the reference mean delay covers
	// (default 30; at most N).
	M int
	// MinIntervals is how many intervals with delay samples a flow needs
	// within the last N before it can be grouped with another (default M).
	MinIntervals int
	// Hold is how many consecutive regroupings a new partition must be
	// computed at before it is adopted (default 3; 1 adopts at once).
	Hold int

	// SkewThreshold is c_s: a flow becomes congested when skew_est < c_s
	// (default −0.01).
	SkewThreshold float64
	// SkewHysteresis is c_h: a congested flow stays congested while
	// skew_est < c_h (default 0.3).
	SkewHysteresis float64
	// CrossingBand is p_v: an interval mean crosses the mean delay
	// significantly when it moves beyond ±p_v·var_est of it (default 0.7).
	CrossingBand float64
	// FreqThreshold is p_f, the absolute freq_est split (default 0.1).
	FreqThreshold float64
	// VarThreshold is p_mad, the relative var_est split (default 0.1).
	VarThreshold float64
	// SkewGroupThreshold is p_s, the absolute skew_est split (default 0.15).
	SkewGroupThreshold float64
	// LossGroupThreshold is p_d, the relative pl_est split (default 0.1).
	LossGroupThreshold float64
	// LossThreshold is p_l: a flow with pl_est > p_l is congested
	// (default 0.1).
	LossThreshold float64

	// CorrThreshold is a braid addition, not in RFC 8382: flows stay in one
	// group only if the Pearson correlation of their per-interval mean delays
	// over the last N intervals is at least CorrThreshold for every pair
	// (default 0.5; −1 turns the stage off, leaving the RFC's algorithm).
	CorrThreshold float64
}

// DefaultConfig returns the defaults (RFC 8382 §3.1, plus braid's MinIntervals
// and Hold).
func DefaultConfig() Config {
	return Config{
		Interval:           350 * time.Millisecond,
		N:                  50,
		M:                  30,
		MinIntervals:       30,
		Hold:               3,
		SkewThreshold:      -0.01,
		SkewHysteresis:     0.3,
		CrossingBand:       0.7,
		FreqThreshold:      0.1,
		VarThreshold:       0.1,
		SkewGroupThreshold: 0.15,
		LossGroupThreshold: 0.1,
		LossThreshold:      0.1,
		CorrThreshold:      0.5,
	}
}

func (c Config) withDefaults() Config {
	def := DefaultConfig()
	if c.Interval <= 0 {
		c.Interval = def.Interval
	}
	if c.N <= 0 {
		c.N = def.N
	}
	if c.M <= 0 {
		c.M = min(def.M, c.N)
	}
	if c.M > c.N {
		c.M = c.N
	}
	if c.MinIntervals <= 0 {
		c.MinIntervals = c.M
	}
	if c.MinIntervals > c.N {
		c.MinIntervals = c.N
	}
	if c.Hold <= 0 {
		c.Hold = def.Hold
	}
	f := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	f(&c.SkewThreshold, def.SkewThreshold)
	f(&c.SkewHysteresis, def.SkewHysteresis)
	f(&c.CrossingBand, def.CrossingBand)
	f(&c.FreqThreshold, def.FreqThreshold)
	f(&c.VarThreshold, def.VarThreshold)
	f(&c.SkewGroupThreshold, def.SkewGroupThreshold)
	f(&c.LossGroupThreshold, def.LossGroupThreshold)
	f(&c.LossThreshold, def.LossThreshold)
	f(&c.CorrThreshold, def.CorrThreshold)
	return c
}

// interval is one base interval's summary of one flow.
type interval struct {
	n      int     // delay samples
	statN  int     // samples compared with a reference mean
	skew   int     // samples below minus samples above the reference mean
	sum    float64 // sum of the delays, seconds
	absDev float64 // sum of |delay − reference mean|, seconds
	cross  bool    // the interval mean crossed the mean delay significantly
	sent   int
	lost   int
}

type flow struct {
	active bool
	ring   []interval // the last N closed intervals
	head   int        // slot the next closed interval goes to
	filled int        // closed intervals in ring, ≤ N
	cur    interval   // the open interval

	ref    float64 // reference mean delay (over the last M intervals), seconds
	hasRef bool
	side   int8 // last significant side of the mean: +1 above, −1 below, 0 none

	st  Stats
	gid uint32
}

// Stats is a flow's current summary statistics (as of the last closed base
// interval).
type Stats struct {
	Skew      float64       // skew_est
	Var       time.Duration // var_est (mean absolute deviation)
	Freq      float64       // freq_est (significant crossings per interval)
	Loss      float64       // pl_est
	Intervals int           // intervals with delay samples within the last N
	Enough    bool          // Intervals ≥ MinIntervals and var_est > 0
	Congested bool          // the congestion test (with hysteresis) holds
}

// Detector groups flows by shared bottleneck. See the package doc.
type Detector struct {
	cfg    Config
	flows  []flow
	start  bool      // the interval clock runs
	next   time.Time // end of the open base interval
	closed int       // intervals closed since the last regrouping
	nextID uint32

	// scratch, one entry per flow slot
	ord  []int
	sub  []int
	cut  []bool
	cand []int // candidate partition: label = lowest slot of the group, −1 inactive
	pend []int // pending partition waiting for Hold
	curL []int
	newG []uint32

	pendCount int
}

// New returns a detector with cfg (zero fields take defaults).
func New(cfg Config) *Detector {
	return &Detector{cfg: cfg.withDefaults()}
}

// Config returns the detector's configuration with defaults filled in.
func (d *Detector) Config() Config { return d.cfg }

func (d *Detector) freshID() uint32 {
	d.nextID++
	if d.nextID == 0 {
		d.nextID = 1
	}
	return d.nextID
}

// AddFlow adds a flow (a path) and returns its id, the lowest free slot. The
// new flow is alone until it has enough data.
func (d *Detector) AddFlow() int {
	id := -1
	for i := range d.flows {
		if !d.flows[i].active {
			id = i
			break
		}
	}
	if id < 0 {
		d.flows = append(d.flows, flow{ring: make([]interval, d.cfg.N)})
		id = len(d.flows) - 1
		n := len(d.flows)
		d.ord = make([]int, n)
		d.sub = make([]int, n)
		d.cut = make([]bool, n)
		d.cand = make([]int, n)
		d.pend = make([]int, n)
		d.curL = make([]int, n)
		d.newG = make([]uint32, n)
	}
	f := &d.flows[id]
	ring := f.ring
	clear(ring)
	*f = flow{active: true, ring: ring, gid: d.freshID()}
	d.pendCount = 0
	return id
}

// RemoveFlow forgets flow id; its slot may be returned by a later AddFlow. The
// remaining members of its group keep their group id.
func (d *Detector) RemoveFlow(id int) {
	if !d.valid(id) {
		return
	}
	d.flows[id].active = false
	d.flows[id].gid = 0
	d.pendCount = 0
}

func (d *Detector) valid(id int) bool {
	return id >= 0 && id < len(d.flows) && d.flows[id].active
}

// OnDelay records one delay sample (a one-way delay or an RTT) of flow id,
// taken at now.
func (d *Detector) OnDelay(id int, now time.Time, delay time.Duration) {
	if !d.valid(id) {
		return
	}
	d.advance(now)
	f := &d.flows[id]
	x := delay.Seconds()
	f.cur.n++
	f.cur.sum += x
	if f.hasRef {
		f.cur.statN++
		switch {
		case x < f.ref:
			f.cur.skew++
			f.cur.absDev += f.ref - x
		case x > f.ref:
			f.cur.skew--
			f.cur.absDev += x - f.ref
		}
	}
}

// OnPackets adds packets sent and lost by flow id to the open base interval.
func (d *Detector) OnPackets(id int, sent, lost int) {
	if !d.valid(id) {
		return
	}
	d.flows[id].cur.sent += sent
	d.flows[id].cur.lost += lost
}

// Tick closes the base intervals that ended by now, regroups the flows if any
// closed, and reports whether any flow's group id changed.
func (d *Detector) Tick(now time.Time) (changed bool) {
	d.advance(now)
	if d.closed == 0 {
		return false
	}
	d.closed = 0
	return d.regroup()
}

// Group returns flow id's group id; 0 if id is not a live flow.
func (d *Detector) Group(id int) uint32 {
	if !d.valid(id) {
		return 0
	}
	return d.flows[id].gid
}

// Stats returns flow id's summary statistics.
func (d *Detector) Stats(id int) Stats {
	if !d.valid(id) {
		return Stats{}
	}
	return d.flows[id].st
}

// advance runs the interval clock up to now, closing the intervals that ended.
func (d *Detector) advance(now time.Time) {
	if !d.start {
		d.start = true
		d.next = now.Add(d.cfg.Interval)
		return
	}
	for k := 0; !now.Before(d.next); k++ {
		if k > d.cfg.N {
			// Every interval in the window is empty now; jump the clock.
			skip := now.Sub(d.next)/d.cfg.Interval + 1
			d.next = d.next.Add(skip * d.cfg.Interval)
			break
		}
		d.closeInterval()
		d.next = d.next.Add(d.cfg.Interval)
	}
}

func (d *Detector) closeInterval() {
	d.closed++
	for i := range d.flows {
		if d.flows[i].active {
			d.flows[i].close(&d.cfg)
		}
	}
}

// close moves the open interval into the ring and updates the estimates.
func (f *flow) close(c *Config) {
	N := len(f.ring)
	last := f.head
	f.ring[last] = f.cur
	f.cur = interval{}
	f.head = (f.head + 1) % N
	if f.filled < N {
		f.filled++
	}
	prevRef, prevHas := f.ref, f.hasRef

	var n, statN, skew, sent, lost, crosses, data int
	var sum, absDev float64
	for k := 0; k < f.filled; k++ {
		e := &f.ring[(last-k+N)%N]
		if k < c.M {
			n += e.n
			sum += e.sum
		}
		statN += e.statN
		skew += e.skew
		absDev += e.absDev
		sent += e.sent
		lost += e.lost
		if e.cross {
			crosses++
		}
		if e.n > 0 {
			data++
		}
	}
	f.hasRef = n > 0
	if f.hasRef {
		f.ref = sum / float64(n)
	}
	st := Stats{Intervals: data, Congested: f.st.Congested}
	if statN > 0 {
		st.Skew = float64(skew) / float64(statN)
		v := absDev / float64(statN)
		st.Var = time.Duration(v * float64(time.Second))
		// Did the interval just closed cross the mean significantly?
		if e := &f.ring[last]; e.n > 0 && prevHas && v > 0 {
			m := e.sum / float64(e.n)
			band := c.CrossingBand * v
			var side int8
			switch {
			case m > prevRef+band:
				side = 1
			case m < prevRef-band:
				side = -1
			}
			if side != 0 {
				if f.side != 0 && side != f.side {
					e.cross = true
					crosses++
				}
				f.side = side
			}
		}
	}
	if data > 0 {
		st.Freq = float64(crosses) / float64(data)
	}
	if sent > 0 {
		st.Loss = float64(lost) / float64(sent)
	}
	st.Enough = data >= c.MinIntervals && statN > 0 && st.Var > 0
	f.st = st
}

func (d *Detector) key(i, which int) float64 {
	s := &d.flows[i].st
	switch which {
	case 0:
		return s.Freq
	case 1:
		return float64(s.Var)
	case 2:
		return s.Skew
	}
	return s.Loss
}

// split sorts each segment of d.ord[:n] (segments start where d.cut is set)
// by key and cuts it where consecutive values are too far apart.
func (d *Detector) split(n, which int) {
	c := &d.cfg
	for s := 0; s < n; {
		e := s + 1
		for e < n && !d.cut[e] {
			e++
		}
		// insertion sort of ord[s:e] by key
		for i := s + 1; i < e; i++ {
			x := d.ord[i]
			kx := d.key(x, which)
			j := i
			for j > s && d.key(d.ord[j-1], which) > kx {
				d.ord[j] = d.ord[j-1]
				j--
			}
			d.ord[j] = x
		}
		for i := s + 1; i < e; i++ {
			a, b := d.key(d.ord[i-1], which), d.key(d.ord[i], which)
			var far bool
			switch which {
			case 0:
				far = b-a > c.FreqThreshold
			case 1:
				far = b-a > b*c.VarThreshold
			case 2:
				far = b-a > c.SkewGroupThreshold
			case 3:
				far = a > c.LossThreshold && b > c.LossThreshold && b-a > b*c.LossGroupThreshold
			}
			if far {
				d.cut[i] = true
			}
		}
		s = e
	}
}

// regroup recomputes the partition and adopts it after Hold agreements.
func (d *Detector) regroup() bool {
	c := &d.cfg
	n := 0
	for i := range d.flows {
		f := &d.flows[i]
		d.cand[i] = -1
		if !f.active {
			continue
		}
		d.cand[i] = i
		st := &f.st
		st.Congested = st.Enough && (st.Skew < c.SkewThreshold ||
			(st.Congested && st.Skew < c.SkewHysteresis) ||
			st.Loss > c.LossThreshold)
		if st.Congested {
			d.ord[n] = i
			d.cut[n] = n == 0
			n++
		}
	}
	for which := 0; which < 4; which++ {
		d.split(n, which)
	}
	if c.CorrThreshold > -1 {
		d.splitCorr(n)
	}
	for s := 0; s < n; {
		e := s + 1
		low := d.ord[s]
		for e < n && !d.cut[e] {
			low = min(low, d.ord[e])
			e++
		}
		for k := s; k < e; k++ {
			d.cand[d.ord[k]] = low
		}
		s = e
	}

	// The adopted partition, as labels.
	for i := range d.flows {
		d.curL[i] = -1
		if !d.flows[i].active {
			continue
		}
		for j := 0; j <= i; j++ {
			if d.flows[j].active && d.flows[j].gid == d.flows[i].gid {
				d.curL[i] = j
				break
			}
		}
	}
	if equal(d.cand, d.curL, len(d.flows)) {
		d.pendCount = 0
		return false
	}
	if d.pendCount > 0 && equal(d.cand, d.pend, len(d.flows)) {
		d.pendCount++
	} else {
		copy(d.pend, d.cand)
		d.pendCount = 1
	}
	if d.pendCount < c.Hold {
		return false
	}
	d.pendCount = 0
	return d.adopt()
}

// corr is the Pearson correlation of flows a and b's interval mean delays over
// the intervals of the last N in which both had samples; 0 when undefined or
// when they have fewer than MinIntervals such intervals in common.
func (d *Detector) corr(a, b int) float64 {
	fa, fb := &d.flows[a], &d.flows[b]
	N := d.cfg.N
	var n, sx, sy, sxx, syy, sxy float64
	for k := 0; k < min(fa.filled, fb.filled); k++ {
		ea := &fa.ring[(fa.head-1-k+2*N)%N]
		eb := &fb.ring[(fb.head-1-k+2*N)%N]
		if ea.n == 0 || eb.n == 0 {
			continue
		}
		x, y := ea.sum/float64(ea.n), eb.sum/float64(eb.n)
		n++
		sx += x
		sy += y
		sxx += x * x
		syy += y * y
		sxy += x * y
	}
	if n < float64(d.cfg.MinIntervals) {
		return 0
	}
	vx, vy := sxx-sx*sx/n, syy-sy*sy/n
	if vx <= 0 || vy <= 0 {
		return 0
	}
	return (sxy - sx*sy/n) / math.Sqrt(vx*vy)
}

// splitCorr splits each segment of d.ord[:n] into subgroups whose members
// all correlate pairwise at CorrThreshold or more (complete linkage, first
// fit in the segment's order).
func (d *Detector) splitCorr(n int) {
	for s := 0; s < n; {
		e := s + 1
		for e < n && !d.cut[e] {
			e++
		}
		for i := s; i < e; i++ {
			d.sub[i] = i
			for l := s; l < i; l++ {
				if d.sub[l] != l {
					continue // not a subgroup's first member
				}
				fits := true
				for m := l; m < i && fits; m++ {
					if d.sub[m] == l {
						fits = d.corr(d.ord[i], d.ord[m]) >= d.cfg.CorrThreshold
					}
				}
				if fits {
					d.sub[i] = l
					break
				}
			}
		}
		// Make the subgroups contiguous (stable) and cut between them.
		for i := s + 1; i < e; i++ {
			x, sx := d.ord[i], d.sub[i]
			j := i
			for j > s && d.sub[j-1] > sx {
				d.ord[j], d.sub[j] = d.ord[j-1], d.sub[j-1]
				j--
			}
			d.ord[j], d.sub[j] = x, sx
		}
		for i := s + 1; i < e; i++ {
			if d.sub[i] != d.sub[i-1] {
				d.cut[i] = true
			}
		}
		s = e
	}
}

func equal(a, b []int, n int) bool {
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// adopt gives the groups of d.cand their ids: a group keeps the id most of
// its members had, unless an earlier group took it (groups of several flows
// choose first); otherwise it gets a fresh one.
func (d *Detector) adopt() bool {
	nf := len(d.flows)
	clear(d.newG[:nf])
	for pass := 0; pass < 2; pass++ {
		for r := 0; r < nf; r++ {
			if d.cand[r] != r {
				continue
			}
			size := 0
			for j := r; j < nf; j++ {
				if d.cand[j] == r {
					size++
				}
			}
			if (pass == 0) != (size > 1) {
				continue
			}
			var best uint32
			bestCnt := 0
			for j := r; j < nf; j++ {
				if d.cand[j] != r {
					continue
				}
				g := d.flows[j].gid
				if d.taken(g) {
					continue
				}
				cnt := 0
				for k := r; k < nf; k++ {
					if d.cand[k] == r && d.flows[k].gid == g {
						cnt++
					}
				}
				if cnt > bestCnt || (cnt == bestCnt && g < best) {
					best, bestCnt = g, cnt
				}
			}
			if best == 0 {
				best = d.freshID()
			}
			for j := r; j < nf; j++ {
				if d.cand[j] == r {
					d.newG[j] = best
				}
			}
		}
	}
	changed := false
	for i := 0; i < nf; i++ {
		if d.flows[i].active && d.flows[i].gid != d.newG[i] {
			d.flows[i].gid = d.newG[i]
			changed = true
		}
	}
	return changed
}

func (d *Detector) taken(g uint32) bool {
	for i := range d.newG {
		if d.newG[i] == g {
			return true
		}
	}
	return false
}
