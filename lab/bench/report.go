package bench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/braid-vpn/braid/lab/report"
	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/lab/stats"
	"github.com/braid-vpn/braid/lab/table"
)

// GB is the unit of the CPU figures: 10^9 bytes, the same decimal prefix
// as Mbit/s.
const GB = 1e9

// Num is a figure that is NaN (null in JSON) where it does not apply or
// was not measured.
type Num = stats.Num

// CPU is CPU time of one download (seconds) or its per-GB rate; Legend and
// docs/lab.md say what each figure counts (NaN: none, e.g. kernel TCP's
// tunnel).
type CPU struct {
	TunnelClient Num `json:"tunnel_client"`
	TunnelServer Num `json:"tunnel_server"`
	AppClient    Num `json:"app_client"`
	AppServer    Num `json:"app_server"`
	System       Num `json:"system"`
}

// Tunnel is the tunnel's total, both sides.
func (c CPU) Tunnel() Num { return c.TunnelClient + c.TunnelServer }

// Processes is everything charged to processes: tunnel and workload, both
// sides; for kernel TCP the workload alone.
func (c CPU) Processes() Num {
	p := c.AppClient + c.AppServer
	if c.Tunnel().Valid() {
		p += c.Tunnel()
	}
	return p
}

// plus is c + k·o, figure by figure.
func (c CPU) plus(k float64, o CPU) CPU {
	addFigures(c.figures(), Num(k), o.figures())
	return c
}

// addFigures adds k times each of xs to the figure of ys in its place.
func addFigures[F ~float64](ys []*F, k F, xs []*F) {
	for i, y := range ys {
		*y += k * *xs[i]
	}
}

func (c *CPU) figures() []*Num {
	return []*Num{&c.TunnelClient, &c.TunnelServer, &c.AppClient, &c.AppServer, &c.System}
}

// PeakRSS is the tunnel daemons' peak RSS in MB (docs/lab.md).
type PeakRSS struct {
	Client Num `json:"client"`
	Server Num `json:"server"`
}

// Batching is how a braid download crossed the kernel (batchingLegend).
type Batching struct {
	ServerReadPackets  float64 `json:"server_tun_packets_per_read"`
	ServerGSO          float64 `json:"server_datagrams_per_gso_send"`
	ClientGRO          float64 `json:"client_datagrams_per_gro_run"`
	ClientWritePackets float64 `json:"client_tun_packets_per_write"`
	ClientRunPackets   float64 `json:"client_tun_packets_per_run"`
}

func (b *Batching) figures() []*float64 {
	return []*float64{&b.ServerReadPackets, &b.ServerGSO, &b.ClientGRO, &b.ClientWritePackets, &b.ClientRunPackets}
}

// batchingOf is Batching over the growth of the braid daemons' counters
// from before to after; nil for a tunnel without them.
func batchingOf(before, after runner.Counters) *Batching {
	if before.Receiver == nil || before.Sender == nil || after.Receiver == nil || after.Sender == nil {
		return nil
	}
	// The counters that Batching's figures divide, in order, as (how many,
	// in how many).
	counts := func(c runner.Counters) [5][2]uint64 {
		st, so, ct, co := deref(c.Sender.TUN), deref(c.Sender.Offload), deref(c.Receiver.TUN), deref(c.Receiver.Offload)
		return [5][2]uint64{{st.ReadPackets, st.Reads}, {so.GSODatagrams, so.GSORuns},
			{co.GRODatagrams, co.GRORuns}, {ct.WritePackets, ct.Writes}, {ct.WriteRunPackets, ct.WriteRuns}}
	}
	c0, c1 := counts(before), counts(after)
	var b Batching
	for i, p := range b.figures() {
		if d := c1[i][1] - c0[i][1]; d > 0 {
			*p = float64(c1[i][0]-c0[i][0]) / float64(d)
		}
	}
	return &b
}

func deref[T any](p *T) (v T) {
	if p != nil {
		v = *p
	}
	return v
}

