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
	// Any JSON object decodes into a Run; a bench's or a mesh's results
	// have no points and would merge into an empty campaign.
	if run.Points == nil {
		return nil, fmt.Errorf("%s: not the results of lab run (no points)", path)
	}
	return &run, nil
}

// Merge joins the shard runs of one campaign (`--shard I/N`) into one run
// as docs/lab.md ("Shards") describes; runs that cannot belong to one
// campaign (sameCampaign), or that measured the same point, are an error.
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
	_, total := parseShards(first.Shard)
	// The setup is the first shard's, which sameCampaign holds the others
	// to; the provenance is made from the parts below.
	m := *first
	m.Axes, m.Only = slices.Clone(first.Axes), slices.Clone(first.Only)
	m.Provenance, m.Host, m.Parts, m.Points = Provenance{Seed: first.Seed}, "", nil, []Point{}
	shards := map[int]bool{}
	owner := map[int]string{}
	for _, r := range runs {
		name := cmp.Or(r.Shard, "whole")
		if err := sameCampaign(first, r); err != nil {
			return nil, fmt.Errorf("merge: shard %s: %w", name, err)
		}
		is, n := parseShards(r.Shard)
		if n != total {
			return nil, fmt.Errorf("merge: shard %s and shard %s split the campaign differently", name, cmp.Or(first.Shard, "whole"))
		}
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
	m.Started = slices.MinFunc(m.Parts, func(a, b Part) int { return a.Started.Compare(b.Started) }).Started
	m.Finished = slices.MaxFunc(m.Parts, func(a, b Part) int { return a.Finished.Compare(b.Finished) }).Finished
	var hosts, commits []string
	m.CPUs = m.Parts[0].CPUs // 0 when the machines differ: see Parts
	for _, p := range m.Parts {
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
		if p.CPUs != m.CPUs {
			m.CPUs = 0
		}
		m.LoadStart = max(m.LoadStart, p.LoadStart)
		m.LoadMax = max(m.LoadMax, p.LoadMax)
		m.Dirty = m.Dirty || p.Dirty
		for _, w := range p.Warnings {
			m.Warnings = append(m.Warnings, "shard "+cmp.Or(p.Shard, "whole")+": "+w)
		}
	}
	m.Host = strings.Join(hosts, ", ")
	if len(commits) == 1 {
		m.Commit, m.CommitFrom = m.Parts[0].Commit, m.Parts[0].CommitFrom
	} else {
		m.Warnings = append(m.Warnings, "the shards ran different code: "+strings.Join(commits, ", "))
	}
	var have, missing []string
	for i := range total {
		if shards[i] {
			have = append(have, strconv.Itoa(i))
		} else {
			missing = append(missing, fmt.Sprintf("%d/%d", i, total))
		}
	}
	if len(missing) > 0 {
		m.Warnings = append(m.Warnings, "shards not merged (their points are missing): "+strings.Join(missing, ", "))
		m.Shard = strings.Join(have, ",") + "/" + strconv.Itoa(total) // "0,1,3/4"
	}
	return &m, nil
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
	case a.CompetingTransport != b.CompetingTransport:
		return diff("competing transport", a.CompetingTransport, b.CompetingTransport)
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
