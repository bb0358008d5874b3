package scenario

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The committed scenarios and what each must expand to. Adding a file to
// lab/scenarios without listing it here fails the test, so every file is
// both parsed and looked at.
var committed = map[string]struct {
	points, networks, reps int
	size                   int64
}{
	"smoke.toml":               {points: 3, networks: 1, reps: 3, size: 4 << 20},
	"demo.toml":                {points: 4, networks: 1, reps: 3, size: 8 << 20},
	"rtt-uniform.toml":         {points: 7 * 3 * 3, networks: 21, reps: 20, size: 16 << 20},
	"rtt-ge.toml":              {points: 7 * 4 * 3, networks: 28, reps: 20, size: 16 << 20},
	"rtt-ratio.toml":           {points: 5 * 4 * 5, networks: 20, reps: 20, size: 16 << 20},
	"splits.toml":              {points: 5 * 4 * 4, networks: 20, reps: 20, size: 16 << 20},
	"schedulers.toml":          {points: 5 * 4 * 5, networks: 20, reps: 20, size: 16 << 20},
	"rate-ratio.toml":          {points: 4 * 6, networks: 4, reps: 20, size: 16 << 20},
	"table1.toml":              {points: 3 * 5, networks: 3, reps: 5, size: 16 << 20},
	"rtt-ratio-quick.toml":     {points: 5 * 6, networks: 5, reps: 3, size: 8 << 20},
	"tunnels-single.toml":      {points: 7 * 3 * 6, networks: 21, reps: 20, size: 16 << 20},
	"tunnels-multi.toml":       {points: 7 * 3 * 6, networks: 21, reps: 20, size: 16 << 20},
	"tunnels-mptcp.toml":       {points: 7 * 2 * 6, networks: 14, reps: 20, size: 16 << 20},
	"tunnels-ratio.toml":       {points: 5 * 2 * 6, networks: 10, reps: 20, size: 16 << 20},
	"cc-nornet.toml":           {points: 2 + 9, networks: 1, reps: 5, size: 16 << 20},
	"cc-shared.toml":           {points: 2 + 9, networks: 1, reps: 5, size: 8 << 20},
	"cc-diamond-1ch-both.toml": {points: 4 * (1 + 4), networks: 4, reps: 5, size: 8 << 20},
	"cc-diamond-1ch-one.toml":  {points: 4 * (1 + 4), networks: 4, reps: 5, size: 8 << 20},
	"cc-diamond-2ch-both.toml": {points: 4 * (1 + 4), networks: 4, reps: 5, size: 8 << 20},
	"cc-diamond-2ch-one.toml":  {points: 4 * (1 + 4), networks: 4, reps: 5, size: 8 << 20},
	"recovery-uniform.toml":    {points: 3 * 2 * 4, networks: 6, reps: 5, size: 16 << 20},
	"recovery-ge.toml":         {points: 2 * 2 * 4, networks: 4, reps: 5, size: 16 << 20},
	"recovery-latency.toml":    {points: 2 * 2 * 4, networks: 4, reps: 5, size: 16 << 20},
	"recovery-realtime.toml":   {points: 4, networks: 1, reps: 5, size: 16 << 20},
	"recovery-noloss.toml":     {points: 5 * 3, networks: 5, reps: 5, size: 16 << 20},
	"recovery-shared.toml":     {points: 3, networks: 1, reps: 5, size: 16 << 20},
	"recovery-recheck.toml":    {points: 2 * 4, networks: 2, reps: 5, size: 16 << 20},
	"paths-mtu.toml":           {points: 3, networks: 1, reps: 5, size: 16 << 20},
	"paths-down.toml":          {points: 3, networks: 1, reps: 5, size: 16 << 20},
	"paths-cut.toml":           {points: 3, networks: 1, reps: 5, size: 16 << 20},
	"paths-readdress.toml":     {points: 3, networks: 1, reps: 5, size: 16 << 20},
	"paths-backup.toml":        {points: 2, networks: 1, reps: 5, size: 16 << 20},
	"trace-smoke.toml":         {points: 2, networks: 1, reps: 2, size: 4 << 20},
	"real-lte-fixed.toml":      {points: 4, networks: 1, reps: 5, size: 16 << 20},
	"real-lte-lte.toml":        {points: 4, networks: 1, reps: 5, size: 16 << 20},
	"real-lte-wifi.toml":       {points: 4, networks: 1, reps: 5, size: 16 << 20},
	"real-sat-lte.toml":        {points: 4, networks: 1, reps: 5, size: 16 << 20},
	"real-paths-3.toml":        {points: 3 + 2, networks: 1, reps: 5, size: 16 << 20},
	"real-paths-4.toml":        {points: 4 + 2, networks: 1, reps: 5, size: 16 << 20},
	"real-paths-mixed.toml":    {points: 3 + 2, networks: 1, reps: 5, size: 16 << 20},
	"real-two-clients.toml":    {points: 1, networks: 1, reps: 5, size: 16 << 20},
	"rtt-ratio-8.toml":         {points: 3 * 4, networks: 3, reps: 5, size: 16 << 20},
}

