package mesh

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/braid-vpn/braid/lab/linkemu"
	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/lab/stats"
	"github.com/braid-vpn/braid/route"
	"github.com/braid-vpn/braid/route/study"
)

// Defaults of Experiment.
const (
	DefaultNodes      = 32
	DefaultTopologies = 10
	DefaultSeed       = 1
	DefaultSize       = 4 << 20
	DefaultReps       = 3
	DefaultCC         = "cubic"
	// DefaultTimeoutBase plus the download at DefaultTimeoutRate is a
	// download's time limit when Experiment.Timeout is 0: far beyond any
	// goodput the mesh gives, so only a stuck transfer hits it.
	DefaultTimeoutBase = 30 * time.Second
	DefaultTimeoutRate = 500_000 // bit/s
	// MaxCandidatesPerTopology bounds the layouts examined per wanted one
	// (the seed's feasible share at 32 nodes is about 4%).
	MaxCandidatesPerTopology = 1000
)

// Algorithms are the seed's greedy algorithms, whose pairs Fig. 10 compares.
var Algorithms = []route.Algorithm{route.LD, route.ND, route.ZD}

// Experiment is the seed's Fig. 10 on emulated meshes: on random
// topologies where LD, ND and ZD each find two paths, single-path TCP
// over the shortest path against braid over each algorithm's first two
// paths, on one channel and on two.
type Experiment struct {
	// Nodes, Topologies and Seed choose the layouts (see Topologies).
	Nodes, Topologies int
	Seed              uint64
	// Topology, if set, replaces the random layouts with this one; the
	// algorithms that find fewer than two paths on it are skipped.
	Topology   *route.Topology
	Channels   []Channels        // the radio models to run braid on; default both
	Algorithms []route.Algorithm // default Algorithms
	Size       int64             // each download's, in bytes
	Reps       int               // downloads per measurement
	Mesh       Config            // the link model
	// CC is the downloads' TCP congestion control (inside the tunnel for
	// braid). Scheduler is braid's ("" = its default).
	CC, Scheduler string
	Timeout       time.Duration       // bounds each download (see DefaultTimeoutBase)
	Braid         runner.BraidCommand // how to start braid
	Prefix        string              // names the namespaces
	Progress      func(label string)  // if set, told about every download, done or given up
}

func (e *Experiment) fill() error {
	e.Nodes = cmp.Or(e.Nodes, DefaultNodes)
	e.Topologies = cmp.Or(e.Topologies, DefaultTopologies)
	e.Seed = cmp.Or(e.Seed, DefaultSeed)
	if len(e.Channels) == 0 {
		e.Channels = []Channels{SingleChannel, TwoChannels}
	}
	if len(e.Algorithms) == 0 {
		e.Algorithms = Algorithms
	}
	e.Size = cmp.Or(e.Size, DefaultSize)
	e.Reps = cmp.Or(e.Reps, DefaultReps)
	e.CC = cmp.Or(e.CC, DefaultCC)
	e.Timeout = cmp.Or(e.Timeout, DefaultTimeoutBase+time.Duration(float64(e.Size*8)/DefaultTimeoutRate*float64(time.Second)))
	if e.Topology != nil {
		e.Topologies = 1
	}
	if e.Progress == nil {
		e.Progress = func(string) {}
	}
	switch {
	case e.Nodes < 2:
		return fmt.Errorf("mesh: %d nodes (want ≥ 2)", e.Nodes)
	case e.Topologies < 1:
		return fmt.Errorf("mesh: %d topologies (want ≥ 1)", e.Topologies)
	case e.Size < 1:
		return fmt.Errorf("mesh: download size %d", e.Size)
	case e.Reps < 1:
		return fmt.Errorf("mesh: %d repetitions", e.Reps)
	case e.Timeout < 0:
		return fmt.Errorf("mesh: timeout %v", e.Timeout)
	}
	for _, c := range e.Channels {
		if !c.valid() {
			return fmt.Errorf("mesh: %d channels (want 1 or 2)", int(c))
		}
	}
	for _, a := range e.Algorithms {
		if !a.Greedy() {
			return fmt.Errorf("mesh: algorithm %q (the experiment compares the greedy ld, nd, zd)", a)
		}
	}
	return e.Mesh.fill()
}

