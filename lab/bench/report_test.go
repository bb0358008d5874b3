package bench

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/lab/stats"
)

func cpu(tc, ts, ac, as, sys float64) CPU {
	return CPU{Num(tc), Num(ts), Num(ac), Num(as), Num(sys)}
}

func rss(cli, srv float64) PeakRSS { return PeakRSS{Num(cli), Num(srv)} }

// testReport is four cases with hand-picked samples and one without; the
// expected per-GB figures are worked out in the comments.
func testReport() *Report {
	r := &Report{
		Started: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), Finished: time.Date(2026, 5, 1, 12, 1, 30, 0, time.UTC),
		Host: "box", Kernel: "6.1", CPUs: 2, Size: 1 << 30, Parallel: 2, Reps: 2, CC: "cubic",
		Notes: []string{"a | note"},
		Cases: []CaseResult{
			{Name: CaseKernel, Label: "kernel TCP, 1 veth", Detail: "plain", Samples: []Sample{
				// 2 GB, app 0.1+0.15 and system 0.5 per GB.
				{Bytes: 1e9, Mbps: 30000, CPU: cpu(nan, nan, 0.1, 0.15, 0.5), BackgroundCores: 0.2, TunnelRSSMB: rss(nan, nan)},
				{Bytes: 1e9, Mbps: 30000, CPU: cpu(nan, nan, 0.1, 0.15, 0.5), BackgroundCores: 0.4, TunnelRSSMB: rss(nan, nan)},
			}},
			{Name: CaseBraid1, Label: "braid, 1 path", Samples: []Sample{
				// Sums 3, 1.5, 0.75, 0.375, 6 over 1.5 GB → 2, 1, 0.5, 0.25, 4 per GB.
				// Peak RSS: the larger of each side, from different samples.
				{Bytes: 1e9, Mbps: 1000, CPU: cpu(2, 1, 0.5, 0.25, 4), TunnelRSSMB: rss(20, 18)},
				{Bytes: 5e8, Mbps: 2000, CPU: cpu(1, 0.5, 0.25, 0.125, 2), TunnelRSSMB: rss(25.04, 17)},
			}},
			{Name: CaseWireGuardGo, Label: "wireguard-go, 1 veth", Samples: []Sample{
				// 1 GB: tunnel 1 + 0.5, app 0.5 + 0.25, system 2.
				{Bytes: 1e9, Mbps: 3000, CPU: cpu(1, 0.5, 0.5, 0.25, 2), TunnelRSSMB: rss(9, 8.5)},
			}},
			{Name: CaseBraid2, Label: "braid, 2 paths", Samples: []Sample{}, Errors: []string{"rep 1: boom"}},
			{Name: CaseBraid4, Label: "braid, 4 paths", Samples: []Sample{
				// 1 GB: tunnel 3 + 1.5, app 0.5 + 0.25, system 6; twice the
				// throughput of one path, so that a ratio the wrong way
				// round shows.
				{Bytes: 1e9, Mbps: 3000, CPU: cpu(3, 1.5, 0.5, 0.25, 6), TunnelRSSMB: rss(40, 35)},
			}},
		},
	}
	r.Summarize()
	return r
}

var nan = float64(stats.NaN())

func TestSummarize(t *testing.T) {
	r := testReport()
	b := r.Case(CaseBraid1)
	want := cpu(2, 1, 0.5, 0.25, 4)
	if b.CPUPerGB != want {
		t.Errorf("braid per GB %+v, want %+v", b.CPUPerGB, want)
	}
	if b.Mbps.N != 2 || b.Mbps.Mean != 1500 || b.Mbps.Min != 1000 || b.Mbps.Max != 2000 {
		t.Errorf("braid Mbit/s %+v", b.Mbps)
	}
	k := r.Case(CaseKernel)
	if k.CPUPerGB.TunnelClient.Valid() || k.CPUPerGB.Tunnel().Valid() {
		t.Errorf("kernel has a tunnel figure: %+v", k.CPUPerGB)
	}
	if !near(float64(k.CPUPerGB.Processes()), 0.25) || !near(float64(k.CPUPerGB.System), 0.5) || !near(float64(k.BackgroundCores), 0.3) {
		t.Errorf("kernel per GB %+v, background %v", k.CPUPerGB, k.BackgroundCores)
	}
	if p := b.CPUPerGB.Processes(); !near(float64(p), 3.75) {
		t.Errorf("braid processes %v, want 2+1+0.5+0.25", p)
	}
	if b.TunnelRSSMB != rss(25.04, 18) {
		t.Errorf("braid peak RSS %+v, want the largest of each side, 25.04 / 18", b.TunnelRSSMB)
	}
	if k.TunnelRSSMB.Client.Valid() || k.TunnelRSSMB.Server.Valid() {
		t.Errorf("kernel has a peak RSS: %+v", k.TunnelRSSMB)
	}
	e := r.Case(CaseBraid2)
	if e.Mbps.N != 0 || e.CPUPerGB.System.Valid() || e.BackgroundCores.Valid() || e.TunnelRSSMB.Client.Valid() {
		t.Errorf("case without samples: %+v", e)
	}
}

