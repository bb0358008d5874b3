package stats

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"
)

// Expected values are computed by hand from tabulated t quantiles:
// t(0.975, 1) = 12.706205, t(0.975, 2) = 4.302653, t(0.975, 7) = 2.364624,
// t(0.975, 19) = 2.093024, t(0.95, 2) = 2.919986.

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.7f, want %.7f", what, got, want)
	}
}

func TestTQuantile(t *testing.T) {
	for _, tc := range []struct{ p, df, want float64 }{
		{0.975, 1, 12.706205}, {0.975, 2, 4.302653}, {0.975, 7, 2.364624},
		{0.975, 19, 2.093024}, {0.95, 2, 2.919986}, {0.5, 5, 0},
	} {
		near(t, "TQuantile", TQuantile(tc.p, tc.df), tc.want, 5e-7)
	}
}

func TestThreeSamples(t *testing.T) {
	xs := []float64{9, 10, 11}
	near(t, "Mean", Mean(xs), 10, 1e-12)
	near(t, "StdDev", StdDev(xs), 1, 1e-12)
	// 4.302653 / √3
	near(t, "CI95", CI95(xs), 2.484138, 5e-7)
	near(t, "Median", Median(xs), 10, 0)
}

func TestTwoSamples(t *testing.T) {
	xs := []float64{1, 3}
	// s = √2, so the half-width is t(0.975, 1) · √2 / √2.
	near(t, "StdDev", StdDev(xs), math.Sqrt2, 1e-12)
	near(t, "CI95", CI95(xs), 12.706205, 5e-7)
	near(t, "Median", Median(xs), 2, 0)
}

func TestEightSamples(t *testing.T) {
	xs := []float64{9, 4, 2, 5, 4, 7, 4, 5}
	orig := slices.Clone(xs)
	near(t, "Mean", Mean(xs), 5, 1e-12)
	// Squared deviations 16+1+9+0+1+4+1+0 = 32; s = √(32/7).
	near(t, "StdDev", StdDev(xs), 2.138090, 5e-7)
	// 2.364624 · 2.138090 / √8
	near(t, "CI95", CI95(xs), 1.787488, 5e-7)
	// Sorted: 2 4 4 4 5 5 7 9; middle pair 4, 5.
	near(t, "Median", Median(xs), 4.5, 0)
	if !slices.Equal(xs, orig) {
		t.Errorf("Median reordered its input: %v", xs)
	}
}

// TestTwentySamples is the paper's N: samples 1..20 have mean 10.5 and
// s = √(665/19) = √35.
func TestTwentySamples(t *testing.T) {
	xs := make([]float64, 20)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	s := Summarize(xs)
	near(t, "Mean", s.Mean, 10.5, 1e-12)
	near(t, "StdDev", s.StdDev, math.Sqrt(35), 1e-12)
	// 2.093024 · √35 / √20
	near(t, "CI95", s.CI95, 2.7688105, 1e-6)
	near(t, "Median", s.Median, 10.5, 0)
	if s.N != 20 || s.Min != 1 || s.Max != 20 {
		t.Errorf("Summary = %+v", s)
	}
}

func TestTooFewSamples(t *testing.T) {
	one := Summarize([]float64{7})
	if one.N != 1 || one.Mean != 7 || one.Median != 7 || one.Min != 7 || one.Max != 7 {
		t.Errorf("one sample: %+v", one)
	}
	if !math.IsNaN(one.StdDev) || !math.IsNaN(one.CI95) {
		t.Errorf("one sample has a spread: %+v", one)
	}
	none := Summarize(nil)
	for name, v := range map[string]float64{"Mean": none.Mean, "StdDev": none.StdDev, "CI95": none.CI95, "Median": none.Median, "Min": none.Min, "Max": none.Max} {
		if !math.IsNaN(v) {
			t.Errorf("no samples: %s = %v, want NaN", name, v)
		}
	}
}

func TestJSON(t *testing.T) {
	b, err := json.Marshal(Summarize([]float64{7}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"n":1,"mean":7,"std_dev":null,"ci95":null,"median":7,"min":7,"max":7}`
	if string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
	var back Summary
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.N != 1 || back.Mean != 7 || !math.IsNaN(back.CI95) || !math.IsNaN(back.StdDev) {
		t.Errorf("round trip = %+v", back)
	}
	b, _ = json.Marshal(Summarize([]float64{9, 10, 11}))
	if err := json.Unmarshal(b, &back); err != nil || back.StdDev != 1 {
		t.Errorf("round trip of three samples: %+v, %v", back, err)
	}
	// An older file without a field has it undefined, not 0.
	back = Summary{}
	if err := json.Unmarshal([]byte(`{"n":2,"mean":3}`), &back); err != nil || back.Mean != 3 || !math.IsNaN(back.Median) {
		t.Errorf("missing fields: %+v, %v", back, err)
	}
}

func TestPercentile(t *testing.T) {
	xs := []float64{40, 10, 30, 20, 50}
	for _, c := range []struct{ q, want float64 }{{0, 10}, {50, 30}, {100, 50}, {25, 20}, {95, 48}, {99, 49.6}} {
		near(t, fmt.Sprintf("p%v", c.q), Percentile(xs, c.q), c.want, 1e-9)
	}
	if !math.IsNaN(Percentile(nil, 50)) || !math.IsNaN(Percentile(xs, 101)) {
		t.Error("percentile of nothing, or beyond 100, is not NaN")
	}
	if xs[0] != 40 {
		t.Error("Percentile reordered its input")
	}
}

// TestJain checks Jain's index against hand-computed values: equal shares
// give 1, one taking everything 1/n, and 6 vs 4 Mbit/s (the bar of
// 0.95 needs about 61/39 or better) (10)²/(2·52) = 0.9615.
func TestJain(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{5, 5}, 1},
		{[]float64{3, 3, 3}, 1},
		{[]float64{10, 0}, 0.5},
		{[]float64{7, 0, 0, 0}, 0.25},
		{[]float64{6, 4}, 100.0 / 104},
		{[]float64{1, 2, 3}, 36.0 / 42},
		{[]float64{8}, 1},
	} {
		near(t, fmt.Sprint("Jain", c.xs), Jain(c.xs...), c.want, 1e-12)
	}
	if j := Jain(6, 4); j < 0.95 || Jain(6.2, 3.8) > 0.95 {
		t.Errorf("Jain(6, 4) = %.4f, Jain(6.2, 3.8) = %.4f: the 0.95 bar lies between", j, Jain(6.2, 3.8))
	}
	for _, xs := range [][]float64{nil, {0, 0}} {
		if j := Jain(xs...); !math.IsNaN(j) {
			t.Errorf("Jain%v = %v, want NaN", xs, j)
		}
	}
}
