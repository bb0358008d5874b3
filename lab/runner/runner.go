// Package runner runs a scenario's experiments: for every point it builds
// (or keeps) the testbed, sets up the transport under test, downloads the
// file Experiment.Reps times from the web server to the client and
// summarizes the goodput as the paper does (mean and 95% Student-t CI).
//
// Transports are looked up by name in a registry (Register), so packages
// that add tunnels (tcp-tunnel, openvpn, …) plug in without touching the
// runner. The built-in ones are direct, mptcp-direct and braid.
package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/braid-vpn/braid/lab/progress"
	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/lab/stats"
	"github.com/braid-vpn/braid/lab/testbed"
)

// Defaults of a run.
const (
	// RepPause separates downloads so that the previous one's last packets
	// and the link queues are gone before the next starts.
	RepPause = 200 * time.Millisecond
	// RetransWait bounds waiting for the web server to close a connection
	// and report its retransmissions.
	RetransWait = 2 * time.Second
)

// ErrNotRoot is returned when the runner lacks the privileges to build
// network namespaces.
var ErrNotRoot = errors.New("the lab needs root (it creates network namespaces, veth pairs and TUN devices): run it with sudo")

// Options of a run.
type Options struct {
	// Reps and Size override the scenario's experiment when > 0.
	Reps int
	Size int64
	// Progress, if set, gets a progress line per download (a failed point
	// counts its downloads as done), redrawn in place if Terminal.
	Progress io.Writer
	Terminal bool
	// Braid is how braid daemons are started (default: this executable).
	Braid BraidCommand
	// Prefix names the testbed's namespaces ("" = testbed.Prefix).
	Prefix string
	// Only, if set, restricts the run to the points it matches.
	Only *scenario.Selection
	// Emulator is the link emulator backend: testbed.EmulatorUserspace,
	// EmulatorNetem or EmulatorAuto ("" = auto).
	Emulator string
	// Seed is the campaign seed when > 0; else the scenario's, else a
	// random one (NewSeed). The run records it.
	Seed uint64
	// Shard restricts the run to one shard of the (selected) points.
	Shard scenario.Shard
	// Command is the command line the run records (os.Args).
	Command []string
	// Warn, if set, is told at once what the run records as a warning
	// (a busy machine).
	Warn func(msg string)
}

// Run measures every point of s. On cancellation (Ctrl-C) it tears the
// testbed down and returns the points finished so far with ctx's error.
func Run(ctx context.Context, s *scenario.Scenario, opt Options) (*results.Run, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	points := s.Points()
	if opt.Only != nil {
		points = opt.Only.Points(s)
	}
	points = opt.Shard.Filter(points)
	if len(points) == 0 {
		if !opt.Shard.Whole() {
			return nil, fmt.Errorf("scenario %s: shard %s has no point to run", s.Name, opt.Shard)
		}
		return nil, fmt.Errorf("scenario %s: no point to run", s.Name)
	}
	if err := checkRunnable(points); err != nil {
		return nil, err
	}
	emu, err := testbed.ResolveEmulator(opt.Emulator)
	if err != nil {
		return nil, err
	}
	if emu == testbed.EmulatorNetem && opt.Emulator != testbed.EmulatorNetem && len(s.Topology.Media) > 0 {
		emu = testbed.EmulatorUserspace // netem has no shared media; auto falls back
	}
	opt.Emulator = emu
	exp := s.Experiment
	if opt.Reps > 0 {
		exp.Reps = opt.Reps
	}
	if opt.Size > 0 {
		exp.Size = opt.Size
	}
	if opt.Seed > 0 {
		exp.Seed = opt.Seed
	}
	if exp.Seed == 0 {
		exp.Seed = NewSeed()
	}
	host, _ := os.Hostname()
	run := &results.Run{
		Scenario: s.Name, File: s.File, Description: s.Description,
		Started: time.Now(), Size: exp.Size, Reps: exp.Reps,
		Emulator: emu, Host: host, Only: opt.Only.Specs(), ECN: exp.ECN,
	}
	run.Seed, run.Shard, run.Command = exp.Seed, opt.Shard.String(), opt.Command
	run.Commit, run.CommitFrom, run.Dirty = SourceCommit()
	load := startLoadMonitor(LoadInterval)
	run.CPUs, run.LoadStart = runtime.NumCPU(), load.start
	if w := HighLoadWarning(run.LoadStart, run.CPUs); w != "" {
		run.Warnings = append(run.Warnings, w)
		if opt.Warn != nil {
			opt.Warn(w)
		}
	}
	if exp.Latency {
		run.LatencyIntervalMs, run.LatencyIdleMs = stats.Ms(exp.LatencyInterval), stats.Ms(exp.LatencyIdle)
	}
	if exp.Workload == scenario.WorkloadRealtime {
		rt := exp.Realtime
		run.Workload = scenario.WorkloadRealtime
		run.Realtime = &results.RealtimeSetup{
			RateMbps: float64(rt.Rate) / 1e6, Size: rt.Size, Seconds: rt.Duration.Seconds(),
			Packets: rt.Packets(), DeadlineMs: stats.Ms(rt.Deadline),
		}
	}
	for _, a := range s.Axes() {
		run.Axes = append(run.Axes, string(a))
	}
	r := &runState{opt: opt, exp: exp, bar: progress.New(cmp.Or[io.Writer](opt.Progress, io.Discard), len(points)*exp.Reps, opt.Terminal)}
	defer r.closeNet()
	defer r.bar.Done()

	for i := range points {
		p := &points[i]
		if err = ctx.Err(); err != nil {
			break
		}
		if r.tb == nil || p.Network != r.network {
			r.closeNet()
			if err = r.openNet(p); err != nil {
				break
			}
		}
		rp := r.measure(ctx, p)
		if ctx.Err() != nil {
			err = ctx.Err()
			break
		}
		run.Points = append(run.Points, rp)
	}
	run.LoadMax = load.finish()
	run.Finished = time.Now()
	return run, err
}