func TestRatios(t *testing.T) {
	r := testReport()
	type key struct{ c, ref string }
	got := map[key]Ratio{}
	var order []key
	for _, q := range r.Ratios {
		got[key{q.Case, q.Ref}] = q
		order = append(order, key{q.Case, q.Ref})
	}
	// Every measured case against kernel TCP, braid against wireguard-go
	// and braid on more paths against braid on one; not kernel or
	// wireguard-go against braid, nothing for the case without samples.
	wantOrder := []key{
		{CaseBraid1, CaseKernel}, {CaseWireGuardGo, CaseKernel}, {CaseBraid4, CaseKernel},
		{CaseBraid1, CaseWireGuardGo}, {CaseBraid4, CaseWireGuardGo},
		{CaseBraid4, CaseBraid1},
	}
	if len(order) != len(wantOrder) {
		t.Fatalf("ratios %v, want %v", order, wantOrder)
	}
	for i := range order {
		if order[i] != wantOrder[i] {
			t.Fatalf("ratios %v, want %v", order, wantOrder)
		}
	}
	bk := got[key{CaseBraid1, CaseKernel}]
	// 1500/30000; no tunnel in kernel; 3.75/0.25; 4/0.5.
	if !near(float64(bk.Throughput), 0.05) || bk.TunnelCPU.Valid() || !near(float64(bk.ProcessCPU), 15) || !near(float64(bk.SystemCPU), 8) {
		t.Errorf("braid ÷ kernel %+v", bk)
	}
	bw := got[key{CaseBraid1, CaseWireGuardGo}]
	// 1500/3000; 3/1.5; 3.75/2.25; 4/2.
	if !near(float64(bw.Throughput), 0.5) || !near(float64(bw.TunnelCPU), 2) || !near(float64(bw.ProcessCPU), 3.75/2.25) || !near(float64(bw.SystemCPU), 2) {
		t.Errorf("braid ÷ wireguard-go %+v", bw)
	}
	// 4 paths ÷ 1 path: 3000/1500; 4.5/3; 5.25/3.75; 6/4. The other way
	// round each would be below 1.
	b4 := got[key{CaseBraid4, CaseBraid1}]
	if !near(float64(b4.Throughput), 2) || !near(float64(b4.TunnelCPU), 1.5) || !near(float64(b4.ProcessCPU), 1.4) || !near(float64(b4.SystemCPU), 1.5) {
		t.Errorf("braid 4 paths ÷ 1 path %+v", b4)
	}
	// Without a kernel reference there is nothing to compare with it.
	r2 := testReport()
	r2.Cases = r2.Cases[1:]
	r2.Summarize()
	if len(r2.Ratios) != 3 || slices.ContainsFunc(r2.Ratios, func(q Ratio) bool { return q.Ref == CaseKernel }) {
		t.Errorf("ratios without kernel: %+v", r2.Ratios)
	}
	// Without braid on one path, braid on more is compared with the
	// other references only.
	r3 := testReport()
	r3.Case(CaseBraid1).Samples = nil
	r3.Summarize()
	if slices.ContainsFunc(r3.Ratios, func(q Ratio) bool { return q.Ref == CaseBraid1 || q.Case == CaseBraid1 }) || len(r3.Ratios) != 3 {
		t.Errorf("ratios without braid on one path: %+v", r3.Ratios)
	}
}

func TestReportJSON(t *testing.T) {
	r := testReport()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	k := back.Case(CaseKernel)
	if k == nil || k.CPUPerGB.TunnelClient.Valid() || !near(float64(k.CPUPerGB.System), 0.5) {
		t.Errorf("kernel after a round trip: %+v", k)
	}
	if b4 := back.Case(CaseBraid4); b4 == nil || b4.TunnelRSSMB != rss(40, 35) || b4.Samples[0].TunnelRSSMB != rss(40, 35) {
		t.Errorf("braid 4 paths' peak RSS after a round trip: %+v", b4)
	}
	if !strings.Contains(string(b), `"tunnel_peak_rss_mb":{"client":null,"server":null}`) || !strings.Contains(string(b), `"parallel":2`) {
		t.Errorf("kernel's peak RSS not null, or no parallel:\n%s", b)
	}
	if !strings.Contains(string(b), `"tunnel_client":null`) || !strings.Contains(string(b), `"tunnel_cpu_per_gb":null`) {
		t.Errorf("NaN not written as null:\n%s", b)
	}
	if !near(float64(back.Ratios[0].SystemCPU), 8) {
		t.Errorf("ratio after a round trip: %+v", back.Ratios[0])
	}
}

