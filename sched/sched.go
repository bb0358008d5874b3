package sched

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// MaxPaths bounds PathInfo.ID: schedulers keep per-path state in fixed arrays indexed
// by ID so that Pick never allocates. Paths with an ID outside [0, MaxPaths) are never
// picked.
const MaxPaths = 256

// Scheduler names accepted by New.
const (
	RoundRobin      = "roundrobin"
	Weighted        = "weighted"
	MinRTT          = "minrtt"
	RTTAware        = "rtt-aware"
	EarliestArrival = "earliest-arrival"
	Redundant       = "redundant"

	// Default is the scheduler used when none is configured.
	Default = EarliestArrival
)

var names = []string{RoundRobin, Weighted, MinRTT, RTTAware, EarliestArrival, Redundant}

// Names returns the valid scheduler names (a fresh slice the caller may keep).
func Names() []string { return append([]string(nil), names...) }

// PathInfo is the engine's per-packet view of one path. It is passed by value in a
// slice the engine reuses, so schedulers must not keep pointers into it.
type PathInfo struct {
	ID           int  // small stable id (0..MaxPaths-1) of the path within its session
	Usable       bool // Active/Degraded/ready
	Degraded     bool
	SRTT, MinRTT time.Duration
	// OWD is the forward one-way delay relative to the session's other paths (only
	// differences matter; may be negative); it includes current queueing.
	OWD time.Duration
	// BaseOWD is the same, minimum (propagation only).
	BaseOWD  time.Duration
	Rate     float64 // bytes/s delivery rate estimate; 0 = unknown yet
	InFlight int     // bytes sent, not yet acked/lost
	CwndRoom int     // bytes the congestion controller still allows; <0 = no controller (see hasRoom)
	Weight   float64 // configured static weight for "weighted" (0 if none)
	// Link, when nonzero (1..MaxPaths-1), says which paths share a bottleneck: a
	// full mesh of local paths × server addresses runs several paths over each
	// access link. Paths with the same Link share one capacity model in
	// earliest-arrival. 0 = the path is a link of its own.
	Link int
}

// Scheduler decides which path(s) carry each packet. Implementations keep state
// (round-robin position, virtual queues, RNG) and are not safe for concurrent use:
// one Scheduler per session, called under the session's lock.
type Scheduler interface {
	// Pick appends to dst the indices (into paths) the packet of `size` bytes of flow
	// `flow` must be sent on and returns dst. Empty result = no usable path (drop).
	// Must not allocate (given dst has capacity).
	Pick(dst []int, paths []PathInfo, size int, flow uint32, now time.Time) []int
	Name() string
}

// Config holds the tunables of the adaptive schedulers. A zero field takes its
// value from DefaultConfig.
type Config struct {
	// InitialRate (bytes/s) stands in for Rate while a path has no delivery-rate
	// estimate. 1.25 MB/s = 10 Mbit/s, the paper's link speed: deliberately modest,
	// because an overestimate makes earliest-arrival dump a burst into a path that
	// may be slow, while an underestimate corrects itself through ProbeGain.
	InitialRate float64
	// MinRate (bytes/s) floors every rate estimate so size/rate stays finite and a
	// path with a tiny stale estimate is still chosen once the others are loaded.
	// Default 12.5 kB/s (100 kbit/s).
	MinRate float64
	// ProbeGain multiplies the rate of a path whose measured queueing delay is below
	// ProbeQueue (earliest-arrival). Default 1.25 (BBR's probing gain). See edpf.go.
	ProbeGain float64
	// ProbeQueue is the measured queueing delay (OWD-BaseOWD) below which a path is
	// considered not saturated. Default 5ms: above typical smoothing jitter, well
	// below the queue a saturated 10 Mbit/s bottleneck builds.
	ProbeQueue time.Duration
	// MaxBacklog caps the predicted queue wait of a path (earliest-arrival) so the
	// virtual queue cannot run away when the offered load exceeds every estimate; a
	// real bottleneck drops beyond its buffer anyway. Default 500ms.
	MaxBacklog time.Duration
	// BurstSlack (earliest-arrival) keeps a packet on the path that took the
	// packet before while that path's predicted arrival is within BurstSlack of
	// the earliest. At gigabit rates runs of packets then share a path — one GSO
	// send, one receive batch, no reordering within the run — instead of
	// alternating packet by packet (two veths: 21 % of the packets reordered,
	// 0.90× one path's throughput), and no packet is predicted to arrive more
	// than BurstSlack later than the per-packet choice. It applies only where
	// 16 packets fit in it on the earliest path (above about 180 Mbit/s with
	// 1 ms): slower paths keep their per-packet choices. Default 1 ms;
	// negative turns it off.
	BurstSlack time.Duration
	// WindowGain and WindowHeadroom estimate a window for minrtt when a path has no
	// congestion controller: Rate × RTT × WindowGain + WindowHeadroom bytes. Gain 2
	// (BBR's cwnd gain) leaves room for ack aggregation and lets the delivery-rate
	// estimate grow (it can only measure what we send); the headroom (default 15000
	// bytes, ten 1500-byte packets like TCP's IW10) is the window of a path whose rate
	// is still unknown and keeps slow paths from being starved of samples.
	WindowGain     float64
	WindowHeadroom int
	// DefaultRTT is assumed for a path without an RTT sample (minrtt, rtt-aware).
	// Default 100ms.
	DefaultRTT time.Duration
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		InitialRate:    1.25e6,
		MinRate:        12.5e3,
		ProbeGain:      1.25,
		ProbeQueue:     5 * time.Millisecond,
		MaxBacklog:     500 * time.Millisecond,
		BurstSlack:     time.Millisecond,
		WindowGain:     2,
		WindowHeadroom: 15000,
		DefaultRTT:     100 * time.Millisecond,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.InitialRate <= 0 {
		c.InitialRate = d.InitialRate
	}
	if c.MinRate <= 0 {
		c.MinRate = d.MinRate
	}
	if c.ProbeGain <= 0 {
		c.ProbeGain = d.ProbeGain
	}
	if c.ProbeQueue <= 0 {
		c.ProbeQueue = d.ProbeQueue
	}
	if c.MaxBacklog <= 0 {
		c.MaxBacklog = d.MaxBacklog
	}
	if c.BurstSlack == 0 {
		c.BurstSlack = d.BurstSlack
	}
	if c.WindowGain <= 0 {
		c.WindowGain = d.WindowGain
	}
	if c.WindowHeadroom <= 0 {
		c.WindowHeadroom = d.WindowHeadroom
	}
	if c.DefaultRTT <= 0 {
		c.DefaultRTT = d.DefaultRTT
	}
	return c
}

