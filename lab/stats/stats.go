// Package stats summarizes repeated measurements the way the paper reports
// them: the mean of N goodput samples with a 95% Student-t confidence
// interval, plus the sample standard deviation and the median, which this
// shared, noisy machine makes worth quoting beside the mean.
//
// Undefined values are NaN rather than 0: one sample has no spread, and a
// zero-width interval would claim a certainty the data does not have.
package stats

import (
	"encoding/json"
	"math"
	"slices"
	"time"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Mean is the arithmetic mean; NaN (0/0) for no samples.
func Mean(xs []float64) float64 { return stat.Mean(xs, nil) }

// StdDev is the sample standard deviation (divisor n-1); NaN (0/0) for
// fewer than two samples.
func StdDev(xs []float64) float64 { return stat.StdDev(xs, nil) }

// TQuantile is the p-quantile of Student's t distribution with df degrees
// of freedom.
func TQuantile(p, df float64) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(p)
}

// CI95 is the half-width of the two-sided 95% Student-t confidence
// interval for the mean: t(0.975, n-1) · s / √n; NaN for fewer than two
// samples.
func CI95(xs []float64) float64 {
	n := float64(len(xs))
	if n < 2 {
		return math.NaN()
	}
	return TQuantile(0.975, n-1) * StdDev(xs) / math.Sqrt(n)
}

// Jain is Jain's fairness index of the shares xs (e.g. goodputs):
// (Σx)² / (n·Σx²), 1 when all are equal, 1/n when one takes everything;
// NaN (0/0) for no shares or all zero.
func Jain(xs ...float64) float64 {
	var sum, squares float64
	for _, x := range xs {
		sum, squares = sum+x, squares+x*x
	}
	return sum * sum / (float64(len(xs)) * squares)
}

// Median is the middle sample, or the mean of the two middle ones; NaN for
// no samples. xs is not reordered.
func Median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Percentile is the q-th percentile (0 ≤ q ≤ 100) of xs, interpolated
// linearly between the two nearest ranks (rank q/100·(n−1), as numpy's
// default and a spreadsheet's PERCENTILE); NaN for no samples. xs is not
// reordered.
func Percentile(xs []float64, q float64) float64 {
	n := len(xs)
	if n == 0 || math.IsNaN(q) || q < 0 || q > 100 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	r := q / 100 * float64(n-1)
	lo := int(math.Floor(r))
	if lo >= n-1 {
		return s[n-1]
	}
	return s[lo] + (r-float64(lo))*(s[lo+1]-s[lo])
}

// Summary describes one point's samples.
type Summary struct {
	N      int     `json:"n"`
	Mean   float64 `json:"mean"`
	StdDev float64 `json:"std_dev"`
	// CI95 is the half-width of the 95% interval: the mean is reported
	// as Mean ± CI95.
	CI95   float64 `json:"ci95"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// Summarize computes every field of Summary; those undefined for the
// number of samples are NaN.
func Summarize(xs []float64) Summary {
	s := Summary{
		N:      len(xs),
		Mean:   Mean(xs),
		StdDev: StdDev(xs),
		CI95:   CI95(xs),
		Median: Median(xs),
		Min:    math.NaN(),
		Max:    math.NaN(),
	}
	if len(xs) > 0 {
		s.Min, s.Max = slices.Min(xs), slices.Max(xs)
	}
	return s
}

// Num is a float64 that travels in JSON as null when it is NaN or ±Inf
// (undefined, not applicable or not measured), which JSON numbers cannot
// carry.
type Num float64

// NaN is the Num for "none".
func NaN() Num { return Num(math.NaN()) }

// Valid reports whether n holds a number.
func (n Num) Valid() bool { return !math.IsNaN(float64(n)) && !math.IsInf(float64(n), 0) }

func (n Num) MarshalJSON() ([]byte, error) {
	if !n.Valid() {
		return []byte("null"), nil
	}
	return json.Marshal(float64(n))
}

func (n *Num) UnmarshalJSON(b []byte) error {
	f := math.NaN() // what null leaves
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Num(f)
	return nil
}

// summaryJSON is a Summary as JSON, its undefined fields null.
type summaryJSON struct {
	N      int `json:"n"`
	Mean   Num `json:"mean"`
	StdDev Num `json:"std_dev"`
	CI95   Num `json:"ci95"`
	Median Num `json:"median"`
	Min    Num `json:"min"`
	Max    Num `json:"max"`
}

func (s Summary) MarshalJSON() ([]byte, error) {
	return json.Marshal(summaryJSON{s.N, Num(s.Mean), Num(s.StdDev), Num(s.CI95), Num(s.Median), Num(s.Min), Num(s.Max)})
}

// UnmarshalJSON reads what MarshalJSON writes; a field that is null or
// missing is NaN.
func (s *Summary) UnmarshalJSON(b []byte) error {
	v := summaryJSON{0, NaN(), NaN(), NaN(), NaN(), NaN(), NaN()}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = Summary{v.N, float64(v.Mean), float64(v.StdDev), float64(v.CI95), float64(v.Median), float64(v.Min), float64(v.Max)}
	return nil
}

// Ms is d in milliseconds, the unit of every time the lab reports.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
