package path

import (
	"math/bits"
	"time"
)

// State is the liveness state of a path as seen by its Sender.
type State uint8

const (
	// Probing: the path is new or has just come back from Down; it is being
	// measured. It is usable once it has an RTT sample from this episode.
	Probing State = iota
	// Active: the path delivers and its loss rate is acceptable.
	Active
	// Degraded: the path delivers but loses more than Config.DegradedLoss.
	// Schedulers prefer other paths but may still use it.
	Degraded
	// Down: the path stopped delivering. It is only probed, never scheduled.
	Down
)

func (s State) String() string {
	switch s {
	case Probing:
		return "probing"
	case Active:
		return "active"
	case Degraded:
		return "degraded"
	case Down:
		return "down"
	}
	return "unknown"
}

// Granularity is the timer granularity assumed by the loss and RTO formulas
// (RFC 9002 kGranularity). It keeps thresholds from collapsing to zero on
// paths whose RTT variance is tiny.
const Granularity = time.Millisecond

// trendPoints is the number of bucketed OWD points the trend regression fits.
// With buckets of srtt/8 it spans about two RTTs: long enough to average
// out per-packet jitter, short enough to see a queue start to build.
const trendPoints = 16

// Config holds the tunables of a Sender and a Receiver. Zero fields take
// the value of DefaultConfig, so Config{} is a valid configuration.
type Config struct {
	// InitialRTT is assumed before the first RTT sample (default 100ms). It
	// only sizes timeouts of a path nobody has measured yet.
	InitialRTT time.Duration
	// MinRTO and MaxRTO clamp the RFC 6298 retransmission timeout reported in
	// Stats (defaults 200ms, Linux's floor, and 10s).
	MinRTO, MaxRTO time.Duration

	// ProbeInterval (default 400ms): a path on which no ack-eliciting packet
	// was sent for this long asks for a PING (OnTimer's needProbe). This is
	// also the keepalive of NAT bindings, far below common 30s UDP timeouts.
	ProbeInterval time.Duration
	// DownIdle (default 1.4s): a path goes Down when its oldest
	// ack-eliciting packet not overtaken by any ack is this old. With
	// ProbeInterval 400ms an idle path loses four probes in a row before
	// that, and is Down at most ProbeInterval+DownIdle (1.8s) after it
	// broke.
	DownIdle time.Duration
	// StandbyProbeInterval (default 800ms) replaces ProbeInterval on a path
	// the engine keeps out of use while it works (a backup tier, Sender.
	// SetStandby): a metered backup link then carries half the keepalives.
	// A single lost probe still cannot take it Down: the next one is
	// answered before DownIdle (1.4s) on any path of RTT below 600 ms.
	StandbyProbeInterval time.Duration
	// DownBusyMin, DownBusyMax (defaults 200ms, 350ms) and DownBusyRTTs
	// (default 2): when traffic flows (DownBusyPackets packets sent within
	// the threshold), a path goes Down once the oldest packet not overtaken
	// by an ack is older than clamp(DownBusyRTTs*srtt+4*rttvar, min, max)
	// and the DownBusyPackets-th is overdue (older than srtt+4*rttvar+
	// AckDelay). Max bounds detection to well under 0.5s on any path whose
	// acks normally arrive within it; min keeps a short scheduling hiccup
	// on a LAN path from taking it out of service.
	DownBusyMin, DownBusyMax time.Duration
	DownBusyRTTs             float64
	// DownBusyPackets (default 3) is how many consecutive unanswered
	// packets the busy rule needs, so one lost packet never takes a path
	// Down.
	DownBusyPackets int
	// ActivateAcks (default 2): RTT samples a Probing path collects before
	// it is Active. It is usable after the first.
	ActivateAcks int

	// DegradedLoss (default 0.2): an Active path whose smoothed loss rate
	// exceeds this becomes Degraded; it returns to Active below
	// DegradedExitLoss (default 0.1). The gap avoids flapping.
	DegradedLoss, DegradedExitLoss float64
	// LossWindow (default 2s) is the window of recent packets the Degraded
	// decision looks at, and MinLossSample (default 20) the packets it needs
	// before it judges at all. A window rather than the smoothed rate: a path the
	// scheduler avoids after a loss burst (a TCP slow-start overshoot, say) gets
	// too little traffic to ever smooth its rate down again.
	LossWindow    time.Duration
	MinLossSample int
	// LossGain (default 1/8) is the EWMA gain applied once per round (one
	// srtt) to the lost and total packet counts of that round.
	LossGain float64
	// ReorderThreshold (default 3, RFC 9002 kPacketThreshold): an
	// ack-eliciting packet this many sequence numbers below the largest
	// acked one is lost. Sequence numbers are per path, so reordering
	// between paths never counts.
	ReorderThreshold int
	// TimeThreshold (default 9/8, RFC 9002 kTimeThreshold): a packet below
	// the largest acked is lost once older than this times
	// max(srtt, latest RTT).
	TimeThreshold float64

	// RateWindow (default 5s) is the window of the delivery-rate max filter.
	RateWindow time.Duration
	// MinRateInterval (default 10ms) is the shortest interval a delivery-rate
	// sample spans (it spans at least one SRTT): shorter ones mostly measure how
	// packets bunch up, not the path's rate.
	MinRateInterval time.Duration
	// MinRTTWindow (default 10s) is the window of the min-RTT filter; a
	// window rather than a lifetime minimum lets the path's base RTT follow
	// route changes.
	MinRTTWindow time.Duration
	// OWDWindow (default 10s) is the window of the minimum one-way delay,
	// the baseline that queue delay is measured against. It also absorbs
	// the slow drift between the two hosts' clocks.
	OWDWindow time.Duration

	// AckEvery (default 4): a Receiver acks after this many ack-eliciting
	// packets, but no sooner than AckSpacing after its previous ack.
	AckEvery int
	// AckSpacing (default 1ms) spaces a Receiver's acks at high packet rates:
	// AckEvery packets pending less than AckSpacing after the last ack wait
	// until AckSpacing has passed or AckMaxPending are pending. Below about
	// four packets per AckSpacing (45 Mbit/s of full datagrams) it changes
	// nothing; at gigabit rates it makes one ack per 32 packets instead of
	// one per 4, each a datagram through both hosts' stacks.
	AckSpacing time.Duration
	// AckDelay (default 5ms): a Receiver acks at most this long after the
	// first unacknowledged ack-eliciting packet. Senders assume the peer
	// uses the same value when they judge whether an ack is overdue.
	AckDelay time.Duration

	// RingSize (default 8192, rounded up to a power of two) is the number of
	// sent packets a Sender remembers. A packet whose slot is reused before
	// it was acked counts as lost, so this must cover a path's bandwidth-
	// delay product in packets (8192 × 1400 B ≈ 11 MB in flight).
	RingSize int
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		InitialRTT:           100 * time.Millisecond,
		MinRTO:               200 * time.Millisecond,
		MaxRTO:               10 * time.Second,
		ProbeInterval:        400 * time.Millisecond,
		DownIdle:             1400 * time.Millisecond,
		StandbyProbeInterval: 800 * time.Millisecond,
		DownBusyMin:          200 * time.Millisecond,
		DownBusyMax:          350 * time.Millisecond,
		DownBusyRTTs:         2,
		DownBusyPackets:      3,
		ActivateAcks:         2,
		DegradedLoss:         0.2,
		DegradedExitLoss:     0.1,
		LossWindow:           2 * time.Second,
		MinLossSample:        20,
		LossGain:             1.0 / 8,
		ReorderThreshold:     3,
		TimeThreshold:        9.0 / 8,
		RateWindow:           5 * time.Second,
		MinRateInterval:      10 * time.Millisecond,
		MinRTTWindow:         10 * time.Second,
		OWDWindow:            10 * time.Second,
		AckEvery:             4,
		AckSpacing:           time.Millisecond,
		AckDelay:             5 * time.Millisecond,
		RingSize:             8192,
	}
}

