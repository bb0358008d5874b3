package cc

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Algorithm names accepted by New.
const (
	None    = "none"
	Reno    = "reno"
	Cubic   = "cubic"
	LIA     = "lia"
	OLIA    = "olia"
	BALIA   = "balia"
	WVegas  = "wvegas"
	Coupled = "coupled"
	EWTCP   = "ewtcp"
	// Rate is the loss-tolerant, BBR-like rate model with pacing (rate.go).
	Rate = "rate"
)

var names = []string{None, Reno, Cubic, LIA, OLIA, BALIA, WVegas, Coupled, EWTCP, Rate}

// Names returns the valid algorithm names (a fresh slice the caller may keep).
func Names() []string { return append([]string(nil), names...) }

// IsCoupled reports whether name couples the paths of a session (the windows,
// or for "rate" the in-flight caps' fixed allowance).
func IsCoupled(name string) bool {
	switch name {
	case LIA, OLIA, BALIA, WVegas, Coupled, EWTCP, Rate:
		return true
	}
	return false
}

type algorithm uint8

const (
	algNone algorithm = iota
	algReno
	algCubic
	algLIA
	algOLIA
	algBALIA
	algWVegas
	algCoupled
	algEWTCP
	algRate
)

// Config holds the tunables. Zero fields take the value of DefaultConfig.
type Config struct {
	// MSS is the segment size in bytes that windows are counted in (default
	// 1400). The tunnel sets it to its largest datagram, so that a window of one
	// segment always admits one packet.
	MSS int
	// InitialWindow in segments (default 10, RFC 6928).
	InitialWindow float64
	// MinWindow is the floor of the window after a congestion event, in segments
	// (default 2, RFC 5681's and RFC 9002's minimum). Only an RTO goes below it
	// (to 1), and fully coupled, whose decrease is floored at 1 as in htsim.
	MinWindow float64
	// MaxWindow caps the window in segments (default 8192, the tunnel's per-path
	// sent-packet ring: a larger window could not be tracked anyway).
	MaxWindow float64
	// MaxBurst (default 3 segments, as mp-quic and quic-go): a path whose free
	// window is at most this is cwnd-limited.
	MaxBurst float64

	// CubicC and CubicBeta are CUBIC's constants (defaults 0.4 and 0.7, RFC 9438).
	CubicC, CubicBeta float64

	// VegasAlpha is wVegas's initial per-path queue target and its floor in
	// segments (default 2), VegasTotalAlpha the session's total (default 10),
	// VegasGamma the slow-start exit threshold (default 1), all as mptcp_wvegas.c.
	VegasAlpha, VegasTotalAlpha, VegasGamma float64

	// EWTCPWeight is EWTCP's a (the increase is a/w_r); 0 means 1/N² for N active
	// paths, which makes N paths through one bottleneck as aggressive as one TCP.
	EWTCPWeight float64

	// CapGain is the "rate" model's in-flight cap in ProbeBW, in bandwidth-delay
	// products: cap = CapGain·BDP + 2 segments, at least 4 segments (default
	// 1.25; values below 1 are raised to 1), raised to the pacing gain while
	// ProbeBW probes (1.25). BBR's 2 keeps up to a whole min RTT of standing
	// queue. The tunnel uses 1 (see tunnel.Tunables.CC).
	CapGain float64
	// LossThreshold is the fraction of a loss window's packets (at least 100
	// packets, closed at a round's end) whose loss makes the "rate" model lower
	// its bandwidth bound (default 0.05; random loss of 1–2 % stays well below it
	// at that window size). Values of 1 or more are replaced by the default.
	LossThreshold float64
	// PacingBurst is the depth of the "rate" model's pacing token bucket in time
	// at the pacing rate, at least two segments (default 5 ms, the engine's timer
	// tick, so that a path paced between ticks never loses capacity).
	PacingBurst time.Duration
	// AckAllowance is added to the min RTT when the "rate" model sizes its
	// in-flight cap: the receiver's delayed acks and the sender's timer tick
	// hold acknowledgements back by up to this much, and a cap of one bare BDP
	// would then throttle a short path (default 0; the tunnel sets its ack
	// delay).
	AckAllowance time.Duration
	// RateInterval is the shortest interval a delivery-rate sample spans
	// (the tunnel sets its path.Config.MinRateInterval; default 0). A slot
	// of the "rate" model's bandwidth filter lasts a round trip but at least
	// this long, so that on paths of a shorter round trip the filter still
	// spans ten samples rather than emptying between two.
	RateInterval time.Duration
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		MSS:             1400,
		InitialWindow:   10,
		MinWindow:       2,
		MaxWindow:       8192,
		MaxBurst:        3,
		CubicC:          0.4,
		CubicBeta:       0.7,
		VegasAlpha:      2,
		VegasTotalAlpha: 10,
		VegasGamma:      1,
		CapGain:         1.25,
		LossThreshold:   0.05,
		PacingBurst:     5 * time.Millisecond,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MSS <= 0 {
		c.MSS = d.MSS
	}
	setF := func(v *float64, def float64) {
		if !(*v > 0) {
			*v = def
		}
	}
	setF(&c.InitialWindow, d.InitialWindow)
	setF(&c.MinWindow, d.MinWindow)
	setF(&c.MaxWindow, d.MaxWindow)
	setF(&c.MaxBurst, d.MaxBurst)
	setF(&c.CubicC, d.CubicC)
	setF(&c.CubicBeta, d.CubicBeta)
	setF(&c.VegasAlpha, d.VegasAlpha)
	setF(&c.VegasTotalAlpha, d.VegasTotalAlpha)
	setF(&c.VegasGamma, d.VegasGamma)
	if c.CubicBeta >= 1 {
		c.CubicBeta = d.CubicBeta
	}
	if c.MaxWindow < c.MinWindow {
		c.MaxWindow = c.MinWindow
	}
	c.InitialWindow = min(max(c.InitialWindow, c.MinWindow), c.MaxWindow)
	if c.EWTCPWeight < 0 {
		c.EWTCPWeight = 0
	}
	setF(&c.CapGain, d.CapGain)
	c.CapGain = max(c.CapGain, 1)
	if !(c.LossThreshold > 0 && c.LossThreshold < 1) {
		c.LossThreshold = d.LossThreshold
	}
	if c.PacingBurst <= 0 {
		c.PacingBurst = d.PacingBurst
	}
	return c
}

