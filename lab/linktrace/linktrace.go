// Package linktrace generates link traces for lab/linkemu: a seeded
// Markov-modulated rate process (levels held for random times, outages as
// a second two-state chain on top) turned into Mahimahi delivery
// opportunities, plus, for satellite-like links, a delay schedule with a
// loss burst at every handover. Same profile, length and seed, same trace.
//
// Named profiles (ProfileByName; the Profile fields are documented below,
// a scenario may tune them):
//
//   - fixed: 20 Mbit/s constant (Rate; for tests).
//   - steady: a level uniform in Rate·[0.7, 1.3] (Rate 20 Mbit/s by
//     default), held uniformly 0.5–2 s, drawn anew independently of the
//     last: every window's rate lies within ±30 % of Rate.
//   - fading: a level log-uniform in [0.5, 30] Mbit/s, held uniformly
//     0.5–2 s; outages at 0.1 Mbit/s lasting uniformly 1–3 s, starting an
//     exponential time of mean 20 s after the last ended (one every 22 s on
//     average, about 9 % of the time).
//   - satellite: a level uniform in [50, 200] Mbit/s, held 15 s, changing at
//     each handover, every 15 s from the start. At the start and at each
//     handover the one-way delay becomes a new value drawn uniformly in
//     [10, 40] ms (the schedule's delay is the whole one-way delay, it
//     replaces Shape.Delay), and each handover after the start drops every
//     frame for a time drawn uniformly in [50, 200] ms. The start has no
//     burst: a download would begin with its handshake lost.
//
// From rate to opportunities: each millisecond m adds rate·1 ms / (1504·8
// bit) to a running count of opportunities, and its whole part is emitted
// at time m+1 ms, the fraction carried: the trace's mean is exact to one
// opportunity, and the opportunities lag the process by under a ms. Below about 0.1 Mbit/s opportunities are more than 100 ms
// apart (an outage). The trace's period is the length rounded up to a
// whole ms: if the rate process leaves the last millisecond without an
// opportunity, one is added there (at most one opportunity a period more
// than the process). A schedule has the same period, so it repeats with
// the trace.
package linktrace

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/braid-vpn/braid/lab/linkemu"
)

// Profile is a rate process with optional outages and handovers. Rates are
// in bit/s.
type Profile struct {
	Name string

	// Levels: the rate holds a level for a time uniform in [HoldMin,
	// HoldMax] (HoldMax 0: one level for the whole trace), then draws the
	// next independently of the last: uniform in Rate·[1-Spread, 1+Spread]
	// when MaxRate is 0, log-uniform in [MinRate, MaxRate] otherwise.
	Rate, Spread     float64
	MinRate, MaxRate float64
	HoldMin, HoldMax time.Duration

	// Outages: starting an exponential time of mean OutageEvery (0: no
	// outages) after the start or the end of the last one, the rate is
	// OutageRate for a time uniform in [OutageMin, OutageMax], whatever
	// the level underneath (which goes on changing).
	OutageEvery          time.Duration
	OutageMin, OutageMax time.Duration
	OutageRate           float64

	// Handovers: every Handover (0: none, no Schedule) from the start, the
	// one-way delay becomes a value uniform in [DelayMin, DelayMax], and
	// each handover but the one at the start drops every frame for a time
	// uniform in [BurstMin, BurstMax].
	Handover           time.Duration
	DelayMin, DelayMax time.Duration
	BurstMin, BurstMax time.Duration
}

const (
	mbit = 1e6
	ms   = time.Millisecond
)

var profiles = map[string]Profile{
	"fixed":  {Name: "fixed", Rate: 20 * mbit},
	"steady": {Name: "steady", Rate: 20 * mbit, Spread: 0.3, HoldMin: 500 * ms, HoldMax: 2 * time.Second},
	"fading": {Name: "fading", MinRate: 0.5 * mbit, MaxRate: 30 * mbit, HoldMin: 500 * ms, HoldMax: 2 * time.Second,
		OutageEvery: 20 * time.Second, OutageMin: time.Second, OutageMax: 3 * time.Second, OutageRate: 0.1 * mbit},
	"satellite": {Name: "satellite", Rate: 125 * mbit, Spread: 0.6, HoldMin: 15 * time.Second, HoldMax: 15 * time.Second,
		Handover: 15 * time.Second, DelayMin: 10 * ms, DelayMax: 40 * ms, BurstMin: 50 * ms, BurstMax: 200 * ms},
}

