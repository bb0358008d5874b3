package results

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Read reads a run written as JSON (results.json). path may also be the
// directory holding results.json.
func Read(path string) (*Run, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, "results.json")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var run Run
	if err := json.Unmarshal(data, &run); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &run, nil
}

// Merge joins the shard runs of one campaign (`--shard I/N` with the same
// scenario, seed, size, repetitions, emulator, workload and selection) into
// one run, as if it had been made in one go: its points in the scenario's
// order, its Parts the shards' provenance. Shards that ran different code
// or were left out are Warnings of the merged run; runs that cannot belong
// to one campaign, or that measured the same point, are an error.
func Merge(runs []*Run) (*Run, error) {
	if len(runs) == 0 {
		return nil, errors.New("merge: no run")
	}
	runs = slices.Clone(runs)
	slices.SortStableFunc(runs, func(a, b *Run) int {
		ia, _ := parseShards(a.Shard)
		ib, _ := parseShards(b.Shard)
		return slices.Compare(ia, ib)
	})
	first := runs[0]
	m := &Run{
		Scenario: first.Scenario, File: first.File, Description: first.Description,
		Size: first.Size, Reps: first.Reps, Emulator: first.Emulator,
		Axes: slices.Clone(first.Axes), Only: slices.Clone(first.Only),
		Workload: first.Workload, Realtime: first.Realtime,
		LatencyIntervalMs: first.LatencyIntervalMs, LatencyIdleMs: first.LatencyIdleMs, ECN: first.ECN,
		Points: []Point{},
	}
	m.Seed = first.Seed
	shards := map[int]bool{}
	total := 0
	owner := map[int]string{}
	for _, r := range runs {
		name := cmp.Or(r.Shard, "whole")
		if err := sameCampaign(first, r); err != nil {
			return nil, fmt.Errorf("merge: shard %s: %w", name, err)
		}
		is, n := parseShards(r.Shard)
		if _, n0 := parseShards(first.Shard); n != n0 {
			return nil, fmt.Errorf("merge: shard %s and shard %s split the campaign differently", name, cmp.Or(first.Shard, "whole"))
		}
		total = n
		for _, i := range is {
			if shards[i] {
				return nil, fmt.Errorf("merge: shard %d/%d given twice", i, n)
			}
			shards[i] = true
		}
		for _, p := range r.Points {
			if o, ok := owner[p.Index]; ok {
				return nil, fmt.Errorf("merge: point %d measured by shard %s and shard %s", p.Index, o, name)
			}
			owner[p.Index] = name
			m.Points = append(m.Points, p)
		}
		// A merged run brings its parts (merging again with the shards it
		// missed); any other run is one part.
		parts := r.Parts
		if len(parts) == 0 {
			parts = []Part{{Provenance: r.Provenance, Host: r.Host, Started: r.Started, Finished: r.Finished, Points: len(r.Points)}}
		}
		m.Parts = append(m.Parts, parts...)
	}
	slices.SortStableFunc(m.Points, func(a, b Point) int { return cmp.Compare(a.Index, b.Index) })

	// The merged provenance is the parts': every host, the widest dates,
	// the highest loads, every warning; one commit and CPU count if they
	// agree.
	var hosts, commits []string
	cpus := m.Parts[0].CPUs
	for _, p := range m.Parts {
		if m.Started.IsZero() || p.Started.Before(m.Started) {
			m.Started = p.Started
		}
		if p.Finished.After(m.Finished) {
			m.Finished = p.Finished
		}
		if p.Host != "" && !slices.Contains(hosts, p.Host) {
			hosts = append(hosts, p.Host)
		}
		commit := p.Commit
		if p.Dirty {
			commit += " (dirty)"
		}
		if !slices.Contains(commits, commit) {
			commits = append(commits, commit)
		}
		if p.CPUs != cpus {
			cpus = 0
		}
		m.LoadStart = max(m.LoadStart, p.LoadStart)
		m.LoadMax = max(m.LoadMax, p.LoadMax)
		m.Dirty = m.Dirty || p.Dirty
		for _, w := range p.Warnings {
			m.Warnings = append(m.Warnings, "shard "+cmp.Or(p.Shard, "whole")+": "+w)
		}
	}
	m.Host = strings.Join(hosts, ", ")
	m.CPUs = cpus // 0 when the machines differ: see Parts
	if len(commits) == 1 {
		m.Commit, m.CommitFrom = m.Parts[0].Commit, m.Parts[0].CommitFrom
	} else {
		m.Warnings = append(m.Warnings, "the shards ran different code: "+strings.Join(commits, ", "))
	}
	var missing []string
	for i := 0; i < total; i++ {
		if !shards[i] {
			missing = append(missing, fmt.Sprintf("%d/%d", i, total))
		}
	}
	if len(missing) > 0 {
		m.Warnings = append(m.Warnings, "shards not merged (their points are missing): "+strings.Join(missing, ", "))
		m.Shard = mergedShards(shards, total)
	}
	return m, nil
}

// sameCampaign reports how b differs from a in what makes a campaign.
func sameCampaign(a, b *Run) error {
	diff := func(what string, x, y any) error {
		return fmt.Errorf("%s %v, not %v as in the first shard", what, y, x)
	}
	switch {
	case a.Scenario != b.Scenario:
		return diff("scenario", a.Scenario, b.Scenario)
	case a.Seed != b.Seed:
		return fmt.Errorf("seed %d, not %d as in the first shard: its loss sequences differ; run every shard with one --seed", b.Seed, a.Seed)
	case a.Size != b.Size:
		return diff("download size", a.Size, b.Size)
	case a.Reps != b.Reps:
		return diff("repetitions", a.Reps, b.Reps)
	case a.Emulator != b.Emulator:
		return diff("emulator", a.Emulator, b.Emulator)
	case a.Workload != b.Workload:
		return diff("workload", a.Workload, b.Workload)
	case !slices.Equal(a.Axes, b.Axes):
		return diff("axes", a.Axes, b.Axes)
	case !slices.Equal(a.Only, b.Only):
		return diff("--only", a.Only, b.Only)
	case a.ECN != b.ECN || a.LatencyIntervalMs != b.LatencyIntervalMs || a.LatencyIdleMs != b.LatencyIdleMs:
		return errors.New("ECN or latency probe settings differ from the first shard's")
	}
	return nil
}

// parseShards reads a run's Shard: "I/N", or a merged run's "I,J,…/N";
// nil and 0 for a whole run (or an unreadable field).
func parseShards(s string) (is []int, n int) {
	list, count, ok := strings.Cut(s, "/")
	n, err := strconv.Atoi(count)
	if !ok || err != nil || n < 1 {
		return nil, 0
	}
	for _, f := range strings.Split(list, ",") {
		i, err := strconv.Atoi(f)
		if err != nil || i < 0 || i >= n {
			return nil, 0
		}
		is = append(is, i)
	}
	return is, n
}

// mergedShards names the shards of an incomplete merge: "0,1,3/4".
func mergedShards(have map[int]bool, n int) string {
	var is []string
	for i := 0; i < n; i++ {
		if have[i] {
			is = append(is, strconv.Itoa(i))
		}
	}
	return strings.Join(is, ",") + "/" + strconv.Itoa(n)
}