// withDefaults fills zero (or nonsensical) fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	setD := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	setF := func(v *float64, def float64) {
		if *v <= 0 {
			*v = def
		}
	}
	setI := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	setD(&c.InitialRTT, d.InitialRTT)
	setD(&c.MinRTO, d.MinRTO)
	setD(&c.MaxRTO, d.MaxRTO)
	setD(&c.ProbeInterval, d.ProbeInterval)
	setD(&c.DownIdle, d.DownIdle)
	setD(&c.StandbyProbeInterval, d.StandbyProbeInterval)
	setD(&c.DownBusyMin, d.DownBusyMin)
	setD(&c.DownBusyMax, d.DownBusyMax)
	setF(&c.DownBusyRTTs, d.DownBusyRTTs)
	setI(&c.DownBusyPackets, d.DownBusyPackets)
	setI(&c.ActivateAcks, d.ActivateAcks)
	setF(&c.DegradedLoss, d.DegradedLoss)
	setF(&c.DegradedExitLoss, d.DegradedExitLoss)
	setD(&c.LossWindow, d.LossWindow)
	if c.MinLossSample <= 0 {
		c.MinLossSample = d.MinLossSample
	}
	setF(&c.LossGain, d.LossGain)
	setI(&c.ReorderThreshold, d.ReorderThreshold)
	setF(&c.TimeThreshold, d.TimeThreshold)
	setD(&c.RateWindow, d.RateWindow)
	setD(&c.MinRateInterval, d.MinRateInterval)
	setD(&c.MinRTTWindow, d.MinRTTWindow)
	setD(&c.OWDWindow, d.OWDWindow)
	setI(&c.AckEvery, d.AckEvery)
	setD(&c.AckSpacing, d.AckSpacing)
	setD(&c.AckDelay, d.AckDelay)
	setI(&c.RingSize, d.RingSize)

	if c.MaxRTO < c.MinRTO {
		c.MaxRTO = c.MinRTO
	}
	if c.DownBusyMax < c.DownBusyMin {
		c.DownBusyMax = c.DownBusyMin
	}
	if c.DegradedExitLoss > c.DegradedLoss {
		c.DegradedExitLoss = c.DegradedLoss
	}
	if c.LossGain > 1 {
		c.LossGain = 1
	}
	if c.RingSize < 64 {
		c.RingSize = 64
	}
	if c.RingSize > 1<<20 {
		c.RingSize = 1 << 20
	}
	c.RingSize = 1 << bits.Len(uint(c.RingSize-1))
	return c
}