// Options configures New.
type Options struct {
	// Weights for "weighted", indexed by path ID. Used only when no PathInfo
	// carries a Weight (the engine may resolve weights itself, e.g. on a server
	// where the configured order is the client's).
	Weights []float64
	// Seed seeds the RNG of the random schedulers (tests); 0 = random.
	Seed uint64
	// Config tunes the adaptive schedulers; zero fields take defaults.
	Config Config
}

// New returns the scheduler called name ("" = Default).
func New(name string, opt Options) (Scheduler, error) {
	cfg := opt.Config.withDefaults()
	switch name {
	case "":
		return newEDPF(cfg), nil
	case RoundRobin:
		return &roundRobin{last: -1}, nil
	case Weighted:
		w := &weighted{weights: append([]float64(nil), opt.Weights...)}
		w.rng.init(opt.Seed)
		return w, nil
	case MinRTT:
		return &minRTT{cfg: cfg}, nil
	case RTTAware:
		r := &rttAware{cfg: cfg}
		r.rng.init(opt.Seed)
		return r, nil
	case EarliestArrival:
		return newEDPF(cfg), nil
	case Redundant:
		return redundant{}, nil
	}
	return nil, fmt.Errorf("sched: unknown scheduler %q (valid: %s)", name, strings.Join(names, ", "))
}

// useDegraded reports whether the candidate class for this packet is the degraded
// one: degraded paths (high loss) are a fallback, used only when no healthy usable
// path exists. Every scheduler applies this rule so that a lossy path does not
// inflate the inner connection's loss rate while a clean one is available.
func useDegraded(paths []PathInfo) bool {
	for i := range paths {
		p := &paths[i]
		if p.Usable && !p.Degraded && uint(p.ID) < MaxPaths {
			return false
		}
	}
	return true
}

// eligible reports whether p belongs to the candidate class chosen by useDegraded.
func eligible(p *PathInfo, degraded bool) bool {
	return p.Usable && p.Degraded == degraded && uint(p.ID) < MaxPaths
}

// hasRoom reports whether p's congestion window admits size more bytes. Without a
// controller (CwndRoom < 0) every path has room. With one, a full path is no
// candidate for any scheduler: a full window is the capacity signal, and sending
// past it is what the controller exists to prevent. When every usable path is
// full Pick returns nothing and the engine holds the packet until acks open a
// window (or drops it after a while, counted). Full does not make a healthy path
// unusable, so it never sends traffic to degraded paths.
func hasRoom(p *PathInfo, size int) bool { return p.CwndRoom < 0 || p.CwndRoom >= size }

// rng is a PCG generator held by value so drawing never allocates.
type rng struct{ pcg rand.PCG }

func (r *rng) init(seed uint64) {
	if seed == 0 {
		seed = rand.Uint64() | 1
	}
	r.pcg.Seed(seed, seed^0x9e3779b97f4a7c15)
}

// float64 returns a uniform value in [0, 1).
func (r *rng) float64() float64 { return float64(r.pcg.Uint64()>>11) * 0x1p-53 }

// rttOf is the RTT used to rank a path: SRTT, else MinRTT, else the default.
func rttOf(p *PathInfo, def time.Duration) time.Duration {
	switch {
	case p.SRTT > 0:
		return p.SRTT
	case p.MinRTT > 0:
		return p.MinRTT
	}
	return def
}