type runState struct {
	opt     Options
	exp     scenario.Experiment
	bar     *progress.Bar
	network int
	tb      *testbed.Testbed
	web     *WebServer
	udp     *UDPService
	cc      string
}

func (r *runState) openNet(p *scenario.Point) error {
	tb, err := testbed.Build(p.Topology, testbed.Options{Prefix: r.opt.Prefix, Seed: r.exp.Seed, Emulator: r.opt.Emulator})
	if err != nil {
		return err
	}
	cc := p.Topology.Web().TCP.Congestion
	web, err := StartWeb(tb.Web(), tb.Plan.WebAddr, cc)
	if err != nil {
		tb.Close()
		return err
	}
	udp, err := StartUDP(tb.Web(), tb.Plan.WebAddr)
	if err != nil {
		web.Close()
		tb.Close()
		return err
	}
	r.tb, r.web, r.udp, r.network, r.cc = tb, web, udp, p.Network, cc
	return nil
}

func (r *runState) closeNet() {
	r.udp.Close()
	r.udp = nil
	if r.web != nil {
		r.web.Close()
		r.web = nil
	}
	if r.tb != nil {
		r.tb.Close()
		r.tb = nil
	}
}

// progress counts n downloads of p as done.
func (r *runState) progress(p *scenario.Point, n int) {
	for range n {
		r.bar.Step(p.String())
	}
}