// Controller is the congestion control of one session: the algorithm, its
// tunables and the paths it couples.
type Controller struct {
	alg  algorithm
	name string
	cfg  Config
	mss  float64
	// paths by id (nil = none); groups the sets of paths that share a
	// bottleneck (SetGroup), each with its active paths: the coupling sets.
	paths  []*Path
	groups []*group
}

// group is a set of a Controller's paths that share a bottleneck (SetGroup).
// Every coupled sum runs over the active paths of one group only: paths through
// disjoint bottlenecks compete each as one flow at its own.
type group struct {
	id     uint32
	active []*Path // usable paths of the group with an RTT sample
}

// group returns the group id, creating it (AddPath and SetGroup only: the
// per-packet path never allocates).
func (c *Controller) group(id uint32) *group {
	for _, g := range c.groups {
		if g.id == id {
			return g
		}
	}
	// A new group: first forget those no path belongs to any more, since a
	// detector hands out fresh ids as paths come and go.
	c.groups = slices.DeleteFunc(c.groups, func(g *group) bool {
		return g.id != 0 && !slices.ContainsFunc(c.paths, func(q *Path) bool { return q != nil && q.grp == g })
	})
	g := &group{id: id}
	c.groups = append(c.groups, g)
	return g
}

// New returns a controller running the algorithm called name. An unknown name is
// an error that lists the valid ones.
func New(name string, cfg Config) (*Controller, error) {
	var a algorithm
	switch name {
	case None:
		a = algNone
	case Reno:
		a = algReno
	case Cubic:
		a = algCubic
	case LIA:
		a = algLIA
	case OLIA:
		a = algOLIA
	case BALIA:
		a = algBALIA
	case WVegas:
		a = algWVegas
	case Coupled:
		a = algCoupled
	case EWTCP:
		a = algEWTCP
	case Rate:
		a = algRate
	default:
		return nil, fmt.Errorf("cc: unknown congestion controller %q (valid: %s)", name, strings.Join(names, ", "))
	}
	cfg = cfg.withDefaults()
	return &Controller{alg: a, name: name, cfg: cfg, mss: float64(cfg.MSS)}, nil
}

// Name returns the algorithm's name.
func (c *Controller) Name() string { return c.name }