// Steps is the number of Progress calls a run makes: one per download.
func (e Experiment) Steps() int {
	if e.fill() != nil {
		return 0
	}
	return e.Topologies * e.Reps * (1 + len(e.Algorithms)*len(e.Channels))
}

// Case names one transport over one kind of route pair: "tcp", or braid
// as "ld-1ch", "nd-2ch", ….
type Case struct {
	Algo     route.Algorithm `json:"algo,omitempty"`
	Channels Channels        `json:"channels,omitempty"`
}

// TCP is the single-path baseline over the shortest path.
var TCP = Case{}

// Name is the case's short name.
func (c Case) Name() string {
	if c.Algo == "" {
		return "tcp"
	}
	return fmt.Sprintf("%s-%s", c.Algo, c.Channels)
}

// Label is the case's name in tables and legends.
func (c Case) Label() string {
	if c.Algo == "" {
		return "TCP, shortest path"
	}
	ch := "1 channel"
	if c.Channels == TwoChannels {
		ch = "2 channels"
	}
	return fmt.Sprintf("braid %s, %s", strings.ToUpper(string(c.Algo)), ch)
}

// Cases lists the experiment's cases in table order: TCP, then per
// algorithm its channel models.
func (e Experiment) Cases() []Case {
	out := []Case{TCP}
	for _, a := range e.Algorithms {
		for _, ch := range e.Channels {
			out = append(out, Case{Algo: a, Channels: ch})
		}
	}
	return out
}

// Result is a run's outcome, as `braid lab mesh --json` prints it.
type Result struct {
	Nodes        int               `json:"nodes"`
	Topologies   int               `json:"topologies"`
	Seed         uint64            `json:"seed"`
	GraphFile    string            `json:"graph_file,omitempty"`
	Channels     []Channels        `json:"channels"`
	Algorithms   []route.Algorithm `json:"algorithms"`
	Size         int64             `json:"size"`
	Reps         int               `json:"reps"`
	CC           string            `json:"cc"`
	Scheduler    string            `json:"scheduler,omitempty"`
	RateBps      uint64            `json:"rate_bps"`
	MinDelayMs   float64           `json:"min_delay_ms"`
	MaxDelayMs   float64           `json:"max_delay_ms"`
	QueuePackets int               `json:"queue_packets"`
	Host         string            `json:"host,omitempty"`
	Started      time.Time         `json:"started"`
	Finished     time.Time         `json:"finished"`
	Cases        []string          `json:"cases"`

	Runs    []TopologyRun `json:"runs"`
	Summary []SummaryRow  `json:"summary"`
}

// TopologyRun is one topology and what was measured on it.
type TopologyRun struct {
	// Index is the layout's place among the feasible ones (routes show
	// --feasible --index), Candidate its place in the stream.
	Index        int    `json:"index"`
	Candidate    int    `json:"candidate"`
	Src          string `json:"src"`
	Dst          string `json:"dst"`
	ShortestHops int    `json:"shortest_hops"`
	Pairs        []Pair `json:"pairs"`
	// Graph is the topology in the graph file format (docs/routes.md).
	Graph json.RawMessage `json:"graph"`
	// Measurements follow Result.Cases; a case not run is absent.
	Measurements []Measurement `json:"measurements"`
}

// Pair is the route pair one algorithm gives a topology.
type Pair struct {
	Algo  route.Algorithm `json:"algo"`
	Found int             `json:"found"`
	Paths [][]string      `json:"paths,omitempty"`
	Hops  []int           `json:"hops,omitempty"`
}

// Measurement is one case on one topology.
type Measurement struct {
	Case    string        `json:"case"`
	Label   string        `json:"label"`
	Hops    []int         `json:"hops"`
	Samples []Sample      `json:"samples"`
	Goodput stats.Summary `json:"goodput_mbps"`
	// Shares is each path's fraction of the bytes delivered to the
	// source over all samples.
	Shares []float64 `json:"path_shares,omitempty"`
	// MediumDrops counts frames the shared queues dropped; LatenessMs the
	// emulators' worst mean and 99th-percentile timing error so far.
	MediumDrops   uint64  `json:"medium_drops"`
	LatenessMs    float64 `json:"lateness_mean_ms"`
	LatenessP99Ms float64 `json:"lateness_p99_ms"`
	Error         string  `json:"error,omitempty"`
}

