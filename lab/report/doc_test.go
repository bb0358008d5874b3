package report

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/braid-vpn/braid/lab/table"
)

func testDoc() *Doc {
	return &Doc{
		Title: "t", Lead: "lead.",
		Tables: []Table{{Caption: "first", Rows: [][]string{{"a", "b"}, {"x|y", "1"}}}, {Rows: [][]string{{"c"}, {"2"}}}},
		Notes:  []string{"note: n"}, Legend: []string{"l1", "l2"},
		MD: table.Markdown{First: "---", Others: "--:"},
	}
}

// The Markdown is the blocks a blank line apart, with no blank line at the
// end, so that a published report regenerates to the same bytes; the text
// is the same content aligned for a terminal.
func TestDocLayout(t *testing.T) {
	for _, c := range []struct {
		name  string
		write func(*Doc, io.Writer)
		want  string
	}{
		{"markdown", (*Doc).WriteMarkdown, "# t\n\nlead.\n\nfirst:\n\n| a | b |\n|---|--:|\n| x\\|y | 1 |\n\n| c |\n|---|\n| 2 |\n\n- note: n\n\n- l1\n- l2\n"},
		{"text", (*Doc).WriteText, "t: lead.\n\nfirst:\na    b\nx|y  1\n\nc\n2\n\nnote: n\n  l1\n  l2\n"},
	} {
		var b strings.Builder
		c.write(testDoc(), &b)
		if b.String() != c.want {
			t.Errorf("%s\n%q, want\n%q", c.name, b.String(), c.want)
		}
	}
	d := testDoc()
	d.Title, d.Notes, d.Legend = "", nil, nil
	var b strings.Builder
	d.WriteMarkdown(&b)
	if got := b.String(); !strings.HasPrefix(got, "lead.\n\nfirst:") || !strings.HasSuffix(got, "| 2 |\n") {
		t.Errorf("markdown without title, notes and legend:\n%q", got)
	}
}

// Write puts every file in the directory, the Markdown under its own name
// when the document has one, and links the figures relatively.
func TestDocWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	d := testDoc()
	d.JSON = map[string]int{"n": 1}
	d.CSV = []CSV{{Name: "s.csv", Rows: [][]string{{"h"}, {"a,b"}}}}
	d.MarkdownFile = "tables.md"
	d.Plot = func(dir string) ([]string, error) { return []string{filepath.Join(dir, "fig.png")}, nil }
	var linked []string
	plots, err := d.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(plots) != 1 || plots[0] != filepath.Join(dir, "fig.png") {
		t.Errorf("plots %v", plots)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var js map[string]int
	if err := json.Unmarshal([]byte(read(FileJSON)), &js); err != nil || js["n"] != 1 {
		t.Errorf("results.json: %v %v", js, err)
	}
	if got := read("s.csv"); got != "h\n\"a,b\"\n" {
		t.Errorf("s.csv %q", got)
	}
	if got := read("tables.md"); !strings.HasPrefix(got, "# t\n") {
		t.Errorf("tables.md %q", got)
	}
	d.MarkdownFile = ""
	d.Markdown = func(w io.Writer, plots []string) error {
		linked = plots
		_, err := io.WriteString(w, "own")
		return err
	}
	if _, err := d.Write(dir); err != nil {
		t.Fatal(err)
	}
	if got := read(FileMarkdown); got != "own" || len(linked) != 1 || linked[0] != "fig.png" {
		t.Errorf("report.md %q, plots %v", got, linked)
	}
}