// Sample is one timed download: Report.Parallel concurrent HTTP downloads
// that add up to Report.Size bytes (docs/lab.md says what each figure is).
type Sample struct {
	Rep             int       `json:"rep"` // from 1
	Bytes           int64     `json:"bytes"`
	Seconds         float64   `json:"seconds"`
	Mbps            float64   `json:"mbps"`
	CPU             CPU       `json:"cpu_seconds"`
	BackgroundCores float64   `json:"background_cores"`
	TunnelRSSMB     PeakRSS   `json:"tunnel_peak_rss_mb"`
	PathBytes       []uint64  `json:"path_rx_bytes"`      // each veth's RX bytes, in path order
	Batching        *Batching `json:"batching,omitempty"` // braid cases only
}

// CaseResult is one case's samples and their summary.
type CaseResult struct {
	Name   string        `json:"name"`
	Label  string        `json:"label"`
	Detail string        `json:"detail,omitempty"`
	Mbps   stats.Summary `json:"mbps"`
	// CPUPerGB is a ratio of sums, so that a short sample does not weigh
	// as much as a long one.
	CPUPerGB        CPU       `json:"cpu_s_per_gb"`
	BackgroundCores Num       `json:"background_cores"`   // the samples' mean
	TunnelRSSMB     PeakRSS   `json:"tunnel_peak_rss_mb"` // the samples' largest, each side on its own
	Batching        *Batching `json:"batching,omitempty"` // the samples' mean
	Samples         []Sample  `json:"samples"`
	Errors          []string  `json:"errors,omitempty"`
}

// Ratio compares a case with a reference case of the same run: case ÷ ref.
type Ratio struct {
	Case       string `json:"case"`
	Ref        string `json:"ref"`
	Throughput Num    `json:"throughput"`
	TunnelCPU  Num    `json:"tunnel_cpu_per_gb"`
	ProcessCPU Num    `json:"process_cpu_per_gb"`
	SystemCPU  Num    `json:"system_cpu_per_gb"`
}

// Report is the JSON document of one bench run.
type Report struct {
	Started     time.Time       `json:"started"`
	Finished    time.Time       `json:"finished"`
	Host        string          `json:"host,omitempty"`
	Kernel      string          `json:"kernel,omitempty"`
	CPUs        int             `json:"cpus"`
	Size        int64           `json:"size_bytes"`
	Parallel    int             `json:"parallel"`
	Reps        int             `json:"reps"`
	CC          string          `json:"congestion_control"`
	IdleSeconds float64         `json:"idle_window_seconds"`
	Tools       map[string]Tool `json:"tools,omitempty"`
	Notes       []string        `json:"notes,omitempty"` // cases left out and why
	Cases       []CaseResult    `json:"cases"`
	Ratios      []Ratio         `json:"ratios"`
}

// Case returns the result named name, or nil.
func (r *Report) Case(name string) *CaseResult {
	if i := slices.IndexFunc(r.Cases, func(c CaseResult) bool { return c.Name == name }); i >= 0 {
		return &r.Cases[i]
	}
	return nil
}

// Summarize fills every case's summary from its samples, then the ratios.
func (r *Report) Summarize() {
	for i := range r.Cases {
		r.Cases[i].summarize()
	}
	r.Ratios = nil
	for _, name := range ratioRefs {
		ref := r.Case(name)
		if ref == nil || len(ref.Samples) == 0 {
			continue
		}
		for _, c := range r.Cases {
			if c.Name != name && len(c.Samples) > 0 && (name == CaseKernel || cases[c.Name].paths > 0) {
				r.Ratios = append(r.Ratios, Ratio{Case: c.Name, Ref: ref.Name,
					Throughput: div(Num(c.Mbps.Mean), Num(ref.Mbps.Mean)),
					TunnelCPU:  div(c.CPUPerGB.Tunnel(), ref.CPUPerGB.Tunnel()),
					ProcessCPU: div(c.CPUPerGB.Processes(), ref.CPUPerGB.Processes()),
					SystemCPU:  div(c.CPUPerGB.System, ref.CPUPerGB.System)})
			}
		}
	}
}

// ratioRefs are the references of the ratios (docs/lab.md).
var ratioRefs = []string{CaseKernel, CaseWireGuardGo, CaseBraid1}

func div(a, b Num) Num {
	if !a.Valid() || !b.Valid() || b == 0 {
		return stats.NaN()
	}
	return a / b
}

