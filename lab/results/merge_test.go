package results

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// shardRun is shard i of n of a 7-point campaign, as `--shard i/n` writes it.
func shardRun(i, n int, host, commit string) *Run {
	t0 := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)
	r := &Run{
		Scenario: "demo", Size: 1 << 20, Reps: 3, Emulator: "userspace", Host: host,
		Axes: []string{"rtt", "transport"}, Started: t0, Finished: t0.Add(10 * time.Minute),
		Points: []Point{},
	}
	r.Seed, r.Commit, r.CommitFrom, r.CPUs = 99, commit, "build", 2
	r.Shard = ""
	if n > 1 {
		r.Shard = string(rune('0'+i)) + "/" + string(rune('0'+n))
	}
	r.LoadStart, r.LoadMax = 0.1*float64(i+1), 1.5+float64(i)
	for idx := 0; idx < 7; idx++ {
		if n <= 1 || idx%n == i {
			r.Points = append(r.Points, Point{Index: idx, Label: "p"})
		}
	}
	return r
}

func TestMerge(t *testing.T) {
	s2, s0, s1 := shardRun(2, 3, "b", "abc"), shardRun(0, 3, "a", "abc"), shardRun(1, 3, "b", "abc")
	s1.Warnings = []string{"busy"}
	m, err := Merge([]*Run{s2, s0, s1})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Points) != 7 {
		t.Fatalf("%d points, want 7", len(m.Points))
	}
	for i, p := range m.Points {
		if p.Index != i {
			t.Errorf("point %d has index %d: not in the scenario's order", i, p.Index)
		}
	}
	if m.Shard != "" || m.Seed != 99 || m.Commit != "abc" || m.Host != "a, b" || m.LoadMax != 3.5 || math.Abs(m.LoadStart-0.3) > 1e-9 || m.CPUs != 2 {
		t.Errorf("merged provenance: %+v host %q", m.Provenance, m.Host)
	}
	if !m.Started.Equal(s0.Started) || !m.Finished.Equal(s2.Finished) {
		t.Errorf("merged time %v – %v", m.Started, m.Finished)
	}
	if len(m.Parts) != 3 || m.Parts[0].Shard != "0/3" || m.Parts[2].Shard != "2/3" || m.Parts[1].Points != 2 {
		t.Errorf("parts: %+v", m.Parts)
	}
	if len(m.Warnings) != 1 || m.Warnings[0] != "shard 1/3: busy" {
		t.Errorf("warnings: %q", m.Warnings)
	}

	// A missing shard, and shards of different code: merged with warnings.
	s1.Commit = "def"
	m, err = Merge([]*Run{s0, s1})
	if err != nil {
		t.Fatal(err)
	}
	if m.Shard != "0,1/3" || len(m.Points) != 5 || m.Commit != "" {
		t.Errorf("partial merge: shard %q, %d points, commit %q", m.Shard, len(m.Points), m.Commit)
	}
	if w := strings.Join(m.Warnings, "\n"); !strings.Contains(w, "2/3") || !strings.Contains(w, "different code") {
		t.Errorf("partial merge warnings: %q", m.Warnings)
	}
	// A partial merge merges on.
	m, err = Merge([]*Run{m, s2})
	if err != nil || len(m.Points) != 7 || m.Shard != "" || len(m.Parts) != 3 {
		t.Fatalf("merging a partial merge: %v, %d points, shard %q, %d parts", err, len(m.Points), m.Shard, len(m.Parts))
	}
	// Its warnings are the parts' again: nothing is missing any more.
	if w := strings.Join(m.Warnings, "\n"); strings.Contains(w, "not merged") || !strings.Contains(w, "shard 1/3: busy") || !strings.Contains(w, "different code") {
		t.Errorf("complete merge warnings: %q", m.Warnings)
	}
}

func TestMergeErrors(t *testing.T) {
	cases := map[string]func(a, b *Run){
		"seed":        func(a, b *Run) { b.Seed = 7 },
		"shard 0":     func(a, b *Run) { b.Shard = "0/3" }, // given twice
		"split":       func(a, b *Run) { b.Shard = "1/4" },
		"repetitions": func(a, b *Run) { b.Reps = 5 },
		"emulat":      func(a, b *Run) { b.Emulator = "netem" },
		"--only":      func(a, b *Run) { b.Only = []string{"rtt=10ms"} },
		"measured by": func(a, b *Run) {
			b.Points = append(b.Points, Point{Index: 0})
		},
		"scenario": func(a, b *Run) { b.Scenario = "other" },
	}
	for want, change := range cases {
		a, b := shardRun(0, 3, "a", "x"), shardRun(1, 3, "a", "x")
		change(a, b)
		if _, err := Merge([]*Run{a, b}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
	if _, err := Merge(nil); err == nil {
		t.Error("merged nothing")
	}
}

func TestReadRun(t *testing.T) {
	dir := t.TempDir()
	r := shardRun(1, 2, "h", "c")
	data, _ := json.Marshal(r)
	os.WriteFile(filepath.Join(dir, "results.json"), data, 0o644)
	for _, p := range []string{dir, filepath.Join(dir, "results.json")} {
		got, err := Read(p)
		if err != nil {
			t.Fatal(err)
		}
		if got.Seed != 99 || got.Shard != "1/2" || len(got.Points) != 3 || got.LoadMax != 2.5 {
			t.Errorf("%s: read back %+v", p, got.Provenance)
		}
	}
	// The provenance is written at the top level of the JSON.
	var flat map[string]any
	json.Unmarshal(data, &flat)
	for _, k := range []string{"seed", "shard", "commit", "cpus", "load_start", "load_max"} {
		if _, ok := flat[k]; !ok {
			t.Errorf("results.json has no %q", k)
		}
	}
	if _, err := Read(filepath.Join(dir, "nope")); err == nil {
		t.Error("read a missing file")
	}
	// A bench's or a mesh's results.json is not a campaign.
	other := filepath.Join(dir, "mesh.json")
	os.WriteFile(other, []byte(`{"runs": [{"topology": 1}], "reps": 3}`), 0o644)
	if _, err := Read(other); err == nil || !strings.Contains(err.Error(), "not the results of lab run") {
		t.Errorf("read a mesh's results as a run: %v", err)
	}
}
