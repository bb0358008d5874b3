package linktrace

import (
	"math"
	"time"

	"github.com/braid-vpn/braid/lab/linkemu"
)

// OutageThreshold is the rate below which Stats counts a window as an
// outage: well under the 0.5 Mbit/s floor of the fading profile (so one
// opportunity less in a window at the floor is not an outage) and above
// its 0.1 Mbit/s outages, so a window counts iff mostly in an outage.
const OutageThreshold = 0.3 * mbit

// TraceStats describes a trace's rate over consecutive windows of one
// period (the last partial window left out). Rates are in bit/s of
// opportunity bytes (× TraceMTU).
type TraceStats struct {
	Window         time.Duration
	Rates          []float64 // of each window
	Mean, Min, Max float64   // of Rates
	CV             float64   // standard deviation / mean of Rates
	Below          float64   // fraction of windows below OutageThreshold
	Outages        []Run     // maximal runs of windows below OutageThreshold
}

// Run is a stretch of consecutive windows.
type Run struct{ Start, Length time.Duration }

// Stats measures t over windows of the given length (> 0; none if the
// period is shorter).
func Stats(t *linkemu.Trace, window time.Duration) TraceStats {
	st := TraceStats{Window: window}
	if window <= 0 {
		return st
	}
	n := int(t.Period() / window)
	st.Rates = make([]float64, n)
	var sum, sq float64
	st.Min = math.Inf(1)
	run := -1 // first window of the current outage run
	for i := range n {
		from, to := time.Duration(i)*window, time.Duration(i+1)*window
		r := float64(t.OfferedBytes(to)-t.OfferedBytes(from)) * 8 / window.Seconds()
		st.Rates[i] = r
		sum += r
		sq += r * r
		st.Min, st.Max = min(st.Min, r), max(st.Max, r)
		if r < OutageThreshold {
			st.Below++
			if run < 0 {
				run = i
			}
		}
		if run >= 0 && (r >= OutageThreshold || i == n-1) {
			end := i
			if r < OutageThreshold {
				end = i + 1
			}
			st.Outages = append(st.Outages, Run{time.Duration(run) * window, time.Duration(end-run) * window})
			run = -1
		}
	}
	if n == 0 {
		st.Min = 0
		return st
	}
	st.Mean = sum / float64(n)
	st.Below /= float64(n)
	if st.Mean > 0 {
		st.CV = math.Sqrt(max(sq/float64(n)-st.Mean*st.Mean, 0)) / st.Mean
	}
	return st
}
