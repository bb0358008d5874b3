package table

import (
	"bytes"
	"math"
	"testing"

	"github.com/braid-vpn/braid/lab/stats"
)

// Columns line up on the widest cell, two spaces apart, whatever the
// cells' widths (the "—" and "±" are one column each, not their bytes).
func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	WriteText(&b, [][]string{
		{"case", "Mbit/s", "n"},
		{"kernel TCP", "9410", "5"},
		{"braid", "—", "12"},
		{"x", "1.00 ± 0.25", "1"},
	})
	want := "" +
		"case        Mbit/s       n\n" +
		"kernel TCP  9410         5\n" +
		"braid       —            12\n" +
		"x           1.00 ± 0.25  1\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestMarkdownWrite(t *testing.T) {
	rows := [][]string{{"case", "a|b"}, {"x|y", `already \| escaped`}}
	for _, tc := range []struct {
		name string
		m    Markdown
		want string
	}{
		{"escapes pipes", Markdown{First: "---", Others: "---:"},
			"| case | a\\|b |\n|---|---:|\n| x\\|y | already \\\\| escaped |\n"},
		{"escaped by the caller", Markdown{First: "---", Others: "--:", Escaped: true},
			"| case | a|b |\n|---|--:|\n| x|y | already \\| escaped |\n"},
	} {
		var b bytes.Buffer
		tc.m.Write(&b, rows)
		if b.String() != tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, b.String(), tc.want)
		}
	}
	var b bytes.Buffer
	Markdown{First: "---", Others: "---"}.Write(&b, [][]string{{"only"}})
	if want := "| only |\n|---|\n"; b.String() != want {
		t.Errorf("one column: got %q, want %q", b.String(), want)
	}
}

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"":          "",
		"plain":     "plain",
		"a|b":       `a\|b`,
		"|x||":      `\|x\|\|`,
		"no * here": "no * here", // markup is the caller's business
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNum(t *testing.T) {
	dash := Style{NaN: "—"}
	for _, tc := range []struct {
		st   Style
		x    float64
		prec int
		want string
	}{
		{dash, 3.14159, 2, "3.14"},
		{dash, 2.5, 0, "2"}, // round half to even, as strconv does
		{dash, math.NaN(), 2, "—"},
		{dash, math.Inf(1), 2, "—"},
		{dash, math.Inf(-1), 0, "—"},
		{CSV, math.NaN(), -1, ""},
		{CSV, 0.1, -1, "0.1"},
		{CSV, 1e21, -1, "1000000000000000000000"},
		{CSV, 1.0 / 3, 4, "0.3333"},
		{Style{NaN: "n/a"}, math.NaN(), 2, "n/a"},
	} {
		if got := tc.st.Num(tc.x, tc.prec); got != tc.want {
			t.Errorf("%+v.Num(%v, %d) = %q, want %q", tc.st, tc.x, tc.prec, got, tc.want)
		}
	}
}

func TestMeanCI(t *testing.T) {
	two := stats.Summarize([]float64{1, 3})
	one := stats.Summarize([]float64{2})
	none := stats.Summarize(nil)
	mesh := Style{NaN: "—", None: "—", BareMean: true}
	campaign := Style{NaN: "n/a", None: "–"}
	goodput := Style{NaN: "n/a"}
	for _, tc := range []struct {
		name string
		st   Style
		s    *stats.Summary
		want string
	}{
		{"mesh, two", mesh, &two, "2.00 ± 12.71"},
		{"mesh, one: the mean alone", mesh, &one, "2.00"},
		{"mesh, none", mesh, &none, "—"},
		{"mesh, nil", mesh, nil, "—"},
		{"campaign, one: n/a interval", campaign, &one, "2.00 ± n/a"},
		{"campaign, none", campaign, &none, "–"},
		{"campaign, nil", campaign, nil, "–"},
		{"without None, none is its NaNs", goodput, &none, "n/a ± n/a"},
	} {
		if got := tc.st.MeanCI(tc.s, 2); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestSize(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		sep  string
		want string
	}{
		{16 << 20, "", "16MiB"},
		{16 << 20, " ", "16 MiB"},
		{1 << 30, "", "1GiB"},
		{1536 << 10, "", "1536KiB"},
		{3 << 29, "", "1536MiB"},
		{1 << 40, "", "1024GiB"},
		{1024, "", "1KiB"},
		{1000, "", "1000B"},
		{1025, " ", "1025 B"},
		{0, "", "0B"},
		{-2048, "", "-2048B"},
	} {
		if got := Size(tc.n, tc.sep); got != tc.want {
			t.Errorf("Size(%d, %q) = %q, want %q", tc.n, tc.sep, got, tc.want)
		}
	}
}