// Enabled reports whether the controller limits anything ("none" does not).
func (c *Controller) Enabled() bool { return c.alg != algNone }

// Config returns the effective tunables (defaults applied).
func (c *Controller) Config() Config { return c.cfg }

// AddPath returns the state of path id (a small non-negative int), creating it
// in slow start with the initial window. A path starts usable; it joins the
// coupling set with its first RTT sample. Adding an id that exists returns the
// existing path.
func (c *Controller) AddPath(id int, now time.Time) *Path {
	if id < 0 {
		panic("cc: negative path id")
	}
	for len(c.paths) <= id {
		c.paths = append(c.paths, nil)
	}
	if p := c.paths[id]; p != nil {
		return p
	}
	p := &Path{c: c, id: id, usable: true, grp: c.group(0)}
	p.reset(now)
	c.paths[id] = p
	return p
}

// Path returns path id, or nil.
func (c *Controller) Path(id int) *Path {
	if id < 0 || id >= len(c.paths) {
		return nil
	}
	return c.paths[id]
}

// RemovePath forgets a path; its id may be added again later as a new path.
func (c *Controller) RemovePath(p *Path) {
	if p == nil || p.c != c || p.id >= len(c.paths) || c.paths[p.id] != p {
		return
	}
	p.setActive(false)
	c.paths[p.id] = nil
	p.removed = true
}

// ActivePaths returns how many paths are in the coupling sets (of all groups).
func (c *Controller) ActivePaths() int {
	n := 0
	for _, g := range c.groups {
		n += len(g.active)
	}
	return n
}

// Ack is what one acknowledgement newly acknowledged on a path.
type Ack struct {
	Now time.Time
	// Bytes newly acknowledged that counted toward the bytes in flight.
	Bytes int
	// PriorInFlight is the bytes in flight just before this ack (the acked
	// ones included): the cwnd-limited test.
	PriorInFlight int
	// RTT is the RTT sample this ack produced, 0 for none.
	RTT time.Duration
	// FullSize says RTT is a full-size datagram's (path.Sender.FullSize): the
	// "rate" model sizes its cap on the smallest of those, the pipe a data
	// packet sees, not on a probe's.
	FullSize bool
	// SRTT is the path's smoothed RTT after this ack; 0 = unknown (RTT is used).
	SRTT time.Duration
	// LargestSent is when the largest newly acknowledged packet was sent; zero
	// = unknown (Now-RTT is assumed). It ends a recovery period and a wVegas round.
	LargestSent time.Time

	// The "rate" model's inputs; the other algorithms ignore them.
	//
	// DeliveryRate is the path's latest delivery-rate sample in bytes/s (the
	// tunnel's path.Sender measures it over intervals of at least one SRTT); 0 =
	// no new sample with this ack.
	DeliveryRate float64
	// AppLimited says that sample was app-limited (the pipe ran dry during its
	// interval): it only counts when it exceeds the estimate.
	AppLimited bool
	// MinRTT is the path's windowed minimum RTT; 0 = unknown (the path's own
	// smallest RTT sample is used).
	MinRTT time.Duration
}

// Loss is what a loss detector declared lost on a path at once.
type Loss struct {
	Now   time.Time
	Bytes int
	// LargestSent is when the newest lost packet was sent; zero = unknown
	// (Now-SRTT is assumed). Losses of packets sent before the current
	// recovery period began do not reduce the window again.
	LargestSent time.Time
}

// Path is the congestion state of one path.
type Path struct {
	c       *Controller
	id      int
	grp     *group // the paths it is coupled with (SetGroup; group 0 by default)
	usable  bool
	active  bool
	removed bool

	cwnd, ssthresh float64 // segments; ssthresh +Inf until the first congestion event
	srtt, minRTT   float64 // seconds; 0 = no sample yet
	fullMinRTT     float64 // the smallest full-size sample (Ack.FullSize), seconds; 0 = none

	inRecovery    bool
	recoveryStart time.Time // zero: no congestion event yet
	limitedAt     time.Time // last OnSent that found the path window-limited
	limitedSet    bool

	// OLIA: bytes acknowledged between the last two losses and since the last.
	l1, l2 float64

	cub cubicState
	veg vegasState
	rs  rateState

	congestionEvents, rtos uint64
}

