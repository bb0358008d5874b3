// Package plotfile writes gonum plots as PNG or SVG files, chosen by the
// file name's extension: the one image writer of the lab's reports and the
// routing study's figures.
package plotfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Save draws p at w × h (PNG at dpi dots per inch) into name, which must
// end in .png or .svg. The file is written only once the image is whole.
func Save(p *plot.Plot, name string, w, h vg.Length, dpi int) error {
	var buf bytes.Buffer
	switch ext := strings.ToLower(filepath.Ext(name)); ext {
	case ".png":
		c := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(dpi))
		p.Draw(draw.New(c))
		if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
			return err
		}
	case ".svg":
		c := vgsvg.New(w, h)
		p.Draw(draw.New(c))
		if _, err := c.WriteTo(&buf); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%s: unknown image format %q (want .png or .svg)", name, ext)
	}
	return os.WriteFile(name, buf.Bytes(), 0o644)
}