func loadCommitted(t *testing.T, name string) *Scenario {
	t.Helper()
	s, err := Load(filepath.Join("..", "scenarios", name))
	if err != nil {
		t.Fatalf("%v", err)
	}
	return s
}

func TestCommittedScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "scenarios", "*.toml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	for name := range committed {
		if !slices.Contains(names, name) {
			t.Errorf("lab/scenarios/%s is missing", name)
		}
	}
	for _, name := range names {
		want, ok := committed[name]
		if !ok {
			t.Errorf("lab/scenarios/%s is not listed in this test", name)
			continue
		}
		s := loadCommitted(t, name)
		if s.Name+".toml" != name {
			t.Errorf("%s: name = %q", name, s.Name)
		}
		if s.Description == "" {
			t.Errorf("%s: no description", name)
		}
		pts := s.Points()
		if len(pts) != want.points || pts[len(pts)-1].Network+1 != want.networks {
			t.Errorf("%s: %d points in %d networks, want %d in %d", name, len(pts), pts[len(pts)-1].Network+1, want.points, want.networks)
		}
		if s.Experiment.Reps != want.reps || s.Experiment.Size != want.size {
			t.Errorf("%s: reps %d size %d, want %d, %d", name, s.Experiment.Reps, s.Experiment.Size, want.reps, want.size)
		}
		for _, n := range s.Topology.Nodes {
			if n.TCP.Congestion != "cubic" {
				t.Errorf("%s: node %s runs %s, not Table 3's cubic", name, n.Name, n.TCP.Congestion)
			}
		}
	}
}

// idealSeconds is the transfer time of every download of s if each
// transport filled the rates of the paths it uses: a floor under the real
// run time, used to keep the quick scenarios quick.
func idealSeconds(s *Scenario) float64 {
	total := 0.0
	for _, p := range s.Points() {
		var bps float64
		if p.Transport.Path != "" {
			bps = float64(p.Topology.Link(p.Transport.Path).BA.Rate)
		} else {
			for _, l := range p.Topology.Paths() {
				bps += float64(l.BA.Rate)
			}
		}
		total += float64(s.Experiment.Reps) * float64(s.Experiment.Size) * 8 / bps
	}
	return total
}

func TestSmokeScenario(t *testing.T) {
	s := loadCommitted(t, "smoke.toml")
	var labels []string
	for _, tr := range s.Transports {
		labels = append(labels, tr.Label)
	}
	if !slices.Equal(labels, []string{"direct", "mptcp-direct", "braid"}) {
		t.Errorf("transports = %v", labels)
	}
	paths := s.Topology.Paths()
	if len(paths) != 2 || paths[0].AB != paths[1].AB || paths[0].BA != paths[1].BA || !paths[0].AB.Loss.IsZero() {
		t.Errorf("paths are not two equal loss-free paths: %+v", paths)
	}
	// 3 × (4 MiB at 10, 20, 20 Mbit/s) = 3 × (3.36 + 1.68 + 1.68) s.
	if got := idealSeconds(s); math.Abs(got-20.13) > 0.01 {
		t.Errorf("ideal transfer time %.2f s, want 20.13 s", got)
	}
}

