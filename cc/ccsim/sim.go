// Package ccsim is a deterministic virtual-time network simulator for testing
// congestion controllers (package cc): bulk-transfer flows whose subflows cross
// chains of drop-tail links, with per-subflow packet numbers, per-packet acks,
// RFC 9002 loss detection (packet and time thresholds) and an RTO.
//
// It is test support, not a model of braid's tunnel: no data is carried, only
// packet sizes, and an ack acknowledges exactly the packet it answers (as braid's
// per-path acks do). Everything runs in one goroutine in virtual time, so a run of
// 100 simulated seconds at 10 Mbit/s takes tens of milliseconds and the same
// seed always gives the same result.
//
// # Model
//
// A Link is a FIFO serializer (Rate bits/s) with a byte-limited drop-tail buffer
// (a packet is dropped when the bytes not yet serialized, the rest of the packet
// in service included, plus its own would exceed Buffer), a propagation delay,
// and optional random loss after serialization (a frame error rate). A subflow's
// route is a list of links; its acks return over an uncongested path whose delay
// is the sum of the route's propagation delays (plus up to AckJitter, so that
// flows do not phase-lock as they do in perfectly deterministic drop-tail sims).
// Several routes may share a link: that is a shared bottleneck.
//
// For the "rate" controller each ack also carries what braid's path.Sender
// measures: a delivery-rate sample (bytes received over intervals of at least
// max(srtt, 10 ms), timed by arrival at the receiver; app-limited when the
// interval began with an empty pipe) and a windowed (10 s) min RTT. A paced
// subflow that must wait sets a timer, rounded up to Config.PaceTick.
//
// A Flow always has data to send. Each of its subflows sends whenever its window
// admits a packet (every subflow pulls from the flow's infinite backlog, like
// MPTCP with bulk data), so throughput is what the congestion controller and the
// network allow.
package ccsim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/braid-vpn/braid/cc"
)

// Epoch is virtual time zero.
var Epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// Config tunes a Sim. Zero fields take DefaultConfig's values.
type Config struct {
	Seed uint64
	// PacketSize is the size of every data packet in bytes (default 1400, cc's MSS).
	PacketSize int
	// AckJitter (default 100µs) is the largest random extra delay of an ack: less
	// than a packet's serialization time at 100 Mbit/s, so it never reorders acks
	// of one subflow, yet enough to break phase effects.
	AckJitter time.Duration
	// SampleEvery (default 100ms) is the period of the samples Flow and Link keep.
	SampleEvery time.Duration
	// MinRTO (default 200ms, Linux's) floors the retransmission timeout.
	MinRTO time.Duration
	// ReorderThreshold (default 3) and TimeThreshold (default 9/8) are RFC 9002's
	// loss-detection thresholds, as in braid's path.Sender.
	ReorderThreshold int
	TimeThreshold    float64
	// PaceTick (default 0: exact timers) is the granularity of a paced
	// subflow's send timer: a send the pacer defers waits for the next multiple
	// of it (or for an ack), as braid's engine waits for its 5 ms timer tick.
	PaceTick time.Duration
	// MinRTTWindow (default 10s, braid's path.Config) is the window of the min
	// RTT handed to the controller (cc.Ack.MinRTT).
	MinRTTWindow time.Duration
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{Seed: 1, PacketSize: 1400, AckJitter: 2 * time.Millisecond, SampleEvery: 100 * time.Millisecond,
		MinRTO: 200 * time.Millisecond, ReorderThreshold: 3, TimeThreshold: 9.0 / 8, MinRTTWindow: 10 * time.Second}
}

// Sim is one simulated network.
type Sim struct {
	cfg   Config
	now   int64 // ns since Epoch
	ev    eventHeap
	seq   uint64
	rng   *rand.Rand
	links []*Link
	flows []*Flow
	// Samples are taken at these times (ns), for Flow and Link series.
	sampleTimes []int64
}

