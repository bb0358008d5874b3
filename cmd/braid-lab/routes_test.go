package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/braid-vpn/braid/route/study"
)

// runBraid runs one command line and returns exit code, stdout, stderr.
func runBraid(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, nil, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

const exampleGraph = "../../docs/routes-example.json"

// The documented example is the trap topology: greedy ND finds one path,
// opt-node two.
func TestRoutesPathsExample(t *testing.T) {
	code, out, errOut := runBraid(t, "routes", "paths", "--graph", exampleGraph, "--from", "s", "--to", "d", "--algo", "nd")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "nd: 1 node-disjoint path(s) from s to d") || !strings.Contains(out, "s → a → b → d") {
		t.Errorf("greedy ND output:\n%s", out)
	}
	code, out, errOut = runBraid(t, "routes", "paths", "--graph", exampleGraph, "--from", "s", "--to", "d", "--algo", "opt-node", "--k", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r pathsReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	want := [][]string{{"s", "a", "x1", "x2", "d"}, {"s", "y1", "y2", "b", "d"}}
	if len(r.Paths) != 2 || r.K != 2 || r.Disjointness != "node" {
		t.Fatalf("report %+v", r)
	}
	for i, p := range r.Paths {
		if !slices.Equal(p.Nodes, want[i]) || p.Hops != 4 || p.Cost != 4 {
			t.Errorf("path %d: %+v, want %v with 4 hops", i+1, p, want[i])
		}
	}
}

func TestRoutesPathsErrors(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.json")
	os.WriteFile(broken, []byte("{\n  \"nodes\": [\n    {\"id\": \"a\"},,\n  ]\n}\n"), 0o644)
	apart := filepath.Join(dir, "apart.json")
	os.WriteFile(apart, []byte(`{"nodes": [{"id": "a"}, {"id": "b"}, {"id": "c"}], "edges": [{"from": "a", "to": "b"}]}`), 0o644)
	g := exampleGraph
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", "s", "--to", "d"}, "--graph FILE is required"},
		{[]string{"--graph", g, "--to", "d"}, "--from and --to are required"},
		{[]string{"--graph", g, "--from", "s", "--to", "zz"}, `--to: route: no such node: "zz"`},
		{[]string{"--graph", g, "--from", "s", "--to", "s"}, "source and destination are the same node"},
		{[]string{"--graph", g, "--from", "s", "--to", "d", "--algo", "dijkstra"}, `algorithm "dijkstra"`},
		{[]string{"--graph", g, "--from", "s", "--to", "d", "--algo", "nd", "--k", "3"}, "--k applies to opt-link and opt-node only"},
		{[]string{"--graph", g, "--from", "s", "--to", "d", "--algo", "opt-node", "--k", "3"}, "3 node-disjoint paths from \"s\" to \"d\" asked, only 2 exist"},
		{[]string{"--graph", g, "--from", "s", "--to", "d", "--algo", "opt-link", "--k", "0"}, "k = 0"},
		{[]string{"--graph", g, "--from", "s", "--to", "d", "--metric", "miles"}, `metric "miles"`},
		{[]string{"--graph", filepath.Join(dir, "none.json"), "--from", "s", "--to", "d"}, "no such file"},
		{[]string{"--graph", broken, "--from", "a", "--to", "a"}, "line 3"},
		{[]string{"--graph", apart, "--from", "a", "--to", "c", "--algo", "max-node"}, `no path between source and destination ("a" to "c")`},
	} {
		code, _, errOut := runBraid(t, append([]string{"routes", "paths"}, c.args...)...)
		if code == 0 || !strings.HasPrefix(errOut, "braid: ") || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error containing %q", c.args, code, errOut, c.want)
		}
	}
}