func (p *Path) reset(now time.Time) {
	cfg := &p.c.cfg
	p.cwnd = cfg.InitialWindow
	p.ssthresh = math.Inf(1)
	p.srtt, p.minRTT, p.fullMinRTT = 0, 0, 0
	p.inRecovery = false
	p.recoveryStart = time.Time{}
	p.limitedSet = false
	p.l1, p.l2 = 0, 0
	p.cub = cubicState{}
	p.veg.reset(cfg)
	p.veg.baseRTT = math.Inf(1)
	p.setActive(false)
	if p.c.alg == algRate {
		p.rateReset(now)
	}
}

// Reset puts the path back to its initial state (initial window, slow start,
// no RTT): for a path that came back from an outage and may be a different
// route now.
func (p *Path) Reset(now time.Time) {
	if p == nil {
		return
	}
	p.reset(now)
}

// ID returns the path's id.
func (p *Path) ID() int { return p.id }

// SetUsable says whether the path may carry data now (the tunnel: Active or
// Degraded, not Down). Only usable paths with an RTT sample are coupled.
func (p *Path) SetUsable(u bool) {
	if p == nil || p.usable == u {
		return
	}
	p.usable = u
	p.setActive(u && p.srtt > 0 && !p.removed)
}

// SetGroup says which bottleneck the path shares with the Controller's other
// paths: paths of one group are coupled (each coupled algorithm's sums, and
// the "rate" model's cap share and contention window, run over the group's
// active paths only), paths of different groups are not. Every path starts in
// group 0, so by default all of a session's paths are coupled. A shared-
// bottleneck detector (RFC 8382) calls it; it does not allocate unless g is a
// group the Controller has not seen.
func (p *Path) SetGroup(g uint32) {
	if p == nil || p.removed || p.grp.id == g {
		return
	}
	a := p.active
	p.setActive(false)
	p.grp = p.c.group(g)
	p.setActive(a)
}

// Group returns the path's group (SetGroup).
func (p *Path) Group() uint32 { return p.grp.id }

// peers returns the active paths p is coupled with (its group's; p among them
// when it is active).
func (p *Path) peers() []*Path { return p.grp.active }

// alone reports whether p is coupled with no other path: outside the active
// set, or alone in its group's. Every coupled algorithm is then Reno (the
// "rate" model: uncoupled).
func (p *Path) alone() bool { return !p.active || len(p.grp.active) <= 1 }

func (p *Path) setActive(a bool) {
	if p.active == a {
		return
	}
	p.active = a
	g := p.grp
	if a {
		g.active = append(g.active, p)
		return
	}
	for i, q := range g.active {
		if q == p {
			copy(g.active[i:], g.active[i+1:])
			g.active[len(g.active)-1] = nil
			g.active = g.active[:len(g.active)-1]
			break
		}
	}
}

// Window returns the congestion window in bytes.
func (p *Path) Window() int {
	if p == nil || p.c.alg == algNone {
		return math.MaxInt32
	}
	return int(p.cwnd * p.c.mss)
}

// Ssthresh returns the slow-start threshold in bytes, -1 while it is infinite
// (before the first congestion event).
func (p *Path) Ssthresh() int {
	if p == nil || p.c.alg == algNone || math.IsInf(p.ssthresh, 1) {
		return -1
	}
	return int(p.ssthresh * p.c.mss)
}

// Room returns the bytes the window still admits with inflight bytes in flight
// (negative when over the window). An empty pipe always admits a full segment,
// so a window below one segment (never the case with the default floors) cannot
// stall the path.
func (p *Path) Room(inflight int) int {
	if p == nil || p.c.alg == algNone {
		return math.MaxInt32
	}
	r := p.Window() - inflight
	if inflight <= 0 && r < p.c.cfg.MSS {
		r = p.c.cfg.MSS
	}
	return r
}

// CanSend reports whether a datagram of size bytes may be sent now.
func (p *Path) CanSend(inflight, size int) bool { return p.Room(inflight) >= size }