// Sample is one download.
type Sample struct {
	Rep         int     `json:"rep"`
	GoodputMbps float64 `json:"goodput_mbps"`
	Seconds     float64 `json:"seconds"`
	Bytes       int64   `json:"bytes"`
	MaxStallMs  float64 `json:"max_stall_ms"`
	// PathBytes is what each path delivered to the source during the
	// download, frames with headers, as the emulators counted them.
	PathBytes []uint64 `json:"path_bytes"`
	// Retransmits are the TCP sender's retransmitted segments (the inner
	// TCP for braid); -1 if unknown.
	Retransmits int64 `json:"retransmits"`
}

// SummaryRow is one case at one shortest-path hop count (0: all).
type SummaryRow struct {
	Case       string `json:"case"`
	Label      string `json:"label"`
	Hops       int    `json:"hops"`
	Topologies int    `json:"topologies"`
	// Goodput is over every download of the case on those topologies,
	// so its interval includes the spread between topologies.
	Goodput stats.Summary `json:"goodput_mbps"`
	// Ratio is the case's mean goodput over TCP's on the same topology,
	// summarized over topologies (TCP's own row has none).
	Ratio *stats.Summary `json:"ratio_to_tcp,omitempty"`
}

// Topologies draws the experiment's layouts with their candidate numbers:
// the first count in the Figs 8–9 stream of `braid routes stats` with the
// given nodes and seed in which LD, ND and ZD all find two paths.
func Topologies(nodes, count int, seed uint64) ([]*route.Topology, []int, error) {
	gen, err := route.NewGenerator(route.DefaultGeoConfig(nodes))
	if err != nil {
		return nil, nil, err
	}
	var s route.Solver
	var out []*route.Topology
	var cands []int
	limit := MaxCandidatesPerTopology * count
	for c := 0; c < limit && len(out) < count; c++ {
		t, err := gen.Next(study.Stream(seed, 2, nodes, c))
		if err != nil {
			return nil, nil, err
		}
		o, err := study.Evaluate(&s, t, false)
		if err != nil {
			return nil, nil, err
		}
		if o.Feasible() {
			cp := *t
			cp.Graph = t.Graph.Clone()
			out = append(out, &cp)
			cands = append(cands, c)
		}
	}
	if len(out) < count {
		return out, cands, fmt.Errorf("mesh: only %d of %d %d-node layouts where LD, ND and ZD all find two paths among %d candidates", len(out), count, nodes, limit)
	}
	return out, cands, nil
}

// Run measures every topology. On cancellation it removes what it built
// and returns the topologies finished so far with ctx's error.
func Run(ctx context.Context, e Experiment) (*Result, error) {
	if err := e.fill(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, runner.ErrNotRoot
	}
	host, _ := os.Hostname()
	res := &Result{
		Nodes: e.Nodes, Topologies: e.Topologies, Seed: e.Seed, Size: e.Size, Reps: e.Reps,
		CC: e.CC, Scheduler: e.Scheduler, Host: host, Started: time.Now(),
		RateBps: e.Mesh.Rate, QueuePackets: e.Mesh.QueuePackets, Channels: e.Channels, Algorithms: e.Algorithms,
		MinDelayMs: stats.Ms(e.Mesh.MinDelay), MaxDelayMs: stats.Ms(e.Mesh.MaxDelay),
	}
	for _, c := range e.Cases() {
		res.Cases = append(res.Cases, c.Name())
	}
	topos, cands := []*route.Topology{e.Topology}, []int{0}
	if e.Topology != nil {
		res.Nodes = e.Topology.Graph.Len()
	} else {
		var err error
		if topos, cands, err = Topologies(e.Nodes, e.Topologies, e.Seed); err != nil {
			return nil, err
		}
	}
	var runErr error
	for i, t := range topos {
		tr, err := e.runTopology(ctx, t, i)
		if runErr = ctx.Err(); runErr != nil {
			break // an interrupted topology is left out
		}
		tr.Candidate = cands[i]
		res.Runs = append(res.Runs, tr)
		if runErr = err; err != nil {
			break
		}
	}
	res.Finished = time.Now()
	res.Summary = Summarize(res.Runs, e.Cases())
	return res, runErr
}

