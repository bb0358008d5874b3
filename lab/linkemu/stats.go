package linkemu

import (
	"math/bits"
	"time"
)

// Direction names one direction of a Link.
type Direction uint8

const (
	AtoB Direction = iota // frames received on A, sent out of B
	BtoA                  // frames received on B, sent out of A
)

func (d Direction) String() string { return [2]string{"A→B", "B→A"}[min(d, BtoA)] }

// Stats counts what one direction did since Start.
type Stats struct {
	FramesIn, BytesIn         uint64 // frames read from the input interface
	Forwarded, BytesForwarded uint64 // frames written to the output interface
	DroppedLoss               uint64 // lost by the loss model
	DroppedQueue              uint64 // tail-dropped by the serialization queue
	DroppedBurst              uint64 // lost in a loss burst of the Shape's Schedule
	DroppedOversize           uint64 // larger than the frame buffer: an offload (GSO/GRO) is still on somewhere
	DroppedNoBuffer           uint64 // DefaultMaxInFlight frames already held
	SendErrors                uint64 // write to the output interface failed (link down, …)
	Queued                    int    // frames held right now (queue and delay line)

	// Delay is each forwarded frame's time in the emulator, from its read's
	// return to its write's start; Lateness how much later than scheduled
	// its write began: the emulator's timing error, included in Delay.
	Delay, Lateness DelayStats
}

// DelayStats summarises added delays. Percentiles are the midpoints of
// log-linear histogram buckets, within 0.4% of the true value; the rest is
// exact.
type DelayStats struct {
	Count                              uint64
	Sum, Mean, Min, Max, P50, P90, P99 time.Duration
}

// histogram is a fixed-size log-linear histogram of non-negative
// nanosecond values: exact below 128 ns, then 128 sub-buckets per octave.
type histogram struct {
	counts        [histBuckets]uint64
	n             uint64
	sum, min, max int64
}

const (
	histSub     = 128
	histSubBits = 7
	histBuckets = histSub + (64-histSubBits)*histSub
)

func histIndex(v int64) int {
	if v < histSub {
		return int(max(v, 0))
	}
	shift := bits.Len64(uint64(v)) - histSubBits - 1
	return shift*histSub + int(uint64(v)>>uint(shift))
}

// histRange is the closed range of values bucket i holds.
func histRange(i int) (lo, hi int64) {
	if i < histSub {
		return int64(i), int64(i)
	}
	shift := uint((i - histSub) / histSub)
	lo = int64((i-histSub)%histSub+histSub) << shift
	return lo, lo + 1<<shift - 1
}

func (h *histogram) add(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[histIndex(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	h.max = max(h.max, v)
	h.n++
	h.sum += v
}

// quantile returns the midpoint of the bucket holding the q-th value,
// clamped to the observed range.
func (h *histogram) quantile(q float64) time.Duration {
	rank := uint64(q*float64(h.n-1)) + 1
	var cum uint64
	for i, c := range h.counts {
		if cum += c; cum >= rank {
			lo, hi := histRange(i)
			return time.Duration(max(h.min, min(h.max, lo+(hi-lo)/2)))
		}
	}
	return time.Duration(h.max)
}

func (h *histogram) stats() DelayStats {
	if h.n == 0 {
		return DelayStats{}
	}
	return DelayStats{
		Count: h.n, Sum: time.Duration(h.sum), Mean: time.Duration(h.sum / int64(h.n)),
		Min: time.Duration(h.min), Max: time.Duration(h.max),
		P50: h.quantile(0.50), P90: h.quantile(0.90), P99: h.quantile(0.99),
	}
}
