// Package budget meters the bytes a path carries against a data allowance per
// calendar period ("10GiB/month"), for metered links such as LTE: once a path has
// used its allowance, it becomes backup-only until the period ends.
package budget

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Period is the span an allowance is for.
type Period int

const (
	Day Period = iota + 1
	Week
	Month
)

var periodNames = map[string]Period{"day": Day, "week": Week, "month": Month}

func (p Period) String() string {
	for n, v := range periodNames {
		if v == p {
			return n
		}
	}
	return "?"
}

// Limit is an allowance: Bytes per Period. The zero Limit means none.
type Limit struct {
	Bytes  uint64
	Period Period
}

// IsZero reports whether there is no allowance (unmetered).
func (l Limit) IsZero() bool { return l.Bytes == 0 }

func (l Limit) String() string {
	if l.IsZero() {
		return ""
	}
	return formatBytes(l.Bytes) + "/" + l.Period.String()
}

var units = []struct {
	suffix string
	mult   uint64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}, {"B", 1},
}

// Parse reads "SIZE/PERIOD", e.g. "10GiB/month", "500MB/day", "2TB/week".
func Parse(s string) (Limit, error) {
	size, per, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Limit{}, errors.New(`want SIZE/PERIOD, e.g. "10GiB/month"`)
	}
	period, ok := periodNames[strings.ToLower(strings.TrimSpace(per))]
	if !ok {
		return Limit{}, fmt.Errorf("period %q: want day, week or month", per)
	}
	size = strings.TrimSpace(size)
	for _, u := range units {
		num, found := strings.CutSuffix(size, u.suffix)
		if !found {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || v <= 0 || v*float64(u.mult) >= 1<<63 {
			return Limit{}, fmt.Errorf("size %q: want a positive number with a unit (B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)", size)
		}
		return Limit{Bytes: uint64(v * float64(u.mult)), Period: period}, nil
	}
	return Limit{}, fmt.Errorf("size %q: want a unit (B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)", size)
}

func formatBytes(n uint64) string {
	for _, u := range units[:4] {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatUint(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatUint(n, 10) + "B"
}

// Start returns the start of the period that contains t, in t's location: midnight,
// Monday midnight, or the first of the month at midnight.
func (p Period) Start(t time.Time) time.Time {
	y, m, d := t.Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, t.Location())
	switch p {
	case Week:
		return day.AddDate(0, 0, -((int(day.Weekday()) + 6) % 7))
	case Month:
		return time.Date(y, m, 1, 0, 0, 0, 0, t.Location())
	}
	return day
}

// Meter counts the bytes of one period against a Limit.
type Meter struct {
	Limit Limit
	Used  uint64
	Since time.Time // start of the period Used counts
}

// Add counts n bytes at now, starting a new period first when now is past the
// current one.
func (m *Meter) Add(n uint64, now time.Time) {
	m.roll(now)
	m.Used += n
}

// Exceeded reports whether the allowance of the current period is used up.
func (m *Meter) Exceeded(now time.Time) bool {
	if m.Limit.IsZero() {
		return false
	}
	m.roll(now)
	return m.Used >= m.Limit.Bytes
}

func (m *Meter) roll(now time.Time) {
	if m.Limit.IsZero() {
		return
	}
	if start := m.Limit.Period.Start(now); !start.Equal(m.Since) {
		if m.Since.IsZero() || start.After(m.Since) {
			m.Used, m.Since = 0, start
		}
	}
}