// Stats is a snapshot of a path's congestion state.
type Stats struct {
	Cwnd       float64 // segments
	Ssthresh   float64 // segments; +Inf before the first congestion event
	InRecovery bool
	SlowStart  bool
	Active     bool // in the coupling set
	// CongestionEvents counts window reductions by loss ("rate": reductions of
	// the loss bound), RTOs the OnRTO calls.
	CongestionEvents, RTOs uint64

	// The "rate" model (zero for the other algorithms): pacing rate, the
	// bandwidth estimate (max filter) and the loss bound on it (0 = none), all in
	// bytes/s, the min RTT it uses, its state ("startup", "drain", "probe_bw")
	// and ProbeBW's gain-cycle phase (0 = the 1.25 probe, 1 = the 0.75 drain).
	PacingRate, BW, BWBound float64
	MinRTT                  time.Duration
	Mode                    string
	Phase                   int
}

// Stats returns a snapshot.
func (p *Path) Stats() Stats {
	st := Stats{
		Cwnd:             p.cwnd,
		Ssthresh:         p.ssthresh,
		InRecovery:       p.inRecovery,
		SlowStart:        p.cwnd < p.ssthresh,
		Active:           p.active,
		CongestionEvents: p.congestionEvents,
		RTOs:             p.rtos,
	}
	if p.c.alg == algRate {
		st.SlowStart = p.rs.mode == rateStartup
		st.CongestionEvents = p.rs.lossEvents
		st.PacingRate = p.ratePacingRate()
		st.BW = p.rs.bw
		st.BWBound = p.rs.bound
		st.MinRTT = time.Duration(p.rateMinRTT() * float64(time.Second))
		st.Mode = p.rs.modeName()
		st.Phase = p.rs.phase
	}
	return st
}

// OnSent records an ack-eliciting datagram; inflight is the bytes in flight
// after it. It notes whether the window is what limits the path.
func (p *Path) OnSent(bytes, inflight int, now time.Time) {
	if p == nil || p.c.alg == algNone {
		return
	}
	if p.c.alg == algRate {
		p.rateSent(bytes, inflight, now)
		return
	}
	if p.limitedBy(inflight) {
		p.limitedAt, p.limitedSet = now, true
	}
}

// limitedBy is the cwnd-limited test on a number of bytes in flight.
func (p *Path) limitedBy(inflight int) bool {
	cw := p.cwnd * p.c.mss
	f := float64(inflight)
	if f >= cw || cw-f <= p.c.cfg.MaxBurst*p.c.mss {
		return true
	}
	return p.cwnd < p.ssthresh && f > cw/2
}

func (p *Path) cwndLimited(a *Ack) bool {
	if p.limitedBy(a.PriorInFlight) {
		return true
	}
	if !p.limitedSet {
		return false
	}
	rtt := p.srtt
	if rtt <= 0 {
		rtt = 0.1
	}
	return a.Now.Sub(p.limitedAt).Seconds() <= rtt
}

func (p *Path) updateRTT(a *Ack) {
	s := a.SRTT
	if s <= 0 {
		s = a.RTT
	}
	if s > 0 {
		p.srtt = s.Seconds()
	}
	if a.RTT > 0 {
		r := a.RTT.Seconds()
		if p.minRTT == 0 || r < p.minRTT {
			p.minRTT = r
		}
		if a.FullSize && (p.fullMinRTT == 0 || r < p.fullMinRTT) {
			p.fullMinRTT = r
		}
	}
	if p.srtt > 0 && p.usable && !p.active && !p.removed {
		p.setActive(true)
	}
}

// OnAck processes an acknowledgement.
func (p *Path) OnAck(a Ack) {
	if p == nil || p.c.alg == algNone {
		return
	}
	p.updateRTT(&a)
	if p.c.alg == algRate {
		p.rateAck(&a)
		return
	}
	if a.Bytes <= 0 {
		return
	}
	sent := a.LargestSent
	if sent.IsZero() {
		sent = a.Now.Add(-a.RTT)
	}
	if p.inRecovery && sent.After(p.recoveryStart) {
		p.inRecovery = false
		if p.c.alg == algWVegas {
			p.veg.restart(&p.c.cfg, a.Now)
		}
	}
	if p.c.alg == algOLIA {
		p.l2 += float64(a.Bytes)
	}
	if p.inRecovery {
		// RFC 9002 §7.3.2: no growth until a packet sent after the congestion
		// event is acknowledged.
		if p.c.alg == algCubic {
			p.cub.lastAck = a.Now
		}
		return
	}
	limited := p.cwndLimited(&a)
	n := float64(a.Bytes) / p.c.mss
	switch p.c.alg {
	case algWVegas:
		p.vegasAck(&a, sent, n, limited)
		p.clamp()
		return
	case algCubic:
		if !limited {
			p.cubicAppLimited(a.Now)
			return
		}
	}
	if !limited {
		return
	}
	n = p.slowStart(n)
	if n > 0 {
		p.avoid(n, a.Now)
	}
	if p.c.alg == algCubic {
		p.cub.lastAck = a.Now
	}
	p.clamp()
}

