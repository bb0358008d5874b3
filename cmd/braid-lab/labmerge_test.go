package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/lab/report"
	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/stats"
)

// TestLabMerge: `lab merge` joins the results.json of two shards into one
// report in the scenario's point order, with the shards' provenance.
func TestLabMerge(t *testing.T) {
	dir := t.TempDir()
	var dirs []string
	for i := 0; i < 2; i++ {
		r := &results.Run{Scenario: "demo", Size: 1 << 20, Reps: 2, Emulator: "userspace", Host: "m" + string(rune('0'+i)),
			Axes: []string{"transport"}, Started: time.Unix(1_800_000_000, 0), Finished: time.Unix(1_800_000_600, 0)}
		r.Seed, r.Shard, r.Command = 7, string(rune('0'+i))+"/2", []string{"braid-lab", "lab", "run", "demo.toml", "--shard", string(rune('0'+i)) + "/2"}
		for idx := i; idx < 3; idx += 2 {
			g := []float64{float64(10 + idx), float64(11 + idx)}
			r.Points = append(r.Points, results.Point{Index: idx, Transport: "direct", Label: "t" + string(rune('0'+idx)),
				Params:  []results.Param{{Axis: "transport", Text: "t" + string(rune('0'+idx))}},
				Samples: []results.Sample{{Rep: 0, GoodputMbps: g[0]}, {Rep: 1, GoodputMbps: g[1]}}, Goodput: stats.Summarize(g)})
		}
		d := filepath.Join(dir, "shard"+string(rune('0'+i)))
		if _, err := report.Document(r).Write(d); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	out := filepath.Join(dir, "merged")
	var stdout, stderr bytes.Buffer
	args := append([]string{"lab", "merge", "--json", "--out", out}, dirs[1], filepath.Join(dirs[0], "results.json"))
	if code := run(context.Background(), args, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var m results.Run
	if err := json.Unmarshal(stdout.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Points) != 3 || m.Points[0].Index != 0 || m.Points[2].Index != 2 || m.Seed != 7 || len(m.Parts) != 2 || m.Shard != "" {
		t.Errorf("merged: %d points, seed %d, %d parts, shard %q", len(m.Points), m.Seed, len(m.Parts), m.Shard)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### Shards", "| 0/2 | m0 | 2 |", "| 1/2 | m1 | 1 |", "| Seed | 7 "} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	// A shard of another seed is refused.
	other := filepath.Join(dir, "other")
	r, _ := results.Read(dirs[1])
	r.Seed = 8
	report.Document(r).Write(other)
	stderr.Reset()
	if code := run(context.Background(), []string{"lab", "merge", dirs[0], other}, nil, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "seed") {
		t.Errorf("merging two seeds: exit %d, %s", code, stderr.String())
	}
}

// TestLockLab: a second lab command on the machine is refused with one line
// naming --force; with --force it runs and says so.
func TestLockLab(t *testing.T) {
	var stderr bytes.Buffer
	release, warn, err := lockLab(&stderr, false)
	if err != nil || warn != "" {
		t.Fatalf("first lock: %v %q", err, warn)
	}
	_, _, err = lockLab(&stderr, false)
	if err == nil || !strings.Contains(err.Error(), "another lab run is active") || !strings.Contains(err.Error(), "--force") || strings.Contains(err.Error(), "\n") {
		t.Errorf("second lock: %v", err)
	}
	rel2, warn, err := lockLab(&stderr, true)
	if err != nil || !strings.Contains(warn, "--force") || !strings.Contains(stderr.String(), "warning") {
		t.Errorf("forced: %v %q %q", err, warn, stderr.String())
	}
	rel2()
	release()
	release, _, err = lockLab(&stderr, false)
	if err != nil {
		t.Errorf("after release: %v", err)
	} else {
		release()
	}
}