func (c *CaseResult) summarize() {
	var mbps []float64
	var cpu CPU
	var bytes int64
	var bg, batched float64
	var bat Batching
	c.TunnelRSSMB = PeakRSS{stats.NaN(), stats.NaN()}
	for _, s := range c.Samples {
		c.TunnelRSSMB = PeakRSS{maxNum(c.TunnelRSSMB.Client, s.TunnelRSSMB.Client), maxNum(c.TunnelRSSMB.Server, s.TunnelRSSMB.Server)}
		mbps = append(mbps, s.Mbps)
		cpu = cpu.plus(1, s.CPU)
		bytes += s.Bytes
		bg += s.BackgroundCores
		if s.Batching != nil {
			addFigures(bat.figures(), 1, s.Batching.figures())
			batched++
		}
	}
	c.Mbps = stats.Summarize(mbps)
	c.CPUPerGB, c.BackgroundCores, c.Batching = CPU{}.plus(math.NaN(), cpu), stats.NaN(), nil
	if bytes > 0 {
		c.CPUPerGB, c.BackgroundCores = CPU{}.plus(GB/float64(bytes), cpu), Num(bg/float64(len(c.Samples)))
	}
	if batched > 0 {
		c.Batching = &Batching{}
		addFigures(c.Batching.figures(), 1/batched, bat.figures())
	}
}

// maxNum is the larger of two numbers, ignoring an invalid one.
func maxNum(a, b Num) Num {
	if !a.Valid() || b > a {
		return b
	}
	return a
}

// format is how the bench's tables write numbers: "—" for a figure that
// does not apply (a tunnel's CPU for kernel TCP) or was not measured.
var format = table.Style{NaN: "—"}

func fnum(x Num, prec int) string { return format.Num(float64(x), prec) }

func fpair(a, b Num, prec int) string {
	if !a.Valid() && !b.Valid() {
		return format.NaN
	}
	return fnum(a, prec) + " / " + fnum(b, prec)
}

// shownRSS is none for a zero peak RSS, in results written before the
// bench read it.
func shownRSS(x Num) Num {
	if x == 0 {
		return stats.NaN()
	}
	return x
}

func fratio(x Num) string {
	if !x.Valid() {
		return format.NaN
	}
	return fnum(x, 2) + "×"
}

func (r *Report) label(name string) string {
	if c := r.Case(name); c != nil {
		return c.Label
	}
	return name
}

// resultRows is the main table, header first.
func (r *Report) resultRows() [][]string {
	rows := [][]string{{"case", "Mbit/s", "min–max", "95% CI ±", "n", "tunnel s/GB cli / srv", "app s/GB cli / srv", "system s/GB", "bg cores", "RSS MB cli / srv"}}
	for _, c := range r.Cases {
		m := c.Mbps
		minMax := "—"
		if m.N > 0 {
			minMax = fnum(Num(m.Min), 0) + "–" + fnum(Num(m.Max), 0)
		}
		rows = append(rows, []string{
			c.Label, fnum(Num(m.Mean), 0), minMax, fnum(Num(m.CI95), 0), strconv.Itoa(m.N),
			fpair(c.CPUPerGB.TunnelClient, c.CPUPerGB.TunnelServer, 2),
			fpair(c.CPUPerGB.AppClient, c.CPUPerGB.AppServer, 2),
			fnum(c.CPUPerGB.System, 2), fnum(c.BackgroundCores, 2),
			fpair(shownRSS(c.TunnelRSSMB.Client), shownRSS(c.TunnelRSSMB.Server), 1),
		})
	}
	return rows
}

func (r *Report) ratioRows() [][]string {
	rows := [][]string{{"ratio", "throughput", "tunnel CPU/GB", "process CPU/GB", "system CPU/GB"}}
	for _, q := range r.Ratios {
		rows = append(rows, []string{r.label(q.Case) + " ÷ " + r.label(q.Ref),
			fratio(q.Throughput), fratio(q.TunnelCPU), fratio(q.ProcessCPU), fratio(q.SystemCPU)})
	}
	return rows
}