// runTopology measures one topology: for each algorithm with two paths a
// mesh of its pair, TCP on the first such mesh whose first path is the
// shortest path (else on a mesh of the shortest path alone), braid on
// each channel model. An error here is the system's (a mesh that cannot
// be built), not a failed download, which is recorded in its measurement.
func (e *Experiment) runTopology(ctx context.Context, t *route.Topology, index int) (TopologyRun, error) {
	g := t.Graph
	tr := TopologyRun{Index: index, Src: g.ID(t.Src), Dst: g.ID(t.Dst)}
	if data, err := json.Marshal(g); err == nil {
		tr.Graph = data
	}
	shortest, err := route.ShortestPath(g, t.Src, t.Dst, route.HopCount)
	if err != nil {
		return tr, err
	}
	tr.ShortestHops = shortest.Hops()
	where := fmt.Sprintf("topology %d (%d hops)", index, tr.ShortestHops)
	results := map[Case]Measurement{}
	// onMesh builds a mesh of paths with a web server in the destination,
	// measures the cases on it and removes it.
	onMesh := func(paths []route.Path, cases []Case) error {
		plan, err := NewPlan(g, t.Src, t.Dst, paths, e.Mesh)
		if err != nil {
			return err
		}
		m, err := Build(plan, e.Prefix)
		if err != nil {
			return err
		}
		defer m.Close()
		web, err := runner.StartWeb(m.Destination(), plan.Service, e.CC)
		if err != nil {
			return err
		}
		defer web.Close()
		for _, c := range cases {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// TCP on TwoChannels: path 0 alone sees the same on either model.
			if err := m.SetChannels(cmp.Or(c.Channels, TwoChannels)); err != nil {
				return err
			}
			results[c] = e.measure(ctx, m, web, c, where)
		}
		return nil
	}
	tcp := false
	for _, a := range e.Algorithms {
		ps, err := route.Find(g, t.Src, t.Dst, a, 0, route.HopCount)
		if err != nil {
			return tr, err
		}
		pr := Pair{Algo: a, Found: len(ps)}
		if len(ps) >= 2 {
			ps = ps[:2]
			for _, p := range ps {
				pr.Paths = append(pr.Paths, g.IDs(p))
				pr.Hops = append(pr.Hops, p.Hops())
			}
		}
		tr.Pairs = append(tr.Pairs, pr)
		cases := Experiment{Channels: e.Channels, Algorithms: []route.Algorithm{a}}.Cases()[1:] // braid's: TCP comes first
		if len(ps) < 2 {
			for _, c := range cases {
				results[c] = e.failed(Measurement{Case: c.Name(), Label: c.Label()}, where, fmt.Errorf("%s finds %d path(s), not two", a, len(ps)))
			}
			continue
		}
		if !tcp && slices.Equal(ps[0], shortest) {
			tcp, cases = true, append([]Case{TCP}, cases...)
		}
		if err := onMesh(ps, cases); err != nil {
			return tr, err
		}
	}
	if !tcp && ctx.Err() == nil {
		if err := onMesh([]route.Path{shortest}, []Case{TCP}); err != nil {
			return tr, err
		}
	}
	for _, c := range e.Cases() {
		if m, ok := results[c]; ok {
			tr.Measurements = append(tr.Measurements, m)
		}
	}
	return tr, ctx.Err()
}

// failed is meas not measured because of err, its downloads counted as
// skipped so that the progress still adds up.
func (e *Experiment) failed(meas Measurement, where string, err error) Measurement {
	meas.Error, meas.Goodput = err.Error(), stats.Summarize(nil)
	for range e.Reps {
		e.Progress(fmt.Sprintf("%s %s: skipped", where, meas.Case))
	}
	return meas
}