// Options returns a transport's options as results.Point records them:
// only those set.
func TransportOptions(t scenario.Transport) map[string]string {
	m := map[string]string{}
	set := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	set(scenario.OptPath, t.Path)
	set(scenario.OptScheduler, t.Scheduler)
	set(scenario.OptReorder, t.Reorder)
	set(scenario.OptCongestion, t.Congestion)
	set(scenario.OptRecovery, t.Recovery)
	if len(t.Priorities) > 0 {
		m[scenario.OptPriorities] = scenario.FormatTiers(t.Priorities)
	}
	if len(t.Weights) > 0 {
		ws := make([]string, len(t.Weights))
		for i, w := range t.Weights {
			ws[i] = strconv.FormatFloat(w, 'g', -1, 64)
		}
		m[scenario.OptWeights] = strings.Join(ws, "/")
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

func (r *runState) measure(ctx context.Context, p *scenario.Point) results.Point {
	rp := results.Point{
		Index: p.Index, Transport: p.Transport.Name, Label: p.Transport.Label,
		Options: TransportOptions(p.Transport), Samples: []results.Sample{},
	}
	for _, q := range p.Params {
		rp.Params = append(rp.Params, results.Param{Axis: string(q.Axis), Text: q.Text, Value: q.Value})
	}
	dir, err := os.MkdirTemp("", "braid-lab-")
	if err != nil {
		rp.Error = err.Error()
		r.progress(p, r.exp.Reps)
		return rp
	}
	defer os.RemoveAll(dir)
	start, _ := Lookup(p.Transport.Name)
	env := &Env{TB: r.tb, Point: p, CC: r.cc, Web: r.web, Dir: dir, Braid: r.opt.Braid}
	sess, err := start(ctx, env)
	if err != nil {
		rp.Error = fmt.Sprintf("%s: %v", p.Transport.Label, err)
		rp.Goodput = stats.Summarize(nil)
		r.progress(p, r.exp.Reps)
		return rp
	}
	defer sess.Close()

	var errs []string
	var goodputs, competing []float64
	totals := map[string]uint64{}
	for rep := 0; rep < r.exp.Reps; rep++ {
		if ctx.Err() != nil {
			break
		}
		run := r.download
		if r.exp.Workload == scenario.WorkloadRealtime {
			run = r.realtime
		}
		seed := r.reseed(p, rep)
		smp, err := run(ctx, sess, rep)
		r.progress(p, 1)
		if err != nil {
			errs = append(errs, fmt.Sprintf("rep %d: %v", rep, err))
			continue
		}
		smp.Seed, smp.FirstLosses = seed, r.tb.FirstLosses()
		rp.Samples = append(rp.Samples, smp)
		goodputs = append(goodputs, smp.GoodputMbps)
		if smp.CompetingMbps != nil {
			competing = append(competing, *smp.CompetingMbps)
		}
		for k, v := range smp.PathBytes {
			totals[k] += v
		}
		time.Sleep(RepPause)
	}
	rp.Goodput = stats.Summarize(goodputs)
	if len(competing) > 0 {
		c := stats.Summarize(competing)
		rp.Competing = &c
	}
	rp.PathShares = Shares(totals)
	rp.Latency = SummarizeLatency(rp.Samples)
	rp.Realtime = SummarizeRealtime(rp.Samples)
	rp.BulkRecovery = SummarizeBulkRecovery(rp.Samples)
	rp.Events = SummarizeEvents(r.exp.Events, rp.Samples)
	if len(errs) > 0 {
		rp.Error = fmt.Sprintf("%d of %d downloads failed: %s", len(errs), r.exp.Reps, errs[0])
	}
	return rp
}

// reseed restarts the emulators' loss and jitter for repetition rep of p
// from testbed.RepSeed, which the transport does not enter: every transport
// on p's network meets the same loss sequence in repetition rep. It returns
// the seed, or 0 with netem (the kernel's loss cannot be seeded).
func (r *runState) reseed(p *scenario.Point, rep int) uint64 {
	if r.tb.Emulator != testbed.EmulatorUserspace {
		return 0
	}
	seed := testbed.RepSeed(r.exp.Seed, p.Network, rep)
	r.tb.Reseed(seed)
	return seed
}

// Shares turns byte counts into fractions of their sum (nil when nothing
// was counted).
func Shares(b map[string]uint64) map[string]float64 {
	var sum uint64
	for _, v := range b {
		sum += v
	}
	if sum == 0 {
		return nil
	}
	out := make(map[string]float64, len(b))
	for k, v := range b {
		out[k] = float64(v) / float64(sum)
	}
	return out
}

func sub(a, b uint64) uint64 {
	if a < b { // counters restarted (a new session)
		return a
	}
	return a - b
}

// perPath is count of every path by name: the testbed's Delivered (what
// the path's emulator delivered towards the client) or Offered (what it
// took in, both directions).
func (r *runState) perPath(count func(path string) uint64) map[string]uint64 {
	out := map[string]uint64{}
	for _, p := range r.tb.Plan.Paths {
		out[p.Name] = count(p.Name)
	}
	return out
}

// pathCounts are the per-path counters at the start of a repetition.
type pathCounts struct {
	sess Counters
	emu  map[string]uint64
}

func (r *runState) countPaths(ctx context.Context, sess Session) (pathCounts, error) {
	c, err := sess.Counters(ctx)
	if err != nil {
		return pathCounts{}, fmt.Errorf("reading counters: %w", err)
	}
	return pathCounts{sess: c, emu: r.perPath(r.tb.Delivered)}, nil
}

// since returns the transport's counters now and what each path delivered
// towards the client since before: the transport's own per-path counters,
// or the link emulators' when it has none.
func (r *runState) since(ctx context.Context, sess Session, before pathCounts) (Counters, map[string]uint64, error) {
	after, err := sess.Counters(ctx)
	if err != nil {
		return Counters{}, nil, fmt.Errorf("reading counters: %w", err)
	}
	out := map[string]uint64{}
	if after.PathBytes != nil {
		for k, v := range after.PathBytes {
			out[k] = sub(v, before.sess.PathBytes[k])
		}
	} else {
		for k, v := range r.perPath(r.tb.Delivered) {
			out[k] = sub(v, before.emu[k])
		}
	}
	return after, out, nil
}

func (r *runState) download(ctx context.Context, sess Session, rep int) (results.Sample, error) {
	var probes *prober
	if r.exp.Latency {
		conn, err := dialUDP(ctx, sess, r.web.Addr)
		if err != nil {
			return results.Sample{}, fmt.Errorf("latency probes: %w", err)
		}
		probes = startProber(conn, r.exp.LatencyInterval)
		defer func() {
			if probes != nil {
				probes.finish()
			}
		}()
		select {
		case <-time.After(r.exp.LatencyIdle):
		case <-ctx.Done():
			return results.Sample{}, ctx.Err()
		}
	}
	idleEnd := 0
	if probes != nil {
		idleEnd = probes.count()
	}
	before, err := r.countPaths(ctx, sess)
	if err != nil {
		return results.Sample{}, err
	}
	var comp *competition
	if r.exp.Competing > 0 {
		if comp, err = r.startCompeting(ctx); err != nil {
			return results.Sample{}, err
		}
		defer comp.stop()
	}
	compBefore := comp.bytes()
	loadStart := idleEnd
	if probes != nil {
		loadStart = probes.count()
	}
	var events *eventRun
	if len(r.exp.Events) > 0 {
		events = startEvents(r.tb, r.exp.Events)
	}
	res, local, err := Fetch(ctx, sess, r.exp.Size, r.exp.Timeout)
	var outcomes []results.EventOutcome
	var phases []results.Phase
	if events != nil {
		var changed bool
		var evErr error
		outcomes, phases, changed, evErr = events.finish(time.Since(events.start))
		if changed {
			defer time.Sleep(EventSettle)
		}
		if err == nil && evErr != nil {
			err = fmt.Errorf("path events: %w", evErr)
		}
	}
	if err != nil {
		return results.Sample{}, err
	}
	// The counters are read as soon as the download ends, before the
	// latency probes' wait for stragglers, so that they cover the download
	// only.
	after, pathBytes, err := r.since(ctx, sess, before)
	if err != nil {
		return results.Sample{}, err
	}
	compMbps := float64(comp.bytes()-compBefore) * 8 / res.Duration.Seconds() / 1e6
	var lat *results.Latency
	if probes != nil {
		loadEnd := probes.count()
		rtts := probes.finish()
		probes = nil
		l, err := AddedDelay(rtts[:idleEnd], rtts[loadStart:loadEnd])
		if err != nil {
			return results.Sample{}, err
		}
		lat = &l
	}
	smp := results.Sample{
		Rep: rep, GoodputMbps: res.GoodputMbps(), Seconds: res.Duration.Seconds(), Bytes: res.Bytes,
		MaxStallMs:      stats.Ms(res.MaxStall),
		Reordered:       sub(after.Reordered, before.sess.Reordered),
		ReorderTimeouts: sub(after.ReorderTimeouts, before.sess.ReorderTimeouts),
		PathBytes:       pathBytes,
		Latency:         lat,
		Events:          outcomes,
		Phases:          phases,
	}
	if before.sess.Sender != nil && after.Sender != nil {
		smp.BulkRecovery = BulkOverhead(*before.sess.Sender, *after.Sender, res.Bytes)
	}
	if comp != nil {
		smp.CompetingMbps = &compMbps
	}
	smp.Retransmits = r.web.Retransmits(local, RetransWait)
	return smp, nil
}
