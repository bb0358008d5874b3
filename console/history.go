package console

import (
	"math"
	"strconv"
)

// historyLen is how many one-second samples a path's history holds: the
// charts show the last ten minutes.
const historyLen = 600

// ring is one path's history: a sample a second for the last historyLen
// seconds, kept as three arrays of float32 (7.2 KB a path, 720 KB for 100
// watched paths). A second without a sample (the sampler was late, the path
// was new) holds NaN, which the page draws as a gap.
type ring struct {
	// first and last are the Unix seconds of the oldest and the newest
	// sample; last is 0 while the ring is empty.
	first, last int64
	rx, tx, rtt [historyLen]float32
}

// put records the sample of second sec: rx and tx in bits per second and the
// smoothed RTT in milliseconds (NaN: not known). A second already recorded is
// overwritten; one before it (the clock stepped back) starts the history anew.
func (r *ring) put(sec int64, rx, tx, rtt float32) {
	switch {
	case r.last == 0 || sec < r.last || sec-r.last >= historyLen:
		r.first = sec
	case sec > r.last:
		// Seconds skipped since the last sample are gaps.
		for s := r.last + 1; s < sec; s++ {
			r.set(s, nan, nan, nan)
		}
		if sec-r.first >= historyLen {
			r.first = sec - historyLen + 1
		}
	}
	r.last = sec
	r.set(sec, rx, tx, rtt)
}

var nan = float32(math.NaN())

func (r *ring) set(sec int64, rx, tx, rtt float32) {
	i := int(sec % historyLen)
	r.rx[i], r.tx[i], r.rtt[i] = rx, tx, rtt
}

// since returns the first second after the given one that the ring holds
// and the samples from there to r.last (empty when there are none).
func (r *ring) since(after int64) (from int64, rx, tx, rtt []float32) {
	if r.last == 0 || after >= r.last {
		return 0, nil, nil, nil
	}
	from = max(after+1, r.first)
	n := int(r.last - from + 1)
	rx, tx, rtt = make([]float32, n), make([]float32, n), make([]float32, n)
	for k := range n {
		i := int((from + int64(k)) % historyLen)
		rx[k], tx[k], rtt[k] = r.rx[i], r.tx[i], r.rtt[i]
	}
	return from, rx, tx, rtt
}

// series is a history in JSON: numbers with five significant digits (the
// charts need no more) and null for a gap, which encoding/json cannot write.
type series []float32

func (s series) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+8*len(s))
	b = append(b, '[')
	for i, v := range s {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			b = append(b, "null"...)
		} else {
			b = strconv.AppendFloat(b, float64(v), 'g', 5, 32)
		}
	}
	return append(b, ']'), nil
}
