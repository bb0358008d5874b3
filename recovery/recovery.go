package recovery

import (
	"fmt"
	"time"

	"github.com/braid-vpn/braid/sched"
)

// Mode is the session's recovery mode (config key `recovery`): a set of
// mechanisms.
type Mode uint8

const (
	// Off passes every path loss on to the inner traffic.
	Off Mode = 0
	// Retransmit resends lost payloads inside the tunnel (selective
	// retransmission with give-up frames).
	Retransmit Mode = 1 << 0
	// FEC sends erasure-coded repair packets at a rate adapted to the measured
	// loss (package fec), so most losses are rebuilt without waiting a round trip.
	FEC Mode = 1 << 1
	// Auto is both: repairs for what is lost at the measured rate, resends for
	// what the repairs could not rebuild.
	Auto = Retransmit | FEC
)

// Mode names. The handshake carries the canonical name (String).
const (
	NameAuto       = "auto"
	NameRetransmit = "retransmit"
	NameFEC        = "fec"
	NameOff        = "off"
	nameBoth       = "retransmit+fec"
)

// Names lists the values the config key accepts.
var Names = []string{NameAuto, NameRetransmit, NameFEC, NameOff}

// ParseMode parses a mode name; "" is "auto".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", NameAuto, nameBoth:
		return Auto, nil
	case NameRetransmit:
		return Retransmit, nil
	case NameFEC:
		return FEC, nil
	case NameOff:
		return Off, nil
	}
	return Off, fmt.Errorf("recovery: unknown mode %q (valid: auto, retransmit, fec, off)", s)
}

// String is the canonical name: "off", "retransmit", "fec" or "retransmit+fec".
func (m Mode) String() string {
	switch m {
	case Off:
		return NameOff
	case Retransmit:
		return NameRetransmit
	case FEC:
		return NameFEC
	}
	return nameBoth
}

// Has reports whether m includes the mechanism x.
func (m Mode) Has(x Mode) bool { return m&x != 0 }

// Config holds the tunables; zero fields take DefaultConfig's values.
type Config struct {
	// Budget is the fraction of data bytes that resends may add (default 0.25),
	// BudgetBurst the bucket depth in bytes (default 256 KiB: a 10 Mbit/s path's
	// window several times over, so a path going Down can hand its whole window
	// to the others once).
	Budget      float64
	BudgetBurst int
	// MaxResends bounds how often one payload is sent again (default 3).
	MaxResends int
	// Margin is added to the receiver's hold (default 10 ms): one-way delays are
	// estimates.
	Margin time.Duration
	// MaxHold caps the hold, and with it how late a resend may arrive (default
	// 300 ms). Held packets delay the inner TCP's acks; Linux's minimum RTO is
	// 200 ms plus the connection's RTT, so holding much longer would trade a
	// loss for a spurious timeout.
	MaxHold time.Duration
	// TimeThreshold, AckDelay and Tick describe the loss detector and the
	// engine (the engine copies them from path.Config and its Tunables).
	TimeThreshold float64
	AckDelay      time.Duration
	Tick          time.Duration
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Budget:        0.25,
		BudgetBurst:   256 << 10,
		MaxResends:    3,
		Margin:        10 * time.Millisecond,
		MaxHold:       300 * time.Millisecond,
		TimeThreshold: 9.0 / 8,
		AckDelay:      5 * time.Millisecond,
		Tick:          5 * time.Millisecond,
	}
}

// WithDefaults fills zero fields from DefaultConfig.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	if !(c.Budget > 0) {
		c.Budget = d.Budget
	}
	if c.BudgetBurst <= 0 {
		c.BudgetBurst = d.BudgetBurst
	}
	if c.MaxResends <= 0 {
		c.MaxResends = d.MaxResends
	}
	if c.Margin <= 0 {
		c.Margin = d.Margin
	}
	if c.MaxHold <= 0 {
		c.MaxHold = d.MaxHold
	}
	if !(c.TimeThreshold > 0) {
		c.TimeThreshold = d.TimeThreshold
	}
	if c.AckDelay <= 0 {
		c.AckDelay = d.AckDelay
	}
	if c.Tick <= 0 {
		c.Tick = d.Tick
	}
	return c
}

