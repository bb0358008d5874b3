package pmtu

import "time"

// Defaults used by DefaultConfig and for zero fields in New.
const (
	DefaultMaxProbes      = 3                // RFC 8899 MAX_PROBES
	DefaultProbeTimeout   = time.Second      // undecided probe counts as lost
	DefaultRaiseInterval  = 10 * time.Minute // RFC 8899 PMTU_RAISE_TIMER
	DefaultStep           = 8                // bytes; stop when hi-lo <= Step
	DefaultRestartHoldoff = 5 * time.Second  // min gap between acted-on OnLargeLoss
)

// Config parameterises a Search. Sizes are UDP payload bytes.
type Config struct {
	Base          int           // smallest size assumed to work; Size() never goes below it
	Max           int           // largest size worth trying (interface MTU / configuration)
	MaxProbes     int           // attempts per size before it counts as failed
	ProbeTimeout  time.Duration // a probe not decided by then counts as lost
	RaiseInterval time.Duration // after completing below Max (or in error), search again after this
	Step          int           // search ends when hi-lo <= Step
	// RestartHoldoff is the minimum time between two OnLargeLoss reports
	// that are acted upon (restart or error counting); reports inside it
	// are only counted.
	RestartHoldoff time.Duration
}

// DefaultConfig returns a Config for the given Base and Max with the
// default MaxProbes, ProbeTimeout, RaiseInterval, Step and RestartHoldoff.
func DefaultConfig(base, max int) Config {
	return Config{
		Base:           base,
		Max:            max,
		MaxProbes:      DefaultMaxProbes,
		ProbeTimeout:   DefaultProbeTimeout,
		RaiseInterval:  DefaultRaiseInterval,
		Step:           DefaultStep,
		RestartHoldoff: DefaultRestartHoldoff,
	}
}

type state uint8

const (
	stBase state = iota
	stSearching
	stComplete
	stError
)

var stateNames = [...]string{"base", "searching", "complete", "error"}

// Search is the per-path size search. It is not safe for concurrent use.
type Search struct {
	cfg Config

	st   state
	size int // largest confirmed size (lo of the search)
	hi   int // smallest size that failed MaxProbes times; 0 = none yet

	attempts int // consecutive losses of the current candidate

	outstanding bool
	outSize     int
	outSent     time.Time
	// outStale marks an outstanding probe sent before a restart or error:
	// it still occupies the one probe slot until decided or timed out, but
	// its result is only counted.
	outStale bool

	// timedOut is the size of the last probe declared lost by timeout (0 if
	// none); a late ack of it is still honoured.
	timedOut int

	raiseAt time.Time // complete/error: when to search again

	actedLarge  bool      // some OnLargeLoss was acted on
	lastLarge   time.Time // time of the last acted-on OnLargeLoss
	baseLarge   int       // acted-on OnLargeLoss reports while at Base
	largeLosses uint64
	restarts    uint64
	sent, acked uint64
	lost        uint64
}

// New returns a Search in state "base" with Size() == cfg.Base. Zero or
// negative tuning fields take their defaults; Max below Base is raised to
// Base (then there is nothing to search and the state is "complete").
func New(cfg Config, now time.Time) *Search {
	if cfg.MaxProbes <= 0 {
		cfg.MaxProbes = DefaultMaxProbes
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = DefaultProbeTimeout
	}
	if cfg.RaiseInterval <= 0 {
		cfg.RaiseInterval = DefaultRaiseInterval
	}
	if cfg.Step <= 0 {
		cfg.Step = DefaultStep
	}
	if cfg.RestartHoldoff <= 0 {
		cfg.RestartHoldoff = DefaultRestartHoldoff
	}
	if cfg.Base < 0 {
		cfg.Base = 0
	}
	if cfg.Max < cfg.Base {
		cfg.Max = cfg.Base
	}
	s := &Search{cfg: cfg, size: cfg.Base}
	if cfg.Max == cfg.Base {
		s.complete(now)
	}
	return s
}

// Config returns the effective configuration (defaults applied).
func (s *Search) Config() Config { return s.cfg }

// Size returns the largest confirmed datagram size; Base until something
// larger is confirmed. The engine must not send larger datagrams.
func (s *Search) Size() int { return s.size }

// State returns "base", "searching", "complete" or "error".
func (s *Search) State() string { return stateNames[s.st] }

// Searching reports whether a search is in progress (state "searching").
func (s *Search) Searching() bool { return s.st == stSearching }

// Done reports whether the search has converged (state "complete").
func (s *Search) Done() bool { return s.st == stComplete }

// Probes returns the number of probes sent, acknowledged and lost (lost
// includes timeouts; a timed-out probe acknowledged late moves from lost to
// acked).
func (s *Search) Probes() (sent, acked, lost uint64) { return s.sent, s.acked, s.lost }

// LargeLosses returns how many OnLargeLoss reports arrived and how many of
// them restarted the search.
func (s *Search) LargeLosses() (reports, restarts uint64) { return s.largeLosses, s.restarts }

// RaiseAt returns when a completed (below Max) or failed search will resume,
// and whether such a timer is armed.
func (s *Search) RaiseAt() (time.Time, bool) {
	armed := (s.st == stComplete && s.size < s.cfg.Max) || s.st == stError
	return s.raiseAt, armed
}