// New returns an empty simulation.
func New(cfg Config) *Sim {
	d := DefaultConfig()
	if cfg.PacketSize <= 0 {
		cfg.PacketSize = d.PacketSize
	}
	if cfg.AckJitter < 0 {
		cfg.AckJitter = 0
	} else if cfg.AckJitter == 0 {
		cfg.AckJitter = d.AckJitter
	}
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = d.SampleEvery
	}
	if cfg.MinRTO <= 0 {
		cfg.MinRTO = d.MinRTO
	}
	if cfg.ReorderThreshold <= 0 {
		cfg.ReorderThreshold = d.ReorderThreshold
	}
	if cfg.TimeThreshold <= 0 {
		cfg.TimeThreshold = d.TimeThreshold
	}
	if cfg.MinRTTWindow <= 0 {
		cfg.MinRTTWindow = d.MinRTTWindow
	}
	if cfg.PaceTick < 0 {
		cfg.PaceTick = 0
	}
	s := &Sim{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	s.schedule(event{at: 0, kind: evSample})
	return s
}

// Now returns the virtual time.
func (s *Sim) Now() time.Time { return Epoch.Add(time.Duration(s.now)) }

// Rand returns the simulation's random source (for random start times and the like).
func (s *Sim) Rand() *rand.Rand { return s.rng }

// LinkConfig describes a link.
type LinkConfig struct {
	Name   string
	Rate   float64       // bits/s
	Delay  time.Duration // one-way propagation
	Buffer int           // bytes that may wait for the serializer (at least one packet)
	Loss   float64       // probability that a packet is lost after serialization
}

// Link is a drop-tail FIFO link.
type Link struct {
	LinkConfig
	s    *Sim
	busy int64 // when the serializer finishes what it accepted

	// Counters.
	Packets    uint64 // offered
	QueueDrops uint64 // tail drops
	Lost       uint64 // random loss
	BytesOut   uint64 // serialized

	// QueueSamples holds the bytes waiting at each sample time, DelaySamples
	// the queueing delay a packet arriving then would see.
	QueueSamples []int
	DelaySamples []time.Duration
}

// AddLink adds a link.
func (s *Sim) AddLink(c LinkConfig) *Link {
	l := &Link{LinkConfig: c, s: s}
	s.links = append(s.links, l)
	return l
}

// Queue returns the bytes waiting for the serializer now.
func (l *Link) Queue() int {
	if l.busy <= l.s.now || l.Rate <= 0 {
		return 0
	}
	return int(float64(l.busy-l.s.now) * l.Rate / 8e9)
}

// QueueDelay returns how long a packet arriving now waits for the serializer.
func (l *Link) QueueDelay() time.Duration {
	return time.Duration(max(l.busy-l.s.now, 0))
}

// SetRate changes the link's rate (bits/s) from now on, e.g. from Sim.At, to
// replay a capacity change. The bytes waiting for the serializer then leave
// at the new rate, which sets when later packets start. (Packets already
// accepted keep the arrival times the old rate gave them: the simulator
// schedules each packet's arrival once. That is at most a buffer's worth of
// packets around each change, and with a model that keeps its queue short, a
// few.)
func (l *Link) SetRate(bps float64) {
	now := l.s.now
	if l.Rate > 0 && bps > 0 && l.busy > now {
		waiting := float64(l.busy-now) * l.Rate / 8e9
		l.busy = now + int64(waiting*8e9/bps)
	}
	l.Rate = bps
}

// enqueue offers a packet of size bytes at the current time and returns when it
// reaches the far end, or ok=false when it is dropped or lost.
func (l *Link) enqueue(size int) (arrive int64, ok bool) {
	l.Packets++
	now := l.s.now
	start := now
	if l.Rate > 0 {
		start = max(now, l.busy)
		if waiting := float64(start-now) * l.Rate / 8e9; waiting+float64(size) > float64(l.Buffer) {
			l.QueueDrops++
			return 0, false
		}
		l.busy = start + int64(float64(size)*8e9/l.Rate)
		start = l.busy
	}
	l.BytesOut += uint64(size)
	if l.Loss > 0 && l.s.rng.Float64() < l.Loss {
		l.Lost++
		return 0, false
	}
	return start + int64(l.Delay), true
}

