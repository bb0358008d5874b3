// Package runner runs a scenario's experiments (docs/lab.md): for every
// point it builds (or keeps) the testbed, starts the transport under test
// (Register) and measures and summarizes Experiment.Reps repetitions.
package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/httpbench"
	"github.com/braid-vpn/braid/lab/progress"
	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/lab/stats"
	"github.com/braid-vpn/braid/lab/testbed"
	"github.com/braid-vpn/braid/wire"
)

// Timing of a run: RepPause separates repetitions (the previous one's last
// packets and queues gone); RetransWait bounds waiting for the web server to
// report a connection's retransmissions; the competing downloads start
// CompetingLead before the measured one (it meets them in congestion
// avoidance) and ask for competingSize bytes, hours at the lab's rates.
const (
	RepPause      = 200 * time.Millisecond
	RetransWait   = 2 * time.Second
	CompetingLead = 2 * time.Second
	competingSize = 1 << 34
)

// ErrNotRoot is returned when the runner lacks the privileges to build
// network namespaces.
var ErrNotRoot = errors.New("the lab needs root (it creates network namespaces, veth pairs and TUN devices): run it with sudo")

// Options of a run.
type Options struct {
	Reps int   // overrides the scenario's when > 0
	Size int64 // overrides the scenario's when > 0
	// Progress, if set, gets a progress line per download (a failed point
	// counts its downloads as done), redrawn in place if Terminal.
	Progress io.Writer
	Terminal bool
	Braid    BraidCommand        // how braid daemons start (default: this executable)
	Prefix   string              // names the testbed's namespaces ("" = testbed.Prefix)
	Only     *scenario.Selection // if set, restricts the run to the points it matches
	Emulator string              // testbed.EmulatorUserspace, EmulatorNetem or EmulatorAuto ("" = auto)
	Seed     uint64              // the campaign seed when > 0; else the scenario's, else NewSeed()
	Shard    scenario.Shard      // restricts the run to one shard of the (selected) points
	Command  []string            // the command line the run records (os.Args)
	Warn     func(msg string)    // if set, told at once what the run records as a warning
}

// Run measures every point of s. On cancellation (Ctrl-C) it tears the
// testbed down and returns the points finished so far with ctx's error.
func Run(ctx context.Context, s *scenario.Scenario, opt Options) (*results.Run, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	points := opt.Shard.Filter(opt.Only.Points(s))
	if len(points) == 0 && !opt.Shard.Whole() {
		return nil, fmt.Errorf("scenario %s: shard %s has no point to run", s.Name, opt.Shard)
	} else if len(points) == 0 {
		return nil, fmt.Errorf("scenario %s: no point to run", s.Name)
	}
	if err := checkRunnable(points); err != nil {
		return nil, err
	}
	emu, err := testbed.ResolveEmulator(opt.Emulator)
	if err != nil {
		return nil, err
	}
	if emu == testbed.EmulatorNetem && opt.Emulator != testbed.EmulatorNetem && (len(s.Topology.Media) > 0 || s.Topology.Traced()) {
		emu = testbed.EmulatorUserspace // netem has no shared media and no traces; auto falls back
	}
	opt.Emulator = emu
	exp := s.Experiment
	exp.Reps, exp.Size = cmp.Or(max(opt.Reps, 0), exp.Reps), cmp.Or(max(opt.Size, 0), exp.Size)
	if exp.Seed = cmp.Or(opt.Seed, exp.Seed); exp.Seed == 0 {
		exp.Seed = NewSeed()
	}
	host, _ := os.Hostname()
	run := &results.Run{
		Scenario: s.Name, File: s.File, Description: s.Description, Started: time.Now(), Size: exp.Size, Reps: exp.Reps,
		Emulator: emu, Host: host, Only: opt.Only.Specs(), ECN: exp.ECN, CompetingTransport: exp.CompetingTransport,
	}
	run.Seed, run.Shard, run.Command = exp.Seed, opt.Shard.String(), opt.Command
	run.Commit, run.CommitFrom, run.Dirty = SourceCommit()
	loadStart, loadMax := watchLoad(LoadInterval)
	run.CPUs, run.LoadStart = runtime.NumCPU(), loadStart
	if w := HighLoadWarning(run.LoadStart, run.CPUs); w != "" {
		run.Warnings = append(run.Warnings, w)
		if opt.Warn != nil {
			opt.Warn(w)
		}
	}
	if exp.Latency {
		run.LatencyIntervalMs, run.LatencyIdleMs = stats.Ms(exp.LatencyInterval), stats.Ms(exp.LatencyIdle)
	}
	if rt := exp.Realtime; exp.Workload == scenario.WorkloadRealtime {
		run.Workload = scenario.WorkloadRealtime
		run.Realtime = &results.RealtimeSetup{RateMbps: float64(rt.Rate) / 1e6, Size: rt.Size, Seconds: rt.Duration.Seconds(),
			Packets: rt.Packets(), DeadlineMs: stats.Ms(rt.Deadline)}
	}
	for _, a := range s.Axes() {
		run.Axes = append(run.Axes, string(a))
	}
	r := &runState{opt: opt, exp: exp, bar: progress.New(cmp.Or[io.Writer](opt.Progress, io.Discard), len(points)*exp.Reps, opt.Terminal)}
	defer r.closeNet()
	defer r.bar.Done()
	for i := range points {
		p := &points[i]
		if err = ctx.Err(); err == nil && (r.tb == nil || p.Network != r.network) {
			r.closeNet()
			err = r.openNet(p)
		}
		if err != nil {
			break
		}
		rp := r.measure(ctx, p)
		if err = ctx.Err(); err != nil {
			break
		}
		run.Points = append(run.Points, rp)
	}
	run.LoadMax, run.Finished = loadMax(), time.Now()
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
	point   *scenario.Point // being measured
}

