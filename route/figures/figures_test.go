package figures

import (
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/braid-vpn/braid/route"
	"github.com/braid-vpn/braid/route/study"
)

func TestWriteStudy(t *testing.T) {
	cfg := study.DefaultConfig()
	cfg.Runs, cfg.Nodes, cfg.RoutesRuns = 10, []int{24, 32}, 5
	res, err := study.Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, err := WriteStudy(res, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 6 {
		t.Fatalf("wrote %v, want 3 figures × PNG, SVG", files)
	}
	for _, f := range files {
		if !strings.HasSuffix(f, ".png") {
			continue
		}
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(fh)
		fh.Close()
		if err != nil || img.Bounds().Dx() != WidthInches*DPI || img.Bounds().Dy() != HeightInches*DPI {
			t.Errorf("%s: %v %v", f, err, img.Bounds())
		}
	}
	// Without Figs 8–9 data only Fig 7 is drawn.
	res.Routes = nil
	files, err = WriteStudy(res, t.TempDir())
	if err != nil || len(files) != 2 || !strings.Contains(files[0], "fig7") {
		t.Errorf("Fig 7 only: %v %v", files, err)
	}
}

func TestTopologyAndSave(t *testing.T) {
	// No positions: the nodes go on a circle.
	g := route.NewGraph()
	for _, id := range []string{"s", "a", "d"} {
		g.AddNode(id)
	}
	g.AddEdge(0, 1, 1)
	g.AddEdge(1, 2, 1)
	p, err := Topology(g, 0, 2, []route.Path{{0, 1, 2}}, "t")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	side := vg.Length(TopologyInches) * vg.Inch
	if err := Save(p, filepath.Join(dir, "t.svg"), side, side); err != nil {
		t.Error(err)
	}
	if err := Save(p, filepath.Join(dir, "t.jpg"), side, side); err == nil || !strings.Contains(err.Error(), "unknown image format") {
		t.Errorf("saving a .jpg: %v", err)
	}
	pos := positions(g)
	for i, q := range pos {
		if r := (q.X-50)*(q.X-50) + (q.Y-50)*(q.Y-50); r < 1599 || r > 1601 {
			t.Errorf("node %d at %v, not on the circle of radius 40 around (50, 50)", i, q)
		}
	}
}

func TestCDFAndColours(t *testing.T) {
	// 1 sample of 2, 3 of 3: CDF 0, 0, .25, 1, then 1 at 4.
	got := cdf([]int{0, 0, 1, 3})
	want := plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 0}, {X: 2, Y: 0.25}, {X: 3, Y: 1}, {X: 4, Y: 1}}
	if len(got) != len(want) {
		t.Fatalf("cdf = %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("cdf[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	for name, want := range map[string]int{"ld": 0, "ld-2nd": 0, "nd-2nd": 1, "zd": 2, "max-link": 3, "opt-link-2nd": 3, "max-node": 4, "opt-node-1st": 4, "shortest": 5} {
		if c := colourIndex(name); c != want {
			t.Errorf("colourIndex(%s) = %d, want %d", name, c, want)
		}
	}
}
