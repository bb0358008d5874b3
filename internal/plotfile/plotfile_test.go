package plotfile

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

func TestSave(t *testing.T) {
	dir := t.TempDir()
	p := plot.New()
	png1 := filepath.Join(dir, "a.png")
	if err := Save(p, png1, 2*vg.Inch, 1*vg.Inch, 100); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(png1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil || img.Bounds().Dx() != 200 || img.Bounds().Dy() != 100 {
		t.Errorf("png: %v, bounds %v; want 200×100", err, img.Bounds())
	}
	if err := Save(p, filepath.Join(dir, "a.SVG"), vg.Inch, vg.Inch, 100); err != nil {
		t.Errorf("svg: %v", err)
	}
	err = Save(p, filepath.Join(dir, "a.gif"), vg.Inch, vg.Inch, 100)
	if err == nil || !strings.Contains(err.Error(), `unknown image format ".gif"`) {
		t.Errorf("gif: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.gif")); err == nil {
		t.Error("a file was written for an unknown format")
	}
}