// measure runs the downloads of case c over m: TCP over path 0, the
// shortest path, from its address; braid over every path.
func (e *Experiment) measure(ctx context.Context, m *Mesh, web *runner.WebServer, c Case, where string) Measurement {
	meas := Measurement{Case: c.Name(), Label: c.Label()}
	for k, pp := range m.Plan.Paths {
		if k == 0 || c != TCP {
			meas.Hops = append(meas.Hops, pp.Nodes.Hops())
		}
	}
	sess := m.PathSession(0, e.CC)
	if c != TCP {
		dir, err := os.MkdirTemp("", "braid-mesh-")
		if err != nil {
			return e.failed(meas, where, err)
		}
		defer os.RemoveAll(dir)
		if sess, err = m.StartBraid(ctx, e.Braid, dir, e.Scheduler, e.CC); err != nil {
			return e.failed(meas, where, err)
		}
		defer sess.Close()
	}
	totals, sum := make([]uint64, len(m.Plan.Paths)), uint64(0)
	dropsBefore := m.Dropped()
	var goodputs []float64
	var errs []error
	for rep := range e.Reps {
		if ctx.Err() != nil {
			break
		}
		before := m.Delivered()
		r, local, err := runner.Fetch(ctx, sess, e.Size, e.Timeout)
		label := fmt.Sprintf("%s %s rep %d", where, meas.Case, rep+1)
		if err != nil {
			if ctx.Err() == nil {
				errs = append(errs, fmt.Errorf("rep %d: %w", rep+1, err))
			}
			e.Progress(label + ": failed")
			continue
		}
		s := Sample{
			Rep: rep, GoodputMbps: r.GoodputMbps(), Seconds: r.Duration.Seconds(), Bytes: r.Bytes,
			MaxStallMs: stats.Ms(r.MaxStall), PathBytes: m.Delivered(),
		}
		for k := range s.PathBytes {
			s.PathBytes[k] -= before[k]
			totals[k] += s.PathBytes[k]
			sum += s.PathBytes[k]
		}
		s.Retransmits = web.Retransmits(local, runner.RetransWait)
		meas.Samples = append(meas.Samples, s)
		goodputs = append(goodputs, s.GoodputMbps)
		e.Progress(fmt.Sprintf("%s: %.2f Mbit/s", label, s.GoodputMbps))
		if rep+1 < e.Reps {
			select {
			case <-ctx.Done():
			case <-time.After(runner.RepPause):
			}
		}
	}
	meas.Goodput = stats.Summarize(goodputs)
	if sum > 0 {
		for _, v := range totals {
			meas.Shares = append(meas.Shares, float64(v)/float64(sum))
		}
	}
	meas.MediumDrops = m.Dropped() - dropsBefore
	// The emulators' worst timing error so far, over hops and directions.
	for h := range m.Plan.Hops {
		for _, d := range []linkemu.Direction{linkemu.AtoB, linkemu.BtoA} {
			st := m.tb.LinkEmulator(hopName(h)).Stats(d).Lateness
			meas.LatenessMs, meas.LatenessP99Ms = max(meas.LatenessMs, stats.Ms(st.Mean)), max(meas.LatenessP99Ms, stats.Ms(st.P99))
		}
	}
	if len(errs) > 0 {
		meas.Error = fmt.Sprintf("%d of %d downloads failed: %v", len(errs), e.Reps, errors.Join(errs...))
	}
	return meas
}

// Summarize groups the runs' downloads by case and shortest-path hop
// count (and over all hop counts, Hops 0): mean goodput with its 95%
// interval over downloads, and the ratio to TCP over topologies.
func Summarize(runs []TopologyRun, cases []Case) []SummaryRow {
	var out []SummaryRow
	for _, h := range hopCounts(runs) {
		for _, c := range cases {
			row := SummaryRow{Case: c.Name(), Label: c.Label(), Hops: h}
			var xs, ratios []float64
			for _, r := range runs {
				if h != 0 && r.ShortestHops != h {
					continue
				}
				m := r.measurement(c.Name())
				if m == nil || len(m.Samples) == 0 {
					continue
				}
				row.Topologies++
				for _, s := range m.Samples {
					xs = append(xs, s.GoodputMbps)
				}
				if t := r.measurement(TCP.Name()); c != TCP && t != nil && len(t.Samples) > 0 && t.Goodput.Mean > 0 {
					ratios = append(ratios, m.Goodput.Mean/t.Goodput.Mean)
				}
			}
			row.Goodput = stats.Summarize(xs)
			if c != TCP {
				rs := stats.Summarize(ratios)
				row.Ratio = &rs
			}
			out = append(out, row)
		}
	}
	return out
}

// hopCounts are the runs' shortest-path hop counts, ascending, then 0
// (all).
func hopCounts(runs []TopologyRun) []int {
	var hops []int
	for _, r := range runs {
		hops = append(hops, r.ShortestHops)
	}
	slices.Sort(hops)
	return append(slices.Compact(hops), 0)
}

func (r *TopologyRun) measurement(name string) *Measurement {
	if i := slices.IndexFunc(r.Measurements, func(m Measurement) bool { return m.Case == name }); i >= 0 {
		return &r.Measurements[i]
	}
	return nil
}