// batchingRows is the batching table, header first.
func (r *Report) batchingRows() [][]string {
	rows := [][]string{{"batching (braid)", "srv TUN pkts/read", "srv dgrams/GSO send", "cli dgrams/GRO run", "cli TUN pkts/write", "cli pkts/run to coalesce"}}
	for _, c := range r.Cases {
		if c.Batching != nil {
			row := []string{c.Label}
			for _, x := range c.Batching.figures() {
				row = append(row, fnum(Num(*x), 1))
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// Legend explains the columns; the text and Markdown outputs both end
// with it.
var Legend = []string{
	"Mbit/s: download size ÷ time (10^6 bit/s), mean over the repetitions; min–max and the 95% Student-t half-width beside it. With parallel downloads, size is their sum and time runs from the first request to the last byte of any.",
	"CPU s/GB: CPU seconds per 10^9 bytes downloaded (summed over the repetitions, then divided).",
	"tunnel: the tunnel daemons' processes in the client and the server namespace, utime+stime from /proc/PID/stat (which add up to their scheduler run time).",
	"app: the HTTP client (the bench process) and the HTTP server process; the same workload in every case, including the kernel's TCP work done in their system calls.",
	"system: busy time of all CPUs from /proc/stat (user+nice+system+irq+softirq; idle, iowait and steal excluded), machine-wide: the only figure sure to hold all of the kernel's packet processing. Softirq work (veth, GRO, TUN, UDP and TCP receive) runs on the back of whichever process is on the CPU (charged to it on kernels without CONFIG_IRQ_TIME_ACCOUNTING, to no process with it) or in ksoftirqd (no other column); system also holds anything else the machine ran meanwhile.",
	"Resolution: /proc counts in clock ticks (1/100 s), read just before and after each download, so a figure is good to about 0.01 CPU-s per process and download; kernel TCP, which moves 1 GiB in a fraction of a second, is the coarsest.",
	"bg cores: CPUs busy on average during an idle window just before each download (tunnel up, no traffic): the machine's other load, part of what system counts.",
	"RSS MB: the tunnel daemons' peak resident set size (VmHWM from /proc/PID/status, in 10^6 bytes) in the client and the server namespace, read just after each download and the largest over the repetitions.",
	"Ratios: case ÷ reference, against kernel TCP, against wireguard-go (braid only) and against braid on one path (braid on more paths); a throughput ratio above 1 and a CPU ratio below 1 favour the case.",
}

// batchingLegend explains the batching table.
const batchingLegend = "batching: braid's daemons' status counters over each timed download, averaged over the repetitions: the server's packets per TUN read (super-packets split) and datagrams per UDP GSO send, the client's datagrams per UDP GRO run, packets per TUN write and per run laid out for the TUN to coalesce (tundev.Stager). 0: none happened; near 1 at speed: the offload is not in effect."

// Document is the report in the lab's one shape: the results, ratio and
// batching tables, the cases' details and errors, the notes and the legend.
func (r *Report) Document() *report.Doc {
	setup := fmt.Sprintf("%s × %d per case", table.Size(r.Size, ""), r.Reps)
	if r.Parallel > 1 {
		part := table.Size(r.Size/int64(r.Parallel), "")
		if r.Size%int64(r.Parallel) != 0 {
			part = "≈" + part
		}
		setup += fmt.Sprintf(" (each %d parallel downloads of %s)", r.Parallel, part)
	}
	setup += fmt.Sprintf(", TCP %s, unshaped veth pairs (MTU 1500), %d CPUs", r.CC, r.CPUs)
	if r.Host != "" {
		setup += ", host " + r.Host
	}
	if r.Kernel != "" {
		setup += ", Linux " + r.Kernel
	}
	d := &report.Doc{
		Title: "braid lab bench",
		Lead: fmt.Sprintf("%s; started %s, took %s.", setup,
			r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Finished.Sub(r.Started).Round(time.Second)),
		Tables: []report.Table{{Rows: r.resultRows()}},
		Legend: Legend,
		// Every column but the case or ratio name is a number.
		MD:   table.Markdown{First: "---", Others: "---:"},
		JSON: r,
	}
	if len(r.Ratios) > 0 {
		d.Tables = append(d.Tables, report.Table{Rows: r.ratioRows()})
	}
	if rows := r.batchingRows(); len(rows) > 1 {
		d.Tables = append(d.Tables, report.Table{Rows: rows})
		d.Legend = append(slices.Clip(Legend), batchingLegend)
	}
	for _, c := range r.Cases {
		if c.Detail != "" {
			d.Notes = append(d.Notes, c.Label+": "+c.Detail)
		}
		for _, e := range c.Errors {
			d.Notes = append(d.Notes, c.Label+": error: "+e)
		}
	}
	for _, n := range r.Notes {
		d.Notes = append(d.Notes, "note: "+n)
	}
	return d
}