// ProfileByName returns a named profile (see the package documentation).
func ProfileByName(name string) (Profile, error) {
	if p, ok := profiles[name]; ok {
		return p, nil
	}
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	slices.Sort(names)
	return Profile{}, fmt.Errorf("linktrace: unknown profile %q (have %s)", name, strings.Join(names, ", "))
}

// Validate reports parameters that make no process.
func (p Profile) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("linktrace: profile %q: "+format, append([]any{p.Name}, a...)...)
	}
	for _, r := range []float64{p.Rate, p.MinRate, p.MaxRate, p.OutageRate, p.Spread} {
		if math.IsNaN(r) || math.IsInf(r, 0) || r < 0 {
			return bad("rates and spread must be finite and ≥ 0 (rate %v, %v–%v, outage %v, spread %v)", p.Rate, p.MinRate, p.MaxRate, p.OutageRate, p.Spread)
		}
	}
	switch {
	case p.Spread > 1:
		return bad("spread %v above 1 makes negative rates", p.Spread)
	case p.MaxRate > 0 && (p.MinRate <= 0 || p.MinRate > p.MaxRate):
		return bad("log-uniform levels need 0 < MinRate ≤ MaxRate (got %v, %v)", p.MinRate, p.MaxRate)
	case p.MaxRate == 0 && p.Rate == 0 && p.OutageEvery == 0:
		return bad("no rate: set Rate or MinRate and MaxRate")
	case p.HoldMax > 0 && (p.HoldMin < ms || p.HoldMin > p.HoldMax):
		return bad("holding times need 1 ms ≤ HoldMin ≤ HoldMax (got %v, %v)", p.HoldMin, p.HoldMax)
	case p.HoldMax < 0:
		return bad("negative holding time %v", p.HoldMax)
	case p.OutageEvery < 0 || p.OutageEvery > 0 && (p.OutageMin < ms || p.OutageMin > p.OutageMax):
		return bad("outages need OutageEvery ≥ 0 and 1 ms ≤ OutageMin ≤ OutageMax (got %v, %v, %v)", p.OutageEvery, p.OutageMin, p.OutageMax)
	case p.Handover < 0 || p.Handover > 0 && (p.Handover < ms || p.DelayMin < 0 || p.DelayMin > p.DelayMax || p.BurstMin < 0 || p.BurstMin > p.BurstMax || p.BurstMax > p.Handover):
		return bad("handovers need Handover ≥ 1 ms, 0 ≤ DelayMin ≤ DelayMax, 0 ≤ BurstMin ≤ BurstMax ≤ Handover (got %v, %v–%v, %v–%v)", p.Handover, p.DelayMin, p.DelayMax, p.BurstMin, p.BurstMax)
	}
	return nil
}

// Streams of the seed: the levels, outages and handovers draw apart, so
// tuning one does not move the others.
const (
	streamLevels   = 0x6c76 // "lv"
	streamOutages  = 0x6f75 // "ou"
	streamHandover = 0x686f // "ho"
)

// span is [from, to) in whole ms at one rate.
type span struct {
	from, to int64
	rate     float64
}

// uniformMs draws a whole number of ms, at least 1, uniformly in [lo, hi].
func uniformMs(r *rand.Rand, lo, hi time.Duration) int64 {
	return max(1, int64(math.Round((float64(lo)+r.Float64()*float64(hi-lo))/float64(ms))))
}

// levels is the level process over [0, n) ms.
func (p Profile) levels(n int64, seed uint64) []span {
	r := rand.New(rand.NewPCG(seed, streamLevels))
	var out []span
	for t := int64(0); t < n; {
		rate := p.Rate
		if p.MaxRate > 0 {
			rate = p.MinRate * math.Pow(p.MaxRate/p.MinRate, r.Float64())
		} else if p.Spread > 0 {
			rate *= 1 + p.Spread*(2*r.Float64()-1)
		}
		hold := n
		if p.HoldMax > 0 {
			hold = uniformMs(r, p.HoldMin, p.HoldMax)
		}
		out = append(out, span{t, min(t+hold, n), rate})
		t += hold
	}
	return out
}

