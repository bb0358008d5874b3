package linkemu

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// TraceMTU is the bytes one delivery opportunity of a trace carries, as in
// Mahimahi's mm-link.
const TraceMTU = 1504

// Trace is a Mahimahi link trace: opportunity times (ms) over one period.
// Each time is one delivery opportunity of up to TraceMTU bytes leaving the
// bottleneck; several equal times are several opportunities in that
// millisecond. The trace repeats forever, shifted by its last time (the
// period), so opportunity g of the endless trace is at
// (g / n)·period + ms[g % n] for n opportunities a period: the times stay
// non-decreasing across the wrap, and an opportunity at the period's end
// and one at 0 of the next repetition fall in the same millisecond. A Trace
// is immutable: directions and links may share one.
type Trace struct {
	ms     []uint32 // non-decreasing, last = period in ms > 0
	period time.Duration
}

// ParseTrace reads Mahimahi's text format: one time in ms per line,
// non-decreasing, ≥ 0, the last > 0. Blank lines and lines starting with
// '#' are skipped (Mahimahi has no comments; they help name a trace's
// origin). Errors name the 1-based line.
func ParseTrace(r io.Reader) (*Trace, error) {
	t, err := parseTrace(r)
	if err != nil {
		return nil, fmt.Errorf("linkemu: trace: %w", err)
	}
	return t, nil
}

// ReadTraceFile is ParseTrace on the file at path.
func ReadTraceFile(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("linkemu: trace: %w", err)
	}
	defer f.Close()
	t, err := parseTrace(f)
	if err != nil {
		return nil, fmt.Errorf("linkemu: trace %s: %w", path, err)
	}
	return t, nil
}

func parseTrace(r io.Reader) (*Trace, error) {
	var ms []uint32
	var lines []int // of each time in ms, to name them in errors
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		v, err := strconv.ParseUint(s, 10, 32)
		switch {
		case errors.Is(err, strconv.ErrRange):
			return nil, fmt.Errorf("line %d: time %s ms out of range (at most %d)", n, s, uint32(1<<32-1))
		case err != nil && s[0] == '-':
			return nil, fmt.Errorf("line %d: negative time %s", n, s)
		case err != nil:
			return nil, fmt.Errorf("line %d: %q is not a number of milliseconds", n, s)
		}
		ms = append(ms, uint32(v))
		lines = append(lines, n)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return newTrace(ms, func(i int) string { return fmt.Sprintf("line %d", lines[i]) })
}

// NewTrace returns the trace of these opportunity times (ms), validated as
// ParseTrace does; errors name the 0-based index. ms is copied.
func NewTrace(ms []uint32) (*Trace, error) {
	t, err := newTrace(slices.Clone(ms), func(i int) string { return fmt.Sprintf("index %d", i) })
	if err != nil {
		return nil, fmt.Errorf("linkemu: trace: %w", err)
	}
	return t, nil
}

// newTrace validates ms, naming entry i with where(i), and takes it.
func newTrace(ms []uint32, where func(i int) string) (*Trace, error) {
	if len(ms) == 0 {
		return nil, errors.New("empty: no opportunity times")
	}
	for i := 1; i < len(ms); i++ {
		if ms[i] < ms[i-1] {
			return nil, fmt.Errorf("%s: time %d before %d on %s", where(i), ms[i], ms[i-1], where(i-1))
		}
	}
	last := len(ms) - 1
	if ms[last] == 0 {
		return nil, fmt.Errorf("%s: last time is 0: the period (the last time) must be > 0", where(last))
	}
	return &Trace{ms: ms, period: time.Duration(ms[last]) * time.Millisecond}, nil
}

// Period is the time after which the trace repeats (its last time).
func (t *Trace) Period() time.Duration { return t.period }

// Opportunities is how many delivery opportunities one period holds.
func (t *Trace) Opportunities() int { return len(t.ms) }

// WriteTo writes the trace in Mahimahi's format, one time per line: what
// ParseTrace reads back into the same trace.
func (t *Trace) WriteTo(w io.Writer) (int64, error) {
	var total int64
	buf := make([]byte, 0, 64<<10)
	for i, v := range t.ms {
		buf = strconv.AppendUint(buf, uint64(v), 10)
		buf = append(buf, '\n')
		if len(buf) > cap(buf)-16 || i == len(t.ms)-1 {
			n, err := w.Write(buf)
			total += int64(n)
			if err != nil {
				return total, err
			}
			buf = buf[:0]
		}
	}
	return total, nil
}

// OfferedBytes is what the opportunities in [0, d) of a trace (re)started
// at 0 carry: their number × TraceMTU, repetitions included.
func (t *Trace) OfferedBytes(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return t.firstAtOrAfter(d) * TraceMTU
}

// MeanRate is the trace's capacity in bit/s, over one period.
func (t *Trace) MeanRate() float64 {
	return float64(len(t.ms)) * TraceMTU * 8 / t.period.Seconds()
}

// at is the time of opportunity g, counted from the start.
func (t *Trace) at(g uint64) time.Duration {
	n := uint64(len(t.ms))
	return time.Duration(g/n)*t.period + time.Duration(t.ms[g%n])*time.Millisecond
}

// firstAtOrAfter is the index of the first opportunity at or after rel ≥ 0,
// which is also how many come before rel.
func (t *Trace) firstAtOrAfter(rel time.Duration) uint64 {
	k, within := rel/t.period, rel%t.period
	if within == 0 && k > 0 {
		// The previous repetition's opportunities at its last time are at
		// rel too: search them there.
		k, within = k-1, t.period
	}
	// Opportunities at whole ms: the first at or after within is the
	// first at or after within rounded up to a ms. It exists, as the last
	// time is the period and within ≤ period.
	target := uint32((within + time.Millisecond - 1) / time.Millisecond)
	i, _ := slices.BinarySearch(t.ms, target)
	return uint64(k)*uint64(len(t.ms)) + uint64(i)
}

// NewTraceSerializer returns an idle serializer whose capacity is trace t,
// started at time 0 of the serializer's timeline; the limits are as for
// NewSerializer.
func NewTraceSerializer(t *Trace, limitBytes, limitPackets int) *Serializer {
	s := NewSerializer(0, limitBytes, limitPackets)
	s.trace = t
	return s
}

// restartTrace makes now time 0 of the trace: the cursor goes back to its
// first opportunity. Frames admitted before keep their departures (and
// their queue space until then).
func (s *Serializer) restartTrace(now time.Duration) {
	s.origin, s.opp, s.used = now, 0, 0
}

// traceDepart moves the cursor past a frame of size bytes arriving at now
// and returns when its last byte leaves. The FIFO makes this exact at
// admission: the frame's bytes follow the previous frame's in the same
// opportunities, unless the cursor's opportunity came before the frame
// did, in which case its rest and every opportunity until the frame's
// arrival found the queue empty and are lost.
func (s *Serializer) traceDepart(now time.Duration, size int) time.Duration {
	t := s.trace
	if first := t.firstAtOrAfter(max(now-s.origin, 0)); s.opp < first {
		s.opp, s.used = first, 0
	}
	end := uint64(s.used) + uint64(max(size, 1)) // from the start of s.opp to the frame's last byte
	k := (end - 1) / TraceMTU                    // opportunities after s.opp holding its last byte
	last := s.opp + k
	if rest := end - k*TraceMTU; rest == TraceMTU {
		s.opp, s.used = last+1, 0
	} else {
		s.opp, s.used = last, int(rest)
	}
	return s.origin + t.at(last)
}
