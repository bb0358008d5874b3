package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/braid-vpn/braid/lab/bench"
	"github.com/braid-vpn/braid/lab/mesh"
	"github.com/braid-vpn/braid/lab/report"
	"github.com/braid-vpn/braid/lab/results"
)

// readLabResults reads the results.json of a campaign, a bench or a mesh
// run (a file or the directory holding it) as its report and, for a
// campaign, its table (finishLab's text).
// Each driver's schema has a key the others lack, so no file says which.
func readLabResults(path string) (*report.Doc, func(io.Writer), error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, report.FileJSON)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case keys["points"] != nil:
		run, err := results.Read(path)
		if err != nil {
			return nil, nil, err
		}
		return report.Document(run), func(w io.Writer) { printLabTable(w, run, false) }, nil
	case keys["ratios"] != nil:
		var r bench.Report
		err := json.Unmarshal(data, &r)
		return r.Document(), nil, err
	case keys["runs"] != nil:
		var r mesh.Result
		err := json.Unmarshal(data, &r)
		return r.Document(), nil, err
	}
	return nil, nil, fmt.Errorf("%s: not the results of lab run, bench or mesh", path)
}

func newLabReportCmd() *cobra.Command {
	var out string
	var write bool
	cmd := &cobra.Command{
		Use:   "report RESULTS",
		Short: "Write the report of a lab run, bench or mesh again from its results.json",
		Long: `report reads the results.json of a lab run, merge, bench or mesh (a file or its
directory) and prints its tables; with --write it writes the report again beside
it (report.md, or tables.md for the mesh lab, the CSV files and the plots) from
the one writer all three share, and with --out DIR into DIR with a copy of the
results. The stored results.json is never rewritten.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, text, err := readLabResults(args[0])
			if err != nil {
				return err
			}
			if write && out == "" {
				out = args[0]
				if fi, err := os.Stat(out); err != nil || !fi.IsDir() {
					out = filepath.Dir(out)
				}
				doc.JSON = nil
			}
			return finishLab(cmd, out, false, doc, text)
		},
	}
	cmd.Flags().BoolVar(&write, "write", false, "write the report files beside the results")
	cmd.Flags().StringVar(&out, "out", "", "directory for a copy of results.json and the report files")
	return cmd
}
