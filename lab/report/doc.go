package report

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/braid-vpn/braid/lab/table"
)

// Doc is one report of any of the lab's drivers (a campaign, the bench,
// the mesh lab): what each fills from its own results so that the files
// are written, and a new output or a fix made, in one place.
type Doc struct {
	// Title heads the Markdown; Lead is the setup, the first paragraph.
	Title, Lead string
	Tables      []Table
	// Notes are the run's remarks (details, errors), one line each;
	// Legend explains the columns.
	Notes, Legend []string
	// MD is how the tables' Markdown aligns and escapes.
	MD table.Markdown
	// Markdown, if set, writes the Markdown file in place of the tables
	// (the campaign report has a layout of its own); plots are the figures'
	// names relative to the directory.
	Markdown func(w io.Writer, plots []string) error
	// MarkdownFile is the Markdown file's name, FileMarkdown if empty (the
	// mesh lab's published results call it tables.md).
	MarkdownFile string
	// JSON is the results, written as FileJSON: the complete record from
	// which every other file can be made again.
	JSON any
	CSV  []CSV
	// Plot draws the figures into a directory and returns their files in it.
	Plot func(dir string) ([]string, error)
}

// Table is a titled table, the header row first.
type Table struct {
	Caption string
	Rows    [][]string
}

// CSV is one CSV file, the header row first.
type CSV struct {
	Name string
	Rows [][]string
}

// WriteText writes the document for a terminal: the lead, the tables
// aligned in columns, then the notes and the legend indented, the blocks a
// blank line apart.
func (d *Doc) WriteText(w io.Writer) {
	lead := d.Lead
	if d.Title != "" {
		lead = d.Title + ": " + lead
	}
	fmt.Fprintln(w, lead)
	for _, t := range d.Tables {
		fmt.Fprintln(w)
		if t.Caption != "" {
			fmt.Fprintf(w, "%s:\n", t.Caption)
		}
		table.WriteText(w, t.Rows)
	}
	if len(d.Notes)+len(d.Legend) > 0 {
		fmt.Fprintln(w)
	}
	for _, n := range d.Notes {
		fmt.Fprintln(w, n)
	}
	for _, l := range d.Legend {
		fmt.Fprintf(w, "  %s\n", l)
	}
}

// WriteMarkdown writes the document as Markdown: the title, the lead,
// each table under its caption, then the notes and the legend as lists,
// the blocks a blank line apart.
func (d *Doc) WriteMarkdown(w io.Writer) {
	if d.Title != "" {
		fmt.Fprintf(w, "# %s\n\n", d.Title)
	}
	fmt.Fprintln(w, d.Lead)
	for _, t := range d.Tables {
		fmt.Fprintln(w)
		if t.Caption != "" {
			fmt.Fprintf(w, "%s:\n\n", t.Caption)
		}
		d.MD.Write(w, t.Rows)
	}
	for _, list := range [][]string{d.Notes, d.Legend} {
		if len(list) > 0 {
			fmt.Fprintln(w)
		}
		for _, l := range list {
			fmt.Fprintf(w, "- %s\n", table.Escape(l))
		}
	}
}

// Write writes the document's files into dir (created if missing): the
// JSON, the CSV files, the figures and the Markdown, which links the
// figures by names relative to dir. It returns the figures' files.
func (d *Doc) Write(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if d.JSON != nil {
		if err := writeFile(dir, FileJSON, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(d.JSON)
		}); err != nil {
			return nil, err
		}
	}
	for _, c := range d.CSV {
		if err := writeFile(dir, c.Name, func(w io.Writer) error { return csv.NewWriter(w).WriteAll(c.Rows) }); err != nil {
			return nil, err
		}
	}
	var plots, rel []string
	if d.Plot != nil {
		var err error
		if plots, err = d.Plot(dir); err != nil {
			return plots, err
		}
	}
	for _, p := range plots {
		rel = append(rel, filepath.Base(p))
	}
	return plots, writeFile(dir, cmp.Or(d.MarkdownFile, FileMarkdown), func(w io.Writer) error {
		if d.Markdown != nil {
			return d.Markdown(w, rel)
		}
		d.WriteMarkdown(w)
		return nil
	})
}

// writeFile writes dir/name through a buffer, naming the file in an error.
func writeFile(dir, name string, f func(io.Writer) error) error {
	fh, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(fh)
	if err = f(bw); err == nil {
		err = bw.Flush()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("report: %s: %w", name, err)
	}
	return nil
}