func TestDemoScenario(t *testing.T) {
	s := loadCommitted(t, "demo.toml")
	top := s.Topology
	if p, q := top.Link("primary"), top.Link("secondary"); p.RTT() != 10*time.Millisecond || q.RTT() != 40*time.Millisecond {
		t.Errorf("RTTs %v and %v, want 10ms and 40ms", p.RTT(), q.RTT())
	}
	var names []string
	for _, tr := range s.Transports {
		names = append(names, tr.Name)
	}
	for _, n := range []string{"direct", "mptcp-direct", "braid"} {
		if !slices.Contains(names, n) {
			t.Errorf("demo lacks %s", n)
		}
	}
	// 3 × 8 MiB at 10 + 20 + 20 + 20 Mbit/s = 3 × (6.71 + 3 × 3.36) s;
	// the demo must finish in 3 minutes, so the floor stays far below.
	if got := idealSeconds(s); math.Abs(got-50.33) > 0.01 {
		t.Errorf("ideal transfer time %.2f s, want 50.33 s", got)
	}
	if s.Experiment.Timeout > 60*time.Second {
		t.Errorf("timeout %v lets one stuck download take a third of the demo", s.Experiment.Timeout)
	}
}

// TestTwoClientsScenario: one braid point whose competing download runs
// through a second braid client, both paths on one 10 Mbit/s medium.
func TestTwoClientsScenario(t *testing.T) {
	s := loadCommitted(t, "real-two-clients.toml")
	if e := s.Experiment; e.Competing != 1 || e.CompetingTransport != CompetingBraid {
		t.Errorf("competing %d through %q, want 1 through a braid client", e.Competing, e.CompetingTransport)
	}
	top := s.Topology
	if len(top.Media) != 1 || top.Media[0].Rate != 10_000_000 || top.Media[0].QueueLimit != 100 {
		t.Fatalf("media %+v, want one 10 Mbit/s medium with a 100-packet queue", top.Media)
	}
	for _, l := range top.Paths() {
		if l.Medium != top.Media[0].Name || l.RTT() != 20*time.Millisecond {
			t.Errorf("path %s on medium %q with RTT %v, want the shared medium and 20ms", l.Name, l.Medium, l.RTT())
		}
	}
	if len(s.Transports) != 1 || s.Transports[0].Name != TransportBraid {
		t.Errorf("transports %+v, want braid alone", s.Transports)
	}
}

// swept returns the values of s's axis a as the points show them.
func swept(s *Scenario, a Axis) []string {
	for _, ax := range slices.Concat(s.network, s.options) {
		if ax.axis == a {
			return mapf(ax.params, func(p Param) string { return p.Text })
		}
	}
	return nil
}

func texts[T fmt.Stringer](vs []T) []string { return mapf(vs, T.String) }

// TestPaperTables checks the committed paper scenarios against the paper's
// tables: §3.1.1's seven RTTs, Table 1's GE parameters, Table 2's ratios.
func TestPaperTables(t *testing.T) {
	rtts := []time.Duration{1, 10, 20, 40, 60, 80, 100}
	for i := range rtts {
		rtts[i] *= time.Millisecond
	}
	table1 := []Loss{
		{Model: LossGE, P: 1, R: 75, OneMinusH: 50, OneMinusK: 0},
		{Model: LossGE, P: 1, R: 75, OneMinusH: 50, OneMinusK: 0.5},
		{Model: LossGE, P: 1, R: 75, OneMinusH: 50, OneMinusK: 1},
		{Model: LossGE, P: 1, R: 75, OneMinusH: 50, OneMinusK: 3},
	}
	for _, name := range []string{"rtt-uniform.toml", "rtt-ge.toml"} {
		if s := loadCommitted(t, name); !slices.Equal(swept(s, AxisRTT), texts(rtts)) {
			t.Errorf("%s: rtt = %v", name, swept(s, AxisRTT))
		}
	}
	if s := loadCommitted(t, "rtt-ge.toml"); !slices.Equal(swept(s, AxisLoss), texts(table1)) {
		t.Errorf("rtt-ge: loss = %v", swept(s, AxisLoss))
	}
	for _, name := range []string{"rtt-ratio.toml", "splits.toml", "schedulers.toml"} {
		s := loadCommitted(t, name)
		if !slices.Equal(swept(s, AxisRTTRatio), []string{"1:1", "1:2", "1:3", "1:4", "1:5"}) || !slices.Equal(swept(s, AxisLoss), texts(table1)) {
			t.Errorf("%s: ratios %v, loss %v", name, swept(s, AxisRTTRatio), swept(s, AxisLoss))
		}
		// Table 2: primary 20 ms, secondary 20·ratio ms.
		for _, p := range s.Points() {
			r, _ := p.Param(AxisRTTRatio)
			prim, sec := p.Topology.Link("primary").RTT(), p.Topology.Link("secondary").RTT()
			if prim != 20*time.Millisecond || sec != time.Duration(r.Value*20)*time.Millisecond {
				t.Fatalf("%s point %d (%s): RTTs %v and %v", name, p.Index, p.String(), prim, sec)
			}
		}
	}
	splits := loadCommitted(t, "splits.toml")
	var w [][]float64
	for _, tr := range splits.Transports {
		if tr.Scheduler == "weighted" {
			w = append(w, tr.Weights)
		}
	}
	if len(w) != 3 || !slices.Equal(w[0], []float64{50, 50}) || !slices.Equal(w[1], []float64{75, 25}) || !slices.Equal(w[2], []float64{90, 10}) {
		t.Errorf("splits: weights %v", w)
	}
	sch := loadCommitted(t, "schedulers.toml")
	var got []string
	for _, p := range sch.Points()[:5] {
		got = append(got, p.Transport.Label)
	}
	if strings.Join(got, ",") != "mptcp-direct,braid 50/50,braid rtt-aware,braid earliest-arrival,braid minrtt" {
		t.Errorf("schedulers: first network's transports %v", got)
	}
}

