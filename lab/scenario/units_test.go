package scenario

import (
	"math"
	"strings"
	"testing"
)

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Rate
		str  string
	}{
		{"10mbit", 10_000_000, "10Mbit/s"},
		{"10Mbit", 10_000_000, "10Mbit/s"},
		{"10 Mbit/s", 10_000_000, "10Mbit/s"},
		{"1gbit", 1_000_000_000, "1Gbit/s"},
		{"2.5mbit", 2_500_000, "2.5Mbit/s"},
		{"500kbit", 500_000, "500kbit/s"},
		{"8000bit", 8_000, "8kbit/s"},
		{"unlimited", 0, "unlimited"},
	} {
		got, err := ParseRate(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
		if got.String() != tc.str {
			t.Errorf("Rate(%d).String() = %q, want %q", got, got.String(), tc.str)
		}
	}
	for _, tc := range []struct{ in, msg string }{
		{"10", `"10" has no unit (e.g. "10mbit")`},
		{"10mbps", `"10mbps" is ambiguous (tc reads "mbps" as bytes per second); write bits, e.g. "10mbit"`},
		{"10MB", `"10MB" is ambiguous (tc reads "mb" as bytes per second); write bits, e.g. "10mbit"`},
		{"10furlong", `"10furlong" has unknown unit "furlong" (valid: bit, kbit, mbit, gbit)`},
		{"fast", `"fast" is not a rate (e.g. "10mbit", "1gbit", "500kbit")`},
		{"1kbit", `"1kbit" out of range (8kbit/s..100Gbit/s; omit the key or write "unlimited" for an unshaped link)`},
		{"1.2.3mbit", `"1.2.3mbit" is not a rate`},
	} {
		_, err := ParseRate(tc.in)
		if err == nil || err.Error() != tc.msg {
			t.Errorf("ParseRate(%q) error = %v, want %s", tc.in, err, tc.msg)
		}
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"16MiB", 16777216}, {"16mib", 16777216}, {"16MB", 16000000}, {"500kB", 500000},
		{"4KiB", 4096}, {"1GiB", 1073741824}, {"1.5MiB", 1572864}, {"100B", 100},
	} {
		got, err := ParseSize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"16", "16 MiBs", "big", "0B", "65GiB"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
	for n, want := range map[int64]string{16777216: "16MiB", 4096: "4KiB", 1 << 30: "1GiB", 1000: "1000B", 1572864: "1536KiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseLoss(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Loss
		str  string
	}{
		{"none", Loss{}, "none"},
		{"", Loss{}, "none"},
		{"0%", Loss{}, "none"},
		{"1%", Loss{Model: LossUniform, Percent: 1}, "random 1%"},
		{"0.1", Loss{Model: LossUniform, Percent: 0.1}, "random 0.1%"},
		{"random 2.5%", Loss{Model: LossUniform, Percent: 2.5}, "random 2.5%"},
		{"gemodel 1% 75% 50% 0.5%", Loss{Model: LossGE, P: 1, R: 75, OneMinusH: 50, OneMinusK: 0.5}, "gemodel 1% 75% 50% 0.5%"},
		{"GEMODEL 1 75 50 0.5", Loss{Model: LossGE, P: 1, R: 75, OneMinusH: 50, OneMinusK: 0.5}, "gemodel 1% 75% 50% 0.5%"},
		// netem's defaults for the parameters left out: r = 100%-p,
		// 1-h = 100%, 1-k = 0%.
		{"gemodel 2%", Loss{Model: LossGE, P: 2, R: 98, OneMinusH: 100, OneMinusK: 0}, "gemodel 2% 98% 100% 0%"},
		{"gemodel 2% 30%", Loss{Model: LossGE, P: 2, R: 30, OneMinusH: 100, OneMinusK: 0}, "gemodel 2% 30% 100% 0%"},
		{"gemodel 2% 30% 40%", Loss{Model: LossGE, P: 2, R: 30, OneMinusH: 40, OneMinusK: 0}, "gemodel 2% 30% 40% 0%"},
	} {
		got, err := ParseLoss(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseLoss(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		if got.String() != tc.str {
			t.Errorf("ParseLoss(%q).String() = %q, want %q", tc.in, got.String(), tc.str)
		}
		back, err := ParseLoss(got.String())
		if err != nil || back != got {
			t.Errorf("round trip of %q: %+v, %v", got.String(), back, err)
		}
	}
	for _, tc := range []struct{ in, msg string }{
		{"120%", `"120%" is outside 0%..100%`},
		{"-1%", `"-1%" is outside 0%..100%`},
		{"random", `"random": random takes one percentage (e.g. "random 1%")`},
		{"random 1% 2%", `"random 1% 2%": random takes one percentage (e.g. "random 1%")`},
		{"gemodel", `"gemodel": gemodel takes 1 to 4 percentages: p [r [1-h [1-k]]]`},
		{"gemodel 1% 2% 3% 4% 5%", `"gemodel 1% 2% 3% 4% 5%": gemodel takes 1 to 4 percentages: p [r [1-h [1-k]]]`},
		{"gemodel 1% x", `"gemodel 1% x": gemodel r: "x" is not a percentage`},
		{"gemodel 1% 75% 150%", `"gemodel 1% 75% 150%": gemodel 1-h: "150%" is outside 0%..100%`},
		{"nan%", `"nan%" is not a loss model (e.g. "none", "1%", "random 1%", "gemodel 1% 75% 50% 0.5%")`},
		{"bursty", `"bursty" is not a loss model (e.g. "none", "1%", "random 1%", "gemodel 1% 75% 50% 0.5%")`},
	} {
		_, err := ParseLoss(tc.in)
		if err == nil || err.Error() != tc.msg {
			t.Errorf("ParseLoss(%q) error = %v, want %s", tc.in, err, tc.msg)
		}
	}
}

// TestMeanLoss checks the stationary loss against hand-computed values for
// Table 1 of the paper: p = 1%, r = 75%, 1-h = 50%, so π_bad = 1/76 and
// loss = (75/76)(1-k) + (1/76)(0.5).
func TestMeanLoss(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
	}{
		{"gemodel 1% 75% 50% 0%", 0.00657895},
		{"gemodel 1% 75% 50% 0.5%", 0.01151316},
		{"gemodel 1% 75% 50% 1%", 0.01644737},
		{"gemodel 1% 75% 50% 3%", 0.03618421},
		{"gemodel 2%", 0.02},            // Bernoulli: p alone
		{"gemodel 0% 0% 100% 4%", 0.04}, // never leaves the good state
		{"random 3%", 0.03},
		{"none", 0},
	} {
		l, err := ParseLoss(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.MeanLoss(); math.Abs(got-tc.want) > 5e-9 {
			t.Errorf("MeanLoss(%s) = %.8f, want %.8f", tc.in, got, tc.want)
		}
	}
	if l, _ := ParseLoss("gemodel 1% 75% 0% 0%"); !l.IsZero() {
		t.Errorf("a chain that drops in neither state is not IsZero")
	}
}

func TestTextMarshaling(t *testing.T) {
	var l Loss
	if err := l.UnmarshalText([]byte("gemodel 1% 75% 50% 3%")); err != nil || l.OneMinusK != 3 {
		t.Errorf("UnmarshalText: %+v, %v", l, err)
	}
	b, _ := l.MarshalText()
	if string(b) != "gemodel 1% 75% 50% 3%" {
		t.Errorf("MarshalText = %q", b)
	}
	var r Rate
	if err := r.UnmarshalText([]byte("10mbit")); err != nil || r != 10*Mbit {
		t.Errorf("Rate.UnmarshalText: %v, %v", r, err)
	}
	if err := r.UnmarshalText([]byte("10")); err == nil || !strings.Contains(err.Error(), "no unit") {
		t.Errorf("Rate.UnmarshalText accepted a bare number: %v", err)
	}
}