// candidate returns the size the search wants to confirm next, or 0 when
// the interval is exhausted.
func (s *Search) candidate() int {
	lo := s.size
	if s.hi == 0 {
		if s.cfg.Max > lo {
			return s.cfg.Max
		}
		return 0
	}
	if s.hi-lo <= s.cfg.Step {
		return 0
	}
	mid := (lo + s.hi) / 2 &^ 3
	if mid <= lo || mid >= s.hi {
		mid = (lo + s.hi) / 2 // hi-lo >= 2 here, so lo < mid < hi
	}
	return mid
}

func (s *Search) complete(now time.Time) {
	s.st = stComplete
	s.attempts = 0
	s.raiseAt = now.Add(s.cfg.RaiseInterval)
}

// startSearch enters "searching" from the current Size() with no known
// upper bound (first candidate Max).
func (s *Search) startSearch() {
	s.st = stSearching
	s.hi = 0
	s.attempts = 0
	s.timedOut = 0
}

// NextProbe returns the size of the probe to send now, or 0. At most one
// probe is outstanding; a probe undecided for ProbeTimeout is declared lost
// here. Calling NextProbe again without OnProbeSent returns the same size.
func (s *Search) NextProbe(now time.Time) int {
	if s.outstanding {
		if now.Sub(s.outSent) < s.cfg.ProbeTimeout {
			return 0
		}
		size, stale := s.outSize, s.outStale
		s.lose(size, now)
		if !stale {
			s.timedOut = size
		}
	}
	switch s.st {
	case stBase:
		s.startSearch()
	case stComplete:
		if s.size >= s.cfg.Max || now.Before(s.raiseAt) {
			return 0
		}
		s.startSearch() // raise: probe Max again, keep Size()
	case stError:
		if now.Before(s.raiseAt) {
			return 0
		}
		s.baseLarge = 0
		s.startSearch()
	}
	c := s.candidate()
	if c == 0 {
		s.complete(now)
	}
	return c
}

// OnProbeSent records that a probe of the given size was sent at now. Sizes
// at or below Size() are ignored (no such probe is ever requested).
func (s *Search) OnProbeSent(size int, now time.Time) {
	if size <= s.size || s.st != stSearching {
		return
	}
	s.sent++
	s.outstanding = true
	s.outSize = size
	s.outSent = now
	s.outStale = false
	s.timedOut = 0
}

// OnProbeAcked records that the probe of the given size was acknowledged.
// Only the outstanding probe, or the last one declared lost by timeout, is
// taken into account.
func (s *Search) OnProbeAcked(size int, now time.Time) {
	switch {
	case s.outstanding && size == s.outSize:
		s.outstanding = false
		if s.outStale {
			s.acked++
			return
		}
	case size != 0 && size == s.timedOut:
		s.timedOut = 0
		s.lost-- // the timeout was wrong: it got through
	default:
		return
	}
	s.acked++
	if size <= s.size {
		return
	}
	s.size = size
	s.baseLarge = 0
	s.attempts = 0
	if s.hi != 0 && s.hi <= size {
		s.hi = 0 // a late ack contradicts the failure mark
	}
	if s.st != stSearching {
		return
	}
	if s.candidate() == 0 {
		s.complete(now)
	}
}

// OnProbeLost records that the probe of the given size was declared lost.
// Only the outstanding probe is taken into account.
func (s *Search) OnProbeLost(size int, now time.Time) {
	if !s.outstanding || size != s.outSize {
		return
	}
	s.lose(size, now)
}

func (s *Search) lose(size int, now time.Time) {
	s.outstanding = false
	s.lost++
	if s.outStale || s.st != stSearching || size <= s.size {
		return
	}
	s.attempts++
	if s.attempts < s.cfg.MaxProbes {
		return // retry the same size on the next NextProbe
	}
	s.attempts = 0
	if s.hi == 0 || size < s.hi {
		s.hi = size
	}
	if s.candidate() == 0 {
		s.complete(now)
	}
}

// OnLargeLoss reports black-hole suspicion: data datagrams larger than Base
// were lost while smaller ones were acknowledged. Reports within
// RestartHoldoff of the last acted-on report are only counted. Otherwise,
// with Size() > Base, Size() falls back to Base and the search restarts from
// state "base"; with Size() already Base the report counts towards the
// error state (MaxProbes such reports).
func (s *Search) OnLargeLoss(now time.Time) {
	s.largeLosses++
	if s.actedLarge && now.Sub(s.lastLarge) < s.cfg.RestartHoldoff {
		return
	}
	s.actedLarge = true
	s.lastLarge = now
	if s.size > s.cfg.Base {
		s.restarts++
		s.size = s.cfg.Base
		s.st = stBase
		s.hi = 0
		s.attempts = 0
		s.outStale = s.outstanding
		s.timedOut = 0
		s.baseLarge = 0
		return
	}
	s.baseLarge++
	if s.baseLarge >= s.cfg.MaxProbes {
		s.st = stError
		s.outStale = s.outstanding
		s.timedOut = 0
		s.attempts = 0
		s.raiseAt = now.Add(s.cfg.RaiseInterval)
	}
}