// slowStart grows the window by the acknowledged segments up to ssthresh and
// returns the segments left for congestion avoidance.
func (p *Path) slowStart(n float64) float64 {
	if p.cwnd >= p.ssthresh {
		return n
	}
	inc := min(n, p.ssthresh-p.cwnd)
	p.cwnd += inc
	return n - inc
}

// avoid is the congestion-avoidance increase for n acknowledged segments.
func (p *Path) avoid(n float64, now time.Time) {
	switch p.c.alg {
	case algReno:
		p.cwnd += n / p.cwnd
	case algCubic:
		p.cubicAvoid(n, now)
	default:
		p.cwnd += n * p.c.coupledIncrease(p)
	}
}

func (p *Path) clamp() {
	cfg := &p.c.cfg
	if p.cwnd > cfg.MaxWindow {
		p.cwnd = cfg.MaxWindow
	}
	if floor := p.floor(); p.cwnd < floor {
		p.cwnd = floor
	}
}

// floor is the least window outside an RTO.
func (p *Path) floor() float64 {
	if p.c.alg == algCoupled {
		return 1
	}
	return p.c.cfg.MinWindow
}

// OnLoss processes packets declared lost. The first loss of a packet sent after
// the last congestion event is a new congestion event.
func (p *Path) OnLoss(l Loss) {
	if p == nil || p.c.alg == algNone || l.Bytes <= 0 {
		return
	}
	if p.c.alg == algRate {
		p.rateLoss(&l)
		return
	}
	if !p.recoveryStart.IsZero() && !p.lossSent(&l).After(p.recoveryStart) {
		return
	}
	p.congestionEvents++
	p.ssthresh = p.c.decrease(p)
	p.cwnd = p.ssthresh
	p.inRecovery = true
	p.recoveryStart = l.Now
	p.afterCongestion()
}

// lossSent is when the newest packet of l was sent (Now − SRTT when unknown):
// a loss of a packet sent before the last reduction does not reduce again.
func (p *Path) lossSent(l *Loss) time.Time {
	if l.LargestSent.IsZero() {
		return l.Now.Add(-time.Duration(p.srtt * float64(time.Second)))
	}
	return l.LargestSent
}

// afterCongestion updates the per-algorithm state a congestion event or an RTO
// changes.
func (p *Path) afterCongestion() {
	switch p.c.alg {
	case algOLIA:
		// Shift the loss interval, unless nothing was acknowledged since the last.
		if p.l2 > 0 {
			p.l1, p.l2 = p.l2, 0
		}
	case algWVegas:
		p.veg.instantRate = 0
	case algCubic:
		p.cub.epochValid = false
	}
}

// OnRTO handles a retransmission timeout (the path stopped answering): the
// algorithm's ssthresh, a window of one segment, slow start.
func (p *Path) OnRTO(now time.Time) {
	if p == nil || p.c.alg == algNone {
		return
	}
	p.rtos++
	if p.c.alg == algRate {
		p.rateRTO(now)
		return
	}
	p.ssthresh = p.c.decrease(p)
	p.cwnd = 1
	p.inRecovery = false
	p.recoveryStart = now
	p.limitedSet = false
	p.afterCongestion()
	if p.c.alg == algCubic {
		// RFC 9438 §4.8: the first congestion avoidance after an RTO starts a
		// fresh curve (K = 0, W_max = the window then).
		p.cub.wMax = 0
	}
}

// decrease returns the new ssthresh for a congestion event on p.
func (c *Controller) decrease(p *Path) float64 {
	w := p.cwnd
	var s float64
	switch c.alg {
	case algCubic:
		s = p.cubicDecrease()
	case algBALIA:
		s = w - w/2*min(c.baliaAlpha(p), 1.5)
	case algCoupled:
		total := w
		if p.active {
			total = c.totalWindow(p)
		}
		return max(w-total/2, 1)
	default:
		s = w / 2
	}
	return max(s, c.cfg.MinWindow)
}