// outages are the outage spans over [0, n) ms, at OutageRate.
func (p Profile) outages(n int64, seed uint64) []span {
	if p.OutageEvery == 0 {
		return nil
	}
	r := rand.New(rand.NewPCG(seed, streamOutages))
	up := func() int64 { return int64(math.Round(r.ExpFloat64() * float64(p.OutageEvery) / float64(ms))) }
	var out []span
	for t := up(); t < n; {
		d := uniformMs(r, p.OutageMin, p.OutageMax)
		out = append(out, span{t, min(t+d, n), p.OutageRate})
		t += d + up()
	}
	return out
}

// schedule is the handover schedule over [0, n) ms, nil without handovers.
func (p Profile) schedule(n int64, seed uint64) *linkemu.Schedule {
	if p.Handover == 0 {
		return nil
	}
	r := rand.New(rand.NewPCG(seed, streamHandover))
	period := time.Duration(n) * ms
	s := &linkemu.Schedule{Period: period}
	for at := time.Duration(0); at < period; at += p.Handover {
		st := linkemu.Step{At: at, Delay: p.DelayMin + time.Duration(r.Float64()*float64(p.DelayMax-p.DelayMin))}
		if at > 0 {
			st.DropFor = min(p.BurstMin+time.Duration(r.Float64()*float64(p.BurstMax-p.BurstMin)), period-at)
		}
		s.Steps = append(s.Steps, st)
	}
	return s
}

// Generate returns a trace of profile p whose period is length rounded up
// to a whole ms, and its schedule (nil when p has no handovers).
func Generate(p Profile, length time.Duration, seed uint64) (*linkemu.Trace, *linkemu.Schedule, error) {
	if err := p.Validate(); err != nil {
		return nil, nil, err
	}
	if length <= 0 || length > math.MaxUint32*ms {
		return nil, nil, fmt.Errorf("linktrace: length %v, want > 0 and at most 2³² ms", length)
	}
	n := int64((length + ms - 1) / ms)
	lv, out := p.levels(n, seed), p.outages(n, seed)
	perMs := 1e-3 / (linkemu.TraceMTU * 8) // opportunities per ms at 1 bit/s
	var expect float64
	for _, s := range lv {
		expect += s.rate * float64(s.to-s.from) * perMs
	}
	times := make([]uint32, 0, int(expect)+16)
	var acc float64 // opportunities owed, < 1 after each ms
	li, oi := 0, 0
	for m := int64(0); m < n; m++ {
		for lv[li].to <= m {
			li++
		}
		for oi < len(out) && out[oi].to <= m {
			oi++
		}
		rate := lv[li].rate
		if oi < len(out) && out[oi].from <= m {
			rate = out[oi].rate
		}
		acc += rate * perMs
		k := math.Floor(acc)
		acc -= k
		for range int(k) {
			times = append(times, uint32(m+1))
		}
	}
	if len(times) == 0 || int64(times[len(times)-1]) != n {
		times = append(times, uint32(n)) // the period is the last time
	}
	tr, err := linkemu.NewTrace(times)
	if err != nil {
		return nil, nil, fmt.Errorf("linktrace: %w", err) // a bug: the times are built valid
	}
	return tr, p.schedule(n, seed), nil
}

// WriteFile writes t to path in Mahimahi's format.
func WriteFile(path string, t *linkemu.Trace) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("linktrace: %w", err)
	}
	if _, err := t.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("linktrace: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("linktrace: write %s: %w", path, err)
	}
	return nil
}

// LevelMean is the mean of the profile's levels (bit/s), outages aside:
// Rate for uniform levels, (MaxRate−MinRate)/ln(MaxRate/MinRate) for
// log-uniform ones.
func (p Profile) LevelMean() float64 {
	if p.MaxRate == 0 {
		return p.Rate
	}
	if p.MaxRate == p.MinRate {
		return p.MaxRate
	}
	return (p.MaxRate - p.MinRate) / math.Log(p.MaxRate/p.MinRate)
}

// Scaled returns the profile with every rate (levels and outages)
// multiplied so that LevelMean is mean: "steady 10mbit" is steady around
// 10 Mbit/s, "fading 3mbit" fades over the same ratio of rates a level
// lower.
func (p Profile) Scaled(mean float64) Profile {
	if m := p.LevelMean(); m > 0 && mean > 0 {
		k := mean / m
		p.Rate, p.MinRate, p.MaxRate, p.OutageRate = p.Rate*k, p.MinRate*k, p.MaxRate*k, p.OutageRate*k
	}
	return p
}
