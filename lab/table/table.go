// Package table writes the lab's report tables and their numbers (aligned
// text, Markdown, CSV cells) for lab/report, lab/bench and lab/mesh alike;
// where their published files have always differed (how a missing number
// is spelt, the delimiter row), the difference is a parameter, so that no
// committed result changes.
package table

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/braid-vpn/braid/lab/stats"
)

// WriteText writes rows (the header first) as aligned columns two spaces
// apart.
func WriteText(w io.Writer, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
}

// Markdown is one report's way of writing a Markdown table.
type Markdown struct {
	// First and Others are the delimiter row's cell under the first column
	// and under every other ("---", or "---:" and "--:", which render alike,
	// to right-align): each report keeps its committed tables' cells.
	First, Others string
	// Escaped says the caller has escaped the cells itself (the campaign
	// report escapes markup too, not only "|").
	Escaped bool
}

// Write writes rows, the header first, as a Markdown table.
func (m Markdown) Write(w io.Writer, rows [][]string) {
	for i, row := range rows {
		if !m.Escaped {
			row = slices.Clone(row)
			for j := range row {
				row[j] = Escape(row[j])
			}
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
		if i == 0 {
			delims := slices.Repeat([]string{m.Others}, len(row))
			if len(row) > 0 {
				delims[0] = m.First
			}
			fmt.Fprintf(w, "|%s|\n", strings.Join(delims, "|"))
		}
	}
}

// Escape makes s safe in a Markdown table cell: an unescaped "|" would
// end the cell and shift every cell after it into the wrong column.
func Escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// Style is how one output spells a number it has not got. CSV leaves the
// field empty (which spreadsheets and pandas read as missing); each
// report's tables have their own mark.
type Style struct {
	NaN string // for a NaN or ±Inf
	// None stands for a summary that is nil or, unless None is "", has no
	// samples.
	None string
	// BareMean writes the mean alone where its interval is undefined (one
	// sample) instead of "mean ± NaN".
	BareMean bool
}

// CSV is the style of CSV files: an undefined number is an empty field.
var CSV = Style{}

// Num writes x with prec decimals, or with -1 the fewest that read back
// as the same float64; never in exponent form, which a reader of a table
// would have to decode.
func (st Style) Num(x float64, prec int) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return st.NaN
	}
	return strconv.FormatFloat(x, 'f', prec, 64)
}

// MeanCI writes a summary as "mean ± ci95", both with prec decimals: the
// one figure the reports give for a repeated measurement, since a mean
// without its spread cannot be compared with another.
func (st Style) MeanCI(s *stats.Summary, prec int) string {
	if s == nil || s.N == 0 && st.None != "" {
		return st.None
	}
	if st.BareMean && math.IsNaN(s.CI95) {
		return st.Num(s.Mean, prec)
	}
	return st.Num(s.Mean, prec) + " ± " + st.Num(s.CI95, prec)
}

// Size writes a byte count in the largest binary unit that divides it
// ("16MiB", "1536KiB"), else in bytes, with sep between the number and the
// unit: the scenario files write sizes so, and a reader compares the
// report's size with the file's.
func Size(n int64, sep string) string {
	unit := "B"
	for _, u := range []string{"KiB", "MiB", "GiB"} {
		if n < 1<<10 || n%(1<<10) != 0 {
			break
		}
		n, unit = n>>10, u
	}
	return strconv.FormatInt(n, 10) + sep + unit
}
