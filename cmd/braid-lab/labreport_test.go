package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLabReportPublished: every published results.json (campaigns, bench
// and mesh, old schemas included) still makes a report, the same to the
// byte as the one published beside it (tables, CSV files and plots), and
// --write leaves the stored results as they were. A change to the report
// writer therefore comes with the published reports it changes
// (braid-lab lab report --write on each).
func TestLabReportPublished(t *testing.T) {
	root := filepath.Join("..", "..", "docs", "results")
	var dirs []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "results.json" {
			dirs = append(dirs, filepath.Dir(p))
		}
		return err
	})
	kinds := map[string]int{}
	for _, d := range dirs {
		rel, _ := filepath.Rel(root, d)
		out := filepath.Join(t.TempDir(), rel)
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"lab", "report", "--out", out, d}, nil, &stdout, &stderr); code != 0 {
			t.Errorf("%s: exit %d: %s", rel, code, stderr.String())
			continue
		}
		md := "report.md"
		if _, err := os.Stat(filepath.Join(d, "tables.md")); err == nil {
			md = "tables.md"
		}
		b, err := os.ReadFile(filepath.Join(out, md))
		if err != nil || len(b) == 0 || stdout.Len() == 0 {
			t.Errorf("%s: %s %v, table %q", rel, md, err, stdout.String())
		}
		samePublished(t, rel, out, d)
		switch {
		case strings.HasPrefix(string(b), "# braid lab bench"):
			kinds["bench"]++
		case md == "tables.md":
			kinds["mesh"]++
		default:
			kinds["run"]++
		}
	}
	if kinds["bench"] == 0 || kinds["mesh"] == 0 || kinds["run"] == 0 {
		t.Errorf("reports by kind %v: want each of run, bench and mesh", kinds)
	}

	// --write: beside the results, which stay as they were.
	dir := t.TempDir()
	stored, err := os.ReadFile(filepath.Join(root, "mesh", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "results.json"), stored, 0o644)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"lab", "report", "--write", filepath.Join(dir, "results.json")}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("--write: exit %d: %s", code, stderr.String())
	}
	for _, f := range []string{"tables.md", "samples.csv", "summary.csv", "mesh-goodput-ld.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("--write: %v", err)
		}
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "results.json")); !bytes.Equal(after, stored) {
		t.Error("--write rewrote results.json")
	}
	if code := run(context.Background(), []string{"lab", "report", filepath.Join("..", "..", "go.mod")}, nil, &stdout, &stderr); code == 0 {
		t.Error("a file that is no results: exit 0")
	}
}

// samePublished fails t for every file of the report made in out that
// differs from the one published in dir, or is missing there.
func samePublished(t *testing.T, rel, out, dir string) {
	t.Helper()
	made, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range made {
		if f.Name() == "results.json" {
			continue
		}
		want, err := os.ReadFile(filepath.Join(dir, f.Name()))
		got, _ := os.ReadFile(filepath.Join(out, f.Name()))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %s is not the published one (%v): remake it with braid-lab lab report --write", rel, f.Name(), err)
		}
	}
}