// Run advances virtual time to d after the epoch, processing every event due.
func (s *Sim) Run(d time.Duration) {
	end := int64(d)
	for s.ev.len() > 0 && s.ev.peek().at <= end {
		e := s.ev.pop()
		s.now = e.at
		s.dispatch(&e)
	}
	s.now = end
}

// At schedules fn at virtual time d (for changes of links or flows mid-run).
func (s *Sim) At(d time.Duration, fn func()) {
	s.schedule(event{at: int64(d), kind: evFunc, fn: fn})
}

func (s *Sim) schedule(e event) {
	s.seq++
	e.seq = s.seq
	s.ev.push(e)
}

func (s *Sim) dispatch(e *event) {
	switch e.kind {
	case evArrive:
		e.sub.arrive(e)
	case evAck:
		e.sub.onAck(e.pseq, e.rx, e.rxBytes)
	case evPace:
		e.sub.onPace()
	case evLossTimer:
		e.sub.onLossTimer()
	case evRTO:
		e.sub.onRTO()
	case evFunc:
		e.fn()
	case evSample:
		s.sample()
		s.schedule(event{at: s.now + int64(s.cfg.SampleEvery), kind: evSample})
	}
}

func (s *Sim) sample() {
	s.sampleTimes = append(s.sampleTimes, s.now)
	for _, l := range s.links {
		l.QueueSamples = append(l.QueueSamples, l.Queue())
		l.DelaySamples = append(l.DelaySamples, l.QueueDelay())
	}
	for _, f := range s.flows {
		f.sample()
	}
}

// SampleTimes returns the times of the samples taken so far.
func (s *Sim) SampleTimes() []time.Duration {
	out := make([]time.Duration, len(s.sampleTimes))
	for i, t := range s.sampleTimes {
		out[i] = time.Duration(t)
	}
	return out
}

// sampleIndex returns the index of the first sample at or after d.
func (s *Sim) sampleIndex(d time.Duration) int {
	for i, t := range s.sampleTimes {
		if t >= int64(d) {
			return i
		}
	}
	return len(s.sampleTimes)
}

// MeanQueue returns the link's mean queue in bytes over the samples in [from, to).
func (l *Link) MeanQueue(from, to time.Duration) float64 {
	i, j := l.s.sampleIndex(from), l.s.sampleIndex(to)
	if j <= i {
		return 0
	}
	sum := 0
	for _, q := range l.QueueSamples[i:j] {
		sum += q
	}
	return float64(sum) / float64(j-i)
}

// FlowConfig describes a bulk-transfer flow.
type FlowConfig struct {
	Name string
	// CC is the congestion controller (cc.Names, except "none": a flow without a
	// window would send without bound).
	CC       string
	CCConfig cc.Config
	// Routes has one list of links per subflow.
	Routes [][]*Link
	// Start and Stop bound the time the flow sends (Stop 0 = never stops).
	Start, Stop time.Duration
	// Groups, if set, gives each subflow's bottleneck group (cc.Path.SetGroup:
	// subflows of one group are coupled); by default all are in group 0.
	Groups []uint32
}

// Flow is a bulk transfer over one or more subflows.
type Flow struct {
	Name string
	s    *Sim
	ctl  *cc.Controller
	subs []*subflow
	// Samples: per sample time, bytes acknowledged so far and window (segments)
	// per subflow.
	AckedSamples [][]uint64
	CwndSamples  [][]float64
	// PacingSamples: per sample time, the pacing rate (bytes/s, 0 = unpaced) per subflow.
	PacingSamples [][]float64
}