func TestRoutesStatsSmall(t *testing.T) {
	out := filepath.Join(t.TempDir(), "res")
	code, stdout, errOut := runBraid(t, "routes", "stats", "--runs", "20", "--nodes", "16,24,32", "--routes-runs", "10", "--seed", "3", "--out", out, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res study.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("stdout is not a study result: %v\n%s", err, stdout)
	}
	if len(res.Feasibility) != 3 || res.Feasibility[2].Nodes != 32 || res.Routes == nil || res.Routes.Topologies != 10 || res.Config.Seed != 3 {
		t.Errorf("result: %+v", res)
	}
	if !strings.Contains(errOut, "done: 4 steps") || !strings.Contains(errOut, "study took") {
		t.Errorf("stderr lacks the progress summary:\n%s", errOut)
	}
	saved, err := os.ReadFile(filepath.Join(out, "routes.json"))
	if err != nil || !bytes.Equal(bytes.TrimSpace(saved), bytes.TrimSpace([]byte(stdout))) {
		t.Errorf("routes.json differs from stdout (%v)", err)
	}
	if md, err := os.ReadFile(filepath.Join(out, "tables.md")); err != nil || !strings.Contains(string(md), "| 24 |") {
		t.Errorf("tables.md: %v\n%s", err, md)
	}
	for _, stem := range []string{"fig7-multipath-share", "fig8-routes-cdf", "fig9-hops-cdf"} {
		f, err := os.Open(filepath.Join(out, stem+".png"))
		if err != nil {
			t.Error(err)
			continue
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil || img.Bounds().Dx() != 900 || img.Bounds().Dy() != 600 {
			t.Errorf("%s.png: %v, size %v, want 900×600", stem, err, img.Bounds())
		}
		svg, err := os.ReadFile(filepath.Join(out, stem+".svg"))
		if err != nil || !bytes.Contains(svg, []byte("<svg")) {
			t.Errorf("%s.svg: %v", stem, err)
		}
	}
	// The text table for the same flags, without files.
	code, stdout, errOut = runBraid(t, "routes", "stats", "--runs", "20", "--nodes", "16,24,32", "--routes-runs", "10", "--seed", "3")
	if code != 0 || !strings.Contains(stdout, "Fig 7") || !strings.Contains(stdout, "opt-node-2nd") {
		t.Errorf("text output: exit %d %s\n%s", code, errOut, stdout)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--nodes", "1"}, "1 nodes"},
		{[]string{"--radius", "-2"}, "radius -2"},
		{[]string{"--runs", "0", "--routes-runs", "0"}, "nothing to do"},
		{[]string{"--json", "--markdown"}, "exclude each other"},
	} {
		code, _, errOut := runBraid(t, append([]string{"routes", "stats"}, c.args...)...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", c.args, code, errOut, c.want)
		}
	}
}

func TestRoutesShow(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "topo.svg")
	saved := filepath.Join(dir, "topo.json")
	code, out, errOut := runBraid(t, "routes", "show", "--nodes", "16", "--seed", "2", "--feasible", "--algo", "zd", "--out", file, "--graph-out", saved)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "zd: 2 zone-disjoint path(s)") {
		t.Errorf("a --feasible topology has two ZD paths; got\n%s", out)
	}
	// The saved topology gives the same paths through `routes paths`.
	var from, to string
	if _, err := fmt.Sscanf(errOut[strings.Index(errOut, "(source "):], "(source %s destination %s", &from, &to); err != nil {
		t.Fatalf("stderr %q: %v", errOut, err)
	}
	from, to = strings.TrimSuffix(from, ","), strings.TrimSuffix(to, ")\n")
	to = strings.TrimSuffix(to, ")")
	code, again, errOut := runBraid(t, "routes", "paths", "--graph", saved, "--from", from, "--to", to, "--algo", "zd")
	if code != 0 || again != out {
		t.Errorf("paths on the saved topology: exit %d %s\n%s\nwant\n%s", code, errOut, again, out)
	}
	if svg, err := os.ReadFile(file); err != nil || !bytes.Contains(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("path 2")) {
		t.Errorf("%s: %v (want an SVG with a legend entry for path 2)", file, err)
	}
	pngFile := filepath.Join(dir, "example.png")
	code, out, errOut = runBraid(t, "routes", "show", "--graph", exampleGraph, "--from", "s", "--to", "d", "--algo", "max-node", "--out", pngFile)
	if code != 0 || !strings.Contains(out, "max-node: 2 node-disjoint") {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	if f, err := os.Open(pngFile); err != nil {
		t.Error(err)
	} else if img, err := png.Decode(f); err != nil || img.Bounds().Dx() != 900 || img.Bounds().Dy() != 900 {
		t.Errorf("%s: %v, want a 900×900 PNG", pngFile, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--out FILE.png or FILE.svg is required"},
		{[]string{"--out", filepath.Join(dir, "x.gif")}, "want a .png or .svg file"},
		{[]string{"--out", file, "--graph", exampleGraph, "--from", "s", "--to", "d", "--seed", "4"}, "--seed draws a random topology"},
		{[]string{"--out", file, "--from", "s"}, "--from and --to go with --graph"},
		{[]string{"--out", file, "--index", "-1"}, "--index -1"},
		{[]string{"--out", file, "--nodes", "1"}, "1 nodes"},
	} {
		code, _, errOut := runBraid(t, append([]string{"routes", "show"}, c.args...)...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", c.args, code, errOut, c.want)
		}
	}
}