// openNet builds p's testbed and starts the web server and the UDP service
// in it; closeNet undoes what it did.
func (r *runState) openNet(p *scenario.Point) (err error) {
	if r.tb, err = testbed.Build(p.Topology, testbed.Options{Prefix: r.opt.Prefix, Seed: r.exp.Seed, Emulator: r.opt.Emulator}); err != nil {
		return err
	}
	r.network, r.cc = p.Network, p.Topology.Web().TCP.Congestion
	if r.web, err = StartWeb(r.tb.Web(), r.tb.Plan.WebAddr, r.cc); err != nil {
		return err
	}
	r.udp, err = StartUDP(r.tb.Web(), r.tb.Plan.WebAddr)
	return err
}

func (r *runState) closeNet() {
	r.udp.Close()
	r.web.Close()
	if r.tb != nil {
		r.tb.Close()
	}
	r.tb, r.web, r.udp = nil, nil, nil
}

// TransportOptions returns a transport's options as results.Point records
// them: only those set.
func TransportOptions(t scenario.Transport) map[string]string {
	m := map[string]string{scenario.OptPath: t.Path, scenario.OptScheduler: t.Scheduler, scenario.OptReorder: t.Reorder,
		scenario.OptCongestion: t.Congestion, scenario.OptRecovery: t.Recovery,
		scenario.OptPriorities: scenario.FormatTiers(t.Priorities)}
	var ws []string
	for _, w := range t.Weights {
		ws = append(ws, strconv.FormatFloat(w, 'g', -1, 64))
	}
	m[scenario.OptWeights] = strings.Join(ws, "/")
	if maps.DeleteFunc(m, func(_, v string) bool { return v == "" }); len(m) == 0 {
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
	steps := func(n int) {
		for range n {
			r.bar.Step(p.String())
		}
	}
	dir, err := os.MkdirTemp("", "braid-lab-")
	var sess Session
	if err == nil {
		defer os.RemoveAll(dir)
		env := &Env{TB: r.tb, Point: p, CC: r.cc, Web: r.web, Dir: dir, Braid: r.opt.Braid,
			Competitor: r.exp.CompetingTransport == scenario.CompetingBraid}
		if sess, err = transports[p.Transport.Name](ctx, env); err != nil {
			err, rp.Goodput = fmt.Errorf("%s: %w", p.Transport.Label, err), stats.Summarize(nil)
		}
	}
	if err != nil {
		rp.Error = err.Error()
		steps(r.exp.Reps)
		return rp
	}
	defer sess.Close()

	var errs []string
	var goodputs []float64
	totals := map[string]uint64{}
	r.point = p
	run := r.download
	if r.exp.Workload == scenario.WorkloadRealtime {
		run = r.realtime
	}
	for rep := 0; rep < r.exp.Reps && ctx.Err() == nil; rep++ {
		// Every transport on p's network meets the same loss sequence in
		// repetition rep (testbed.RepSeed); netem cannot be seeded (0).
		var seed uint64
		if r.tb.Emulator == testbed.EmulatorUserspace {
			seed = testbed.RepSeed(r.exp.Seed, p.Network, rep)
			r.tb.Reseed(seed)
		}
		smp, err := run(ctx, sess, rep)
		steps(1)
		if err != nil {
			errs = append(errs, fmt.Sprintf("rep %d: %v", rep, err))
			continue
		}
		smp.Seed, smp.FirstLosses = seed, r.tb.FirstLosses()
		rp.Samples = append(rp.Samples, smp)
		goodputs = append(goodputs, smp.GoodputMbps)
		for k, v := range smp.PathBytes {
			totals[k] += v
		}
		time.Sleep(RepPause)
	}
	rp.Goodput = stats.Summarize(goodputs)
	rp.Competing = summarizeOne(rp.Samples, func(s *results.Sample) *float64 { return s.CompetingMbps })
	rp.Jain = summarizeOne(rp.Samples, func(s *results.Sample) *float64 { return s.Jain })
	if rp.Offered = summarizeOne(rp.Samples, func(s *results.Sample) *float64 { return s.OfferedMbps }); rp.Offered != nil {
		rp.OfferedUse = summarizeOne(rp.Samples, func(s *results.Sample) *float64 {
			if s.OfferedMbps == nil || *s.OfferedMbps <= 0 {
				return nil
			}
			return new(s.GoodputMbps / *s.OfferedMbps)
		})
	}
	rp.PathShares = Shares(totals)
	rp.Latency, rp.Realtime = SummarizeLatency(rp.Samples), SummarizeRealtime(rp.Samples)
	rp.BulkRecovery, rp.Events = SummarizeBulkRecovery(rp.Samples), SummarizeEvents(r.exp.Events, rp.Samples)
	if len(errs) > 0 {
		rp.Error = fmt.Sprintf("%d of %d downloads failed: %s", len(errs), r.exp.Reps, errs[0])
	}
	return rp
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

// sub is a counter's growth from b to a: a when it restarted (a new session).
func sub(a, b uint64) uint64 {
	if a < b {
		return a
	}
	return a - b
}

// since is every counter of now grown since before.
func since(now, before map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range now {
		out[k] = sub(v, before[k])
	}
	return out
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

// capacity sums testbed.Capacity over the paths the point's transport
// uses: its one path, or every path. ok is false when one of them has no
// known capacity.
func (r *runState) capacity() (bytes uint64, ok bool) {
	paths := r.tb.Plan.Paths
	if k, _ := scenario.LookupTransport(r.point.Transport.Name); k.Accepts(scenario.OptPath) {
		p, err := pathFor(&Env{TB: r.tb, Point: r.point})
		if err != nil {
			return 0, false
		}
		paths = []testbed.Path{p}
	}
	for _, p := range paths {
		b, has := r.tb.Capacity(p.Name)
		if !has {
			return 0, false
		}
		bytes += b
	}
	return bytes, len(paths) > 0
}

// Efficiency is the share of a full-size download frame that is the
// download's payload, which turns a link's frame bytes into goodput: the
// inner TCP's MSS in braid's datagram at the default inner MTU for braid's
// UDP transports, a TCP segment's payload (timestamps on) for the others.
// Ethernet, IPv4 and UDP/TCP headers without options are counted.
func Efficiency(transport string) float64 {
	const eth, ip4, udp, tcp = 14, 20, 8, 32 // tcp: 20 + 12 of timestamps
	switch transport {
	case scenario.TransportBraid, scenario.TransportUDPTunnel:
		inner := float64(config.DefaultMTU)
		return (inner - ip4 - tcp) / (inner + wire.DataPacketOverhead + udp + ip4 + eth)
	}
	return float64(1500-ip4-tcp) / (1500 + eth)
}

// counters reads sess's counters, with what the link emulators delivered
// per path when sess counts none.
func (r *runState) counters(ctx context.Context, sess Session) (Counters, error) {
	c, err := sess.Counters(ctx)
	if err != nil {
		return c, fmt.Errorf("reading counters: %w", err)
	}
	if c.PathBytes == nil {
		c.PathBytes = r.perPath(r.tb.Delivered)
	}
	return c, nil
}

func (r *runState) download(ctx context.Context, sess Session, rep int) (results.Sample, error) {
	var probes func() (sent, rtt []time.Duration)
	var idleEnd time.Duration
	if r.exp.Latency {
		conn, err := dialUDP(ctx, sess, r.web.Addr)
		if err != nil {
			return results.Sample{}, fmt.Errorf("latency probes: %w", err)
		}
		probes = sync.OnceValues(startProber(conn, r.exp.LatencyInterval))
		defer probes()
		select {
		case <-time.After(r.exp.LatencyIdle):
		case <-ctx.Done():
			return results.Sample{}, ctx.Err()
		}
		idleEnd = clock()
	}
	before, err := r.counters(ctx, sess)
	if err != nil {
		return results.Sample{}, err
	}
	var competing *atomic.Int64
	if r.exp.Competing > 0 {
		var stop func()
		if competing, stop, err = r.startCompeting(ctx, sess); err != nil {
			return results.Sample{}, err
		}
		defer stop()
	}
	capStart, hasCap := r.capacity()
	loadStart := clock()
	smp := results.Sample{Rep: rep}
	events := startEvents(r.tb, r.exp.Events)
	defer events.settle()
	if competing != nil { // counted over the download only
		competing.Store(0)
	}
	res, local, err := Fetch(ctx, sess, r.exp.Size, r.exp.Timeout)
	var compBytes int64
	if competing != nil {
		compBytes = competing.Load()
	}
	var evErr error
	if smp.Events, smp.Phases, evErr = events.finish(); err == nil && evErr != nil {
		err = fmt.Errorf("path events: %w", evErr)
	}
	if err != nil {
		return results.Sample{}, err
	}
	// Read as soon as the download ends, before the probes' wait for
	// stragglers, the counters cover the download only.
	capEnd, _ := r.capacity()
	after, err := r.counters(ctx, sess)
	if err != nil {
		return results.Sample{}, err
	}
	if hasCap {
		off := float64(capEnd-capStart) * Efficiency(r.point.Transport.Name) * 8 / res.Duration.Seconds() / 1e6
		smp.OfferedMbps = &off
	}
	if competing != nil {
		compMbps := float64(compBytes) * 8 / res.Duration.Seconds() / 1e6
		smp.CompetingMbps = &compMbps
		if r.exp.CompetingTransport == scenario.CompetingBraid { // two clients: how fairly they split the bottleneck
			smp.Jain = new(stats.Jain(res.GoodputMbps(), compMbps))
		}
	}
	if probes != nil {
		loadEnd := clock()
		sent, rtts := probes()
		phase := func(from, to time.Duration) (out []time.Duration) { // the RTTs of the probes sent in [from, to)
			for i, t := range sent {
				if t >= from && t < to {
					out = append(out, rtts[i])
				}
			}
			return out
		}
		l, err := AddedDelay(phase(0, idleEnd), phase(loadStart, loadEnd))
		if err != nil {
			return results.Sample{}, err
		}
		smp.Latency = &l
	}
	smp.GoodputMbps, smp.Seconds, smp.Bytes, smp.MaxStallMs = res.GoodputMbps(), res.Duration.Seconds(), res.Bytes, stats.Ms(res.MaxStall)
	smp.Reordered, smp.ReorderTimeouts = sub(after.Reordered, before.Reordered), sub(after.ReorderTimeouts, before.ReorderTimeouts)
	smp.PathBytes = since(after.PathBytes, before.PathBytes)
	if before.Sender != nil && after.Sender != nil {
		smp.BulkRecovery = BulkOverhead(*before.Sender, *after.Sender, res.Bytes)
	}
	smp.Retransmits = r.web.Retransmits(local, RetransWait)
	return smp, nil
}

// competingDialer is how the competing downloads alongside sess's dial and
// what they go over (for errors): ordinary TCP from one path's address, or
// through sess's competing braid client.
func (r *runState) competingDialer(sess Session) (d Dialer, over string, err error) {
	if r.exp.CompetingTransport == scenario.CompetingBraid {
		c, ok := sess.(interface{ Competitor() (Dialer, bool) })
		if ok {
			d, ok = c.Competitor()
		}
		if !ok {
			return d, "", fmt.Errorf("competing flows: transport %s started no competing braid client", r.point.Transport.Label)
		}
		return d, "the competing braid client", nil
	}
	pa, ok := r.tb.Plan.Path(r.exp.CompetingPath)
	if !ok {
		return d, "", fmt.Errorf("competing flows: no path %q", r.exp.CompetingPath)
	}
	return Dialer{NS: r.tb.Client(), From: pa.ClientAddr, CC: r.cc}, r.exp.CompetingPath, nil
}

// startCompeting starts the competing downloads alongside one of sess's
// measured downloads: n counts their bytes since it returned, stop ends
// them.
func (r *runState) startCompeting(ctx context.Context, sess Session) (n *atomic.Int64, stop func(), err error) {
	d, over, err := r.competingDialer(sess)
	if err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	n, stop = new(atomic.Int64), func() { cancel(); wg.Wait() }
	errs := make(chan error, r.exp.Competing)
	dial := d.Dial
	url := httpbench.URL(netip.AddrPortFrom(r.web.Addr, WebPort).String(), competingSize)
	for range r.exp.Competing {
		wg.Go(func() {
			var prev int64
			_, err := httpbench.Fetch(cctx, url, httpbench.Options{Dial: dial, OnProgress: func(total int64) {
				n.Add(total - prev)
				prev = total
			}})
			if err != nil && cctx.Err() == nil {
				errs <- err
			}
		})
	}
	select {
	case <-time.After(CompetingLead):
	case <-ctx.Done():
	}
	for len(errs) > 0 {
		err = errors.Join(err, <-errs)
	}
	if err == nil && n.Swap(0) == 0 {
		err = errors.New("no byte arrived")
	}
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("competing flows over %s: %w", over, err)
	}
	return n, stop, nil
}