// OneWay estimates a path's current one-way delay: half its minimum RTT (the
// propagation part, assumed symmetric) plus its measured queueing (smoothed OWD
// above the minimum). Without an RTT sample it is half the smoothed RTT.
func OneWay(p *sched.PathInfo) time.Duration {
	base := p.MinRTT / 2
	if base <= 0 {
		base = p.SRTT / 2
	}
	if q := p.OWD - p.BaseOWD; q > 0 {
		base += q
	}
	return base
}

// Hold returns how long a receiver waits for a gap that a retransmission may
// fill, from the usable paths (see the package doc); 0 when none is usable.
func (c *Config) Hold(paths []sched.PathInfo) time.Duration {
	var maxRTT, minOW time.Duration
	n := 0
	for i := range paths {
		p := &paths[i]
		if !p.Usable {
			continue
		}
		maxRTT = max(maxRTT, p.SRTT)
		ow := OneWay(p)
		if n == 0 || ow < minOW {
			minOW = ow
		}
		n++
	}
	if n == 0 {
		return 0
	}
	h := time.Duration(c.TimeThreshold*float64(maxRTT)) + c.AckDelay + c.Tick + minOW + c.Margin
	return min(h, c.MaxHold)
}

// Deadline is when a payload first sent at sent over path p must have arrived,
// given the receiver's hold.
func Deadline(sent time.Time, p *sched.PathInfo, hold time.Duration) time.Time {
	return sent.Add(OneWay(p) + hold)
}

// Arrival estimates when size bytes sent now on p arrive: its one-way delay plus
// the serialisation at its delivery rate.
func Arrival(now time.Time, p *sched.PathInfo, size int) time.Time {
	t := now.Add(OneWay(p))
	if p.Rate > 0 {
		t = t.Add(time.Duration(float64(size) / p.Rate * float64(time.Second)))
	}
	return t
}

// Choose returns the index of the usable path on which a resend of size bytes
// arrives first, if it arrives by deadline; -1 otherwise. Degraded paths (heavy
// loss) are used only when no healthy path makes the deadline.
func Choose(paths []sched.PathInfo, size int, now, deadline time.Time) int {
	best, bestDeg := -1, -1
	var at, atDeg time.Time
	for i := range paths {
		p := &paths[i]
		if !p.Usable {
			continue
		}
		a := Arrival(now, p, size)
		if a.After(deadline) {
			continue
		}
		if p.Degraded {
			if bestDeg < 0 || a.Before(atDeg) {
				bestDeg, atDeg = i, a
			}
			continue
		}
		if best < 0 || a.Before(at) {
			best, at = i, a
		}
	}
	if best < 0 {
		return bestDeg
	}
	return best
}

// Budget is the resend token bucket.
type Budget struct {
	frac          float64
	tokens, depth float64
}

// NewBudget returns a full bucket.
func NewBudget(c Config) Budget {
	c = c.WithDefaults()
	return Budget{frac: c.Budget, tokens: float64(c.BudgetBurst), depth: float64(c.BudgetBurst)}
}

// Earn credits the bucket for n data bytes sent.
func (b *Budget) Earn(n int) { b.tokens = min(b.tokens+b.frac*float64(n), b.depth) }

// Spend takes n bytes for a resend and reports whether the budget allowed it.
func (b *Budget) Spend(n int) bool {
	if b.tokens < float64(n) {
		return false
	}
	b.tokens -= float64(n)
	return true
}

// Tokens returns the bytes available now.
func (b *Budget) Tokens() float64 { return b.tokens }