// TestRecoveryScenarios checks the loss-recovery files against their
// targets: braid with its default recovery next to braid without, and
// what each file measures.
func TestRecoveryScenarios(t *testing.T) {
	for _, name := range []string{"recovery-uniform.toml", "recovery-ge.toml", "recovery-latency.toml", "recovery-realtime.toml"} {
		s := loadCommitted(t, name)
		var got []string
		for _, tr := range s.Transports {
			got = append(got, tr.Label+"|"+tr.Recovery)
		}
		if want := []string{"direct|", "mptcp-direct|", "braid|", "braid no recovery|off"}; !slices.Equal(got, want) {
			t.Errorf("%s: transports %q, want %q", name, got, want)
		}
		e := s.Experiment
		if e.Latency != (name == "recovery-latency.toml") || (e.Workload == WorkloadRealtime) != (name == "recovery-realtime.toml") {
			t.Errorf("%s: latency %v, workload %s", name, e.Latency, e.Workload)
		}
	}
	ge := loadCommitted(t, "recovery-ge.toml")
	table1 := func(k float64) Loss { return Loss{Model: LossGE, P: 1, R: 75, OneMinusH: 50, OneMinusK: k} }
	if !slices.Equal(swept(ge, AxisLossSecondary), texts([]Loss{table1(0.5), table1(1)})) || !slices.Equal(swept(ge, AxisLoss), texts([]Loss{{}, table1(1)})) {
		t.Errorf("recovery-ge: loss %v, loss_secondary %v", swept(ge, AxisLoss), swept(ge, AxisLossSecondary))
	}
	for _, p := range ge.Points() {
		if a, b := p.Topology.Link("primary").RTT(), p.Topology.Link("secondary").RTT(); a != 30*time.Millisecond || b != a {
			t.Errorf("recovery-ge point %d: RTTs %v, %v", p.Index, a, b)
		}
	}
	rt := loadCommitted(t, "recovery-realtime.toml")
	want := Realtime{Rate: 1 * Mbit, Size: 200, Duration: 10 * time.Second, Deadline: 40 * time.Millisecond}
	if rt.Experiment.Realtime != want {
		t.Errorf("recovery-realtime: %+v", rt.Experiment.Realtime)
	}
	for _, l := range rt.Topology.Paths() {
		if l.AB.Loss.MeanLoss() != 0.02 || l.BA.Delay != l.AB.Delay {
			t.Errorf("recovery-realtime: path %s: %+v", l.Name, l)
		}
	}
	if a, b := rt.Topology.Link("primary").BA.Delay, rt.Topology.Link("secondary").BA.Delay; a != 10*time.Millisecond || b != 30*time.Millisecond {
		t.Errorf("recovery-realtime: one-way delays %v, %v", a, b)
	}
}