func TestWriteText(t *testing.T) {
	var b strings.Builder
	testReport().Document().WriteText(&b)
	out := b.String()
	lines := strings.Split(out, "\n")
	row := func(prefix string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		t.Fatalf("no line starting %q in\n%s", prefix, out)
		return ""
	}
	if !strings.HasPrefix(lines[0], "braid lab bench: 1GiB × 2 per case (each 2 parallel downloads of 512MiB), TCP cubic") || !strings.Contains(lines[0], "2 CPUs, host box, Linux 6.1") {
		t.Errorf("setup line %q", lines[0])
	}
	fields := func(l string) []string { return strings.Fields(l) }
	// Label "braid, 1 path" is three fields; then mean, min–max, CI, n, tunnel
	// pair (3 fields), app pair (3), system, bg, peak RSS pair (3).
	f := fields(row("braid, 1 path  "))
	want := []string{"braid,", "1", "path", "1500", "1000–2000", "6353", "2", "2.00", "/", "1.00", "0.50", "/", "0.25", "4.00", "0.00", "25.0", "/", "18.0"}
	if strings.Join(f, " ") != strings.Join(want, " ") {
		t.Errorf("braid row\n got %q\nwant %q", f, want)
	}
	f = fields(row("kernel TCP, 1 veth  "))
	want = []string{"kernel", "TCP,", "1", "veth", "30000", "30000–30000", "0", "2", "—", "0.10", "/", "0.15", "0.50", "0.30", "—"}
	if strings.Join(f, " ") != strings.Join(want, " ") {
		t.Errorf("kernel row\n got %q\nwant %q", f, want)
	}
	f = fields(row("braid, 2 paths  "))
	if strings.Join(f[3:], " ") != "— — — 0 — — — — —" {
		t.Errorf("empty case row %q", f)
	}
	f = fields(row("braid, 1 path ÷ kernel TCP"))
	if strings.Join(f[len(f)-4:], " ") != "0.05× — 15.00× 8.00×" {
		t.Errorf("ratio row %q", f)
	}
	f = fields(row("braid, 1 path ÷ wireguard-go"))
	if strings.Join(f[len(f)-4:], " ") != "0.50× 2.00× 1.67× 2.00×" {
		t.Errorf("ratio row %q", f)
	}
	f = fields(row("braid, 4 paths ÷ braid, 1 path "))
	if strings.Join(f[len(f)-4:], " ") != "2.00× 1.50× 1.40× 1.50×" {
		t.Errorf("ratio row %q", f)
	}
	for _, s := range []string{"kernel TCP, 1 veth: plain\n", "braid, 2 paths: error: rep 1: boom\n", "note: a | note\n", Legend[0]} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q", s)
		}
	}
}

func TestWriteMarkdown(t *testing.T) {
	var b strings.Builder
	testReport().Document().WriteMarkdown(&b)
	out := b.String()
	for _, s := range []string{
		"# braid lab bench\n",
		"started 2026-05-01 12:00 UTC, took 1m30s.",
		"| case | Mbit/s | min–max | 95% CI ± | n | tunnel s/GB cli / srv | app s/GB cli / srv | system s/GB | bg cores | RSS MB cli / srv |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
		"| braid, 1 path | 1500 | 1000–2000 | 6353 | 2 | 2.00 / 1.00 | 0.50 / 0.25 | 4.00 | 0.00 | 25.0 / 18.0 |\n",
		"| kernel TCP, 1 veth | 30000 | 30000–30000 | 0 | 2 | — | 0.10 / 0.15 | 0.50 | 0.30 | — |\n",
		"| braid, 1 path ÷ wireguard-go, 1 veth | 0.50× | 2.00× | 1.67× | 2.00× |\n",
		"| braid, 4 paths ÷ braid, 1 path | 2.00× | 1.50× | 1.40× | 1.50× |\n",
		"- note: a \\| note\n",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("markdown lacks %q:\n%s", s, out)
		}
	}
}