// AddFlow adds a flow.
func (s *Sim) AddFlow(fc FlowConfig) (*Flow, error) {
	if fc.CC == cc.None {
		return nil, fmt.Errorf("ccsim: flow %q: a flow needs a congestion window", fc.Name)
	}
	if len(fc.Routes) == 0 {
		return nil, fmt.Errorf("ccsim: flow %q has no routes", fc.Name)
	}
	if fc.CCConfig.MSS == 0 {
		fc.CCConfig.MSS = s.cfg.PacketSize
	}
	ctl, err := cc.New(fc.CC, fc.CCConfig)
	if err != nil {
		return nil, err
	}
	f := &Flow{Name: fc.Name, s: s, ctl: ctl}
	for i, r := range fc.Routes {
		if len(r) == 0 {
			return nil, fmt.Errorf("ccsim: flow %q route %d is empty", fc.Name, i)
		}
		sub := &subflow{f: f, idx: i, route: r, ring: make([]pkt, ringSize), next: 1, lowest: 1}
		for _, l := range r {
			sub.rev += int64(l.Delay)
		}
		f.subs = append(f.subs, sub)
	}
	s.flows = append(s.flows, f)
	s.At(fc.Start, func() {
		for _, sub := range f.subs {
			sub.ccp = ctl.AddPath(sub.idx, s.Now())
			if sub.idx < len(fc.Groups) {
				sub.ccp.SetGroup(fc.Groups[sub.idx])
			}
			sub.running = true
			sub.trySend()
		}
	})
	if fc.Stop > 0 {
		s.At(fc.Stop, func() {
			for _, sub := range f.subs {
				sub.running = false
			}
		})
	}
	return f, nil
}

// Controller returns the flow's congestion controller.
func (f *Flow) Controller() *cc.Controller { return f.ctl }

// Subflows returns the number of subflows.
func (f *Flow) Subflows() int { return len(f.subs) }

// Acked returns the bytes acknowledged on subflow i so far.
func (f *Flow) Acked(i int) uint64 { return f.subs[i].acked }

// Lost returns the packets declared lost on subflow i (RTOs included).
func (f *Flow) Lost(i int) uint64 { return f.subs[i].lost }

// Path returns subflow i's congestion state (nil before the flow starts).
func (f *Flow) Path(i int) *cc.Path { return f.subs[i].ccp }

func (f *Flow) sample() {
	a := make([]uint64, len(f.subs))
	w := make([]float64, len(f.subs))
	r := make([]float64, len(f.subs))
	for i, sub := range f.subs {
		a[i] = sub.acked
		if sub.ccp != nil {
			w[i] = sub.ccp.Stats().Cwnd
			r[i] = sub.ccp.PacingRate()
		}
	}
	f.AckedSamples = append(f.AckedSamples, a)
	f.CwndSamples = append(f.CwndSamples, w)
	f.PacingSamples = append(f.PacingSamples, r)
}

// MeanPacing returns the mean over the samples in [from, to) of the pacing
// rate in bytes/s summed over the subflows.
func (f *Flow) MeanPacing(from, to time.Duration) float64 {
	i, j := f.s.sampleIndex(from), f.s.sampleIndex(to)
	j = min(j, len(f.PacingSamples))
	if j <= i {
		return 0
	}
	sum := 0.0
	for _, r := range f.PacingSamples[i:j] {
		for _, v := range r {
			sum += v
		}
	}
	return sum / float64(j-i)
}

// Goodput returns subflow i's acknowledged bits per second over [from, to),
// from the samples (i < 0: all subflows).
func (f *Flow) Goodput(i int, from, to time.Duration) float64 {
	a, b := f.s.sampleIndex(from), f.s.sampleIndex(to)
	if b >= len(f.AckedSamples) {
		b = len(f.AckedSamples) - 1
	}
	if b <= a {
		return 0
	}
	var bytes uint64
	for k := range f.subs {
		if i >= 0 && k != i {
			continue
		}
		bytes += f.AckedSamples[b][k] - f.AckedSamples[a][k]
	}
	dt := time.Duration(f.s.sampleTimes[b] - f.s.sampleTimes[a]).Seconds()
	return float64(bytes) * 8 / dt
}
