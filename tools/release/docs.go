package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/braid-vpn/braid/internal/braidcmd"
)

// tree is braid's command tree as the binary of src runs it.
func tree(src Source) *cobra.Command {
	root := braidcmd.New("v" + src.Version)
	// The generator's footer carries the day of the build.
	root.DisableAutoGenTag = true
	return root
}

// writeMan writes a gzipped man page per command into dir (braid.1.gz,
// braid-up.1.gz, …) dated SOURCE_DATE_EPOCH, and returns their paths.
func writeMan(src Source, dir string) ([]string, error) {
	plain := filepath.Join(dir, "plain")
	if err := os.MkdirAll(plain, 0o755); err != nil {
		return nil, err
	}
	date := src.Time
	header := &doc.GenManHeader{Title: "BRAID", Section: "1", Date: &date, Source: "braid " + src.Version, Manual: "braid manual"}
	if err := doc.GenManTree(tree(src), header, plain); err != nil {
		return nil, err
	}
	pages, err := filepath.Glob(filepath.Join(plain, "*.1"))
	if err != nil {
		return nil, err
	}
	sort.Strings(pages)
	var out []string
	for _, p := range pages {
		text, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		gz := filepath.Join(dir, filepath.Base(p)+".gz")
		if err := os.WriteFile(gz, gzipBytes(text), 0o644); err != nil {
			return nil, err
		}
		out = append(out, gz)
	}
	return out, nil
}

// gzipBytes compresses b with no name and no time in the header, so that
// the output depends on b alone.
func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// writeCompletions writes bash, zsh and fish completion files into dir with
// cobra's generators; at run time they ask `braid __complete`.
func writeCompletions(dir string) (bash, zsh, fish string, err error) {
	if err = os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	var b, z, f bytes.Buffer
	root := tree(Source{})
	if err = root.GenBashCompletionV2(&b, true); err != nil {
		return
	}
	if err = root.GenZshCompletion(&z); err != nil {
		return
	}
	if err = root.GenFishCompletion(&f, true); err != nil {
		return
	}
	bash, zsh, fish = filepath.Join(dir, "braid.bash"), filepath.Join(dir, "_braid"), filepath.Join(dir, "braid.fish")
	for path, buf := range map[string]*bytes.Buffer{bash: &b, zsh: &z, fish: &f} {
		if err = os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			return
		}
	}
	return
}
