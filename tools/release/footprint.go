package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ulikunitz/xz"
)

// footprint writes a Markdown table of the braid binaries in dir: their
// size, and their size compressed as a router's flash or download would hold
// them (gzip -9, and xz with a 8 MiB dictionary, as `xz -9` but single-threaded).
func footprint(w io.Writer, dir string) error {
	bins, err := filepath.Glob(filepath.Join(dir, "braid_*_linux_*"))
	if err != nil {
		return err
	}
	if len(bins) == 0 {
		return fmt.Errorf("no braid binaries in %s (run the release first)", dir)
	}
	fmt.Fprintln(w, "| target | stripped | gzip -9 | xz |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, b := range bins {
		data, err := os.ReadFile(b)
		if err != nil {
			return err
		}
		gz := gzipBytes(data)
		var x bytes.Buffer
		cfg := xz.WriterConfig{DictCap: 8 << 20}
		xw, err := cfg.NewWriter(&x)
		if err != nil {
			return err
		}
		xw.Write(data)
		if err := xw.Close(); err != nil {
			return err
		}
		name := b[strings.LastIndex(b, "_linux_")+len("_linux_"):]
		fmt.Fprintf(w, "| %s | %.2f MB | %.2f MB | %.2f MB |\n", name, mb(len(data)), mb(len(gz)), mb(x.Len()))
	}
	return nil
}

func mb(n int) float64 { return float64(n) / 1e6 }
