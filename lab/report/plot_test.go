package report

import (
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"
)

// An undefined or negative interval draws no error bar rather than one
// that would hide the point or break the plot's range.
func TestSeriesAdd(t *testing.T) {
	var d Series
	d.Add(1, 5, 0.5)
	d.Add(2, 7, math.NaN())
	d.Add(3, 6, math.Inf(1))
	d.Add(4, 2, -1)
	for i, want := range []float64{0.5, 0, 0, 0} {
		if lo, hi := d.YError(i); lo != want || hi != want {
			t.Errorf("YError(%d) = %v, %v, want %v", i, lo, hi, want)
		}
	}
	if d.Len() != 4 {
		t.Errorf("Len %d", d.Len())
	}
	if x, y := d.XY(1); x != 2 || y != 7 {
		t.Errorf("XY(1) = %v, %v", x, y)
	}
	p := newPlot("t", "y", true)
	bars, err := plotter.NewYErrorBars(&d)
	if err != nil {
		t.Fatal(err)
	}
	p.Add(bars)
	fitY(p, 2)
	if p.Y.Min != 0 || math.Abs(p.Y.Max-7*1.22) > 1e-9 {
		t.Errorf("y range %v..%v, want 0..%v", p.Y.Min, p.Y.Max, 7*1.22)
	}
	p = newPlot("t", "y", true)
	fitY(p, 0)
	if p.Y.Max != 1.08 {
		t.Errorf("y max without data %v, want 1.08", p.Y.Max)
	}
}

// SavePlot writes the PNG and the SVG of a LineFigure under the stem, the
// PNG at the lab's figure size.
func TestSavePlot(t *testing.T) {
	dir := t.TempDir()
	var d Series
	d.Add(1, 1, 0.1)
	d.Add(2, 3, 0.2)
	p, err := (&LineFigure{Title: "t", YLabel: "y", Labels: []string{"series-one"}, Series: []Series{d}, XMin: 0, XMax: 3}).Plot()
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(p.Y.Max-3.2*1.15) > 1e-9 {
		t.Errorf("y max %v, want %v (one legend entry's headroom)", p.Y.Max, 3.2*1.15)
	}
	files, err := SavePlot(p, dir, "fig")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "fig.png"), filepath.Join(dir, "fig.svg")}
	if !reflect.DeepEqual(files, want) {
		t.Fatalf("files %v, want %v", files, want)
	}
	checkPNG(t, files[0])
	if text := checkSVG(t, files[1]); !strings.Contains(text, "series-one") {
		t.Errorf("SVG without the legend: %q", text)
	}
	if _, err := SavePlot(p, filepath.Join(dir, "missing"), "fig"); err == nil {
		t.Error("no error for a missing directory")
	}
}
