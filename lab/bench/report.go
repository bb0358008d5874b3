package bench

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/braid-vpn/braid/lab/report"
	"github.com/braid-vpn/braid/lab/stats"
	"github.com/braid-vpn/braid/lab/table"
)

// GB is the unit of the CPU figures: 10^9 bytes, the same decimal prefix
// as Mbit/s.
const GB = 1e9

// Num is a figure that is NaN (null in JSON) where it does not apply or
// was not measured.
type Num = stats.Num

// CPU is CPU time of one download (seconds) or its per-GB rate.
type CPU struct {
	// TunnelClient and TunnelServer are the tunnel daemons' own processes
	// (utime + stime); NaN for kernel TCP, which has none.
	TunnelClient Num `json:"tunnel_client"`
	TunnelServer Num `json:"tunnel_server"`
	// AppClient is the HTTP client (the bench process itself), AppServer
	// the HTTP server process: the workload, identical in every case, whose
	// system calls include the kernel's TCP work done in process context.
	AppClient Num `json:"app_client"`
	AppServer Num `json:"app_server"`
	// System is every CPU's busy time machine-wide (/proc/stat): all of the
	// above, the kernel's softirq packet processing that no process was
	// charged for (in ksoftirqd, or everywhere on kernels with
	// CONFIG_IRQ_TIME_ACCOUNTING), and anything else that ran meanwhile.
	System Num `json:"system"`
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

func (c CPU) add(o CPU) CPU {
	return CPU{c.TunnelClient + o.TunnelClient, c.TunnelServer + o.TunnelServer, c.AppClient + o.AppClient, c.AppServer + o.AppServer, c.System + o.System}
}

func (c CPU) scale(k float64) CPU {
	f := Num(k)
	return CPU{c.TunnelClient * f, c.TunnelServer * f, c.AppClient * f, c.AppServer * f, c.System * f}
}

// PeakRSS is the tunnel daemons' peak resident set size (VmHWM from
// /proc/PID/status) in MB (10^6 bytes); NaN for kernel TCP.
type PeakRSS struct {
	Client Num `json:"client"`
	Server Num `json:"server"`
}

// maxNum is the larger of two numbers, ignoring an invalid one.
func maxNum(a, b Num) Num {
	if !a.Valid() || b > a {
		return b
	}
	return a
}

// Sample is one timed download: Report.Parallel concurrent HTTP downloads
// that add up to Report.Size bytes.
type Sample struct {
	// Rep counts from 1.
	Rep int `json:"rep"`
	// Bytes, Seconds and Mbps are all the downloads' together: their bytes,
	// the time from the first request to the last byte, and the two's rate.
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	Mbps    float64 `json:"mbps"`
	// CPU is the CPU seconds spent between just before the request and just
	// after the last byte.
	CPU CPU `json:"cpu_seconds"`
	// BackgroundCores is how many CPUs were busy on average during the idle
	// window just before the download, with the tunnel up and idle: the
	// share of System that this machine's other work may account for.
	BackgroundCores float64 `json:"background_cores"`
	// TunnelRSSMB is the daemons' peak RSS, read just after the download
	// (the peak of their life so far: start, warm-up and download).
	TunnelRSSMB PeakRSS `json:"tunnel_peak_rss_mb"`
	// PathBytes is what each veth delivered to the client during the
	// download (its RX bytes, headers included), in path order.
	PathBytes []uint64 `json:"path_rx_bytes"`
	// Batching is how the download crossed the kernel (braid cases only).
	Batching *Batching `json:"batching,omitempty"`
}

// CaseResult is one case's samples and their summary.
type CaseResult struct {
	Name   string `json:"name"`
	Label  string `json:"label"`
	Detail string `json:"detail,omitempty"`
	// Mbps summarizes the samples' goodput (size ÷ time, 10^6 bit/s).
	Mbps stats.Summary `json:"mbps"`
	// CPUPerGB is the summed CPU seconds of all samples divided by their
	// summed bytes in GB (a ratio of sums, so that a short sample does not
	// weigh as much as a long one).
	CPUPerGB CPU `json:"cpu_s_per_gb"`
	// BackgroundCores is the samples' mean.
	BackgroundCores Num `json:"background_cores"`
	// TunnelRSSMB is the samples' largest, each side on its own.
	TunnelRSSMB PeakRSS `json:"tunnel_peak_rss_mb"`
	// Batching is the samples' mean (braid cases only).
	Batching *Batching `json:"batching,omitempty"`
	Samples  []Sample  `json:"samples"`
	Errors   []string  `json:"errors,omitempty"`
}

// Ratio compares a case with a reference case of the same run: case ÷ ref.
type Ratio struct {
	Case string `json:"case"`
	Ref  string `json:"ref"`
	// Throughput is the ratio of mean Mbit/s.
	Throughput Num `json:"throughput"`
	// TunnelCPU is the ratio of tunnel CPU s/GB (both sides); NaN unless
	// both have a tunnel.
	TunnelCPU Num `json:"tunnel_cpu_per_gb"`
	// ProcessCPU is the ratio of everything charged to processes per GB
	// (tunnel and workload, both sides).
	ProcessCPU Num `json:"process_cpu_per_gb"`
	// SystemCPU is the ratio of machine-wide busy CPU per GB.
	SystemCPU Num `json:"system_cpu_per_gb"`
}

// Report is the JSON document of one bench run.
type Report struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Host     string    `json:"host,omitempty"`
	Kernel   string    `json:"kernel,omitempty"`
	CPUs     int       `json:"cpus"`
	// Size is the bytes of every sample, split over Parallel concurrent
	// downloads of Size/Parallel bytes each.
	Size     int64 `json:"size_bytes"`
	Parallel int   `json:"parallel"`
	Reps     int   `json:"reps"`
	// CC is the congestion control of the download's TCP sockets.
	CC string `json:"congestion_control"`
	// IdleSeconds is the background window before every download.
	IdleSeconds float64         `json:"idle_window_seconds"`
	Tools       map[string]Tool `json:"tools,omitempty"`
	// Notes are cases left out and why.
	Notes  []string     `json:"notes,omitempty"`
	Cases  []CaseResult `json:"cases"`
	Ratios []Ratio      `json:"ratios"`
}

// Case returns the result named name, or nil.
func (r *Report) Case(name string) *CaseResult {
	for i := range r.Cases {
		if r.Cases[i].Name == name {
			return &r.Cases[i]
		}
	}
	return nil
}

// Summarize fills Mbps, CPUPerGB and BackgroundCores from the samples.
func (c *CaseResult) Summarize() {
	var mbps []float64
	var cpu CPU
	var bytes int64
	var bg float64
	c.TunnelRSSMB = PeakRSS{stats.NaN(), stats.NaN()}
	for _, s := range c.Samples {
		c.TunnelRSSMB = PeakRSS{maxNum(c.TunnelRSSMB.Client, s.TunnelRSSMB.Client), maxNum(c.TunnelRSSMB.Server, s.TunnelRSSMB.Server)}
		mbps = append(mbps, s.Mbps)
		cpu = cpu.add(s.CPU)
		bytes += s.Bytes
		bg += s.BackgroundCores
	}
	c.Mbps = stats.Summarize(mbps)
	c.Batching = meanBatching(c.Samples)
	if bytes == 0 {
		c.CPUPerGB = CPU{stats.NaN(), stats.NaN(), stats.NaN(), stats.NaN(), stats.NaN()}
		c.BackgroundCores = stats.NaN()
		return
	}
	c.CPUPerGB = cpu.scale(GB / float64(bytes))
	c.BackgroundCores = Num(bg / float64(len(c.Samples)))
}

func div(a, b Num) Num {
	if !a.Valid() || !b.Valid() || b == 0 {
		return stats.NaN()
	}
	return a / b
}

// ratioRefs are the references of the ratios, each with the cases
// compared with it: every case with kernel TCP, the braid cases with
// wireguard-go and, to show what more paths bring, with braid on one path.
var ratioRefs = []struct {
	ref       string
	braidOnly bool
}{{CaseKernel, false}, {CaseWireGuardGo, true}, {CaseBraid1, true}}

// ComputeRatios compares the cases with each reference of ratioRefs that
// has samples: case ÷ reference.
func (r *Report) ComputeRatios() {
	r.Ratios = nil
	for _, rr := range ratioRefs {
		ref := r.Case(rr.ref)
		if ref == nil || len(ref.Samples) == 0 {
			continue
		}
		for _, c := range r.Cases {
			if c.Name != rr.ref && len(c.Samples) > 0 && (!rr.braidOnly || braidPaths[c.Name] > 0) {
				r.Ratios = append(r.Ratios, Ratio{Case: c.Name, Ref: ref.Name,
					Throughput: div(Num(c.Mbps.Mean), Num(ref.Mbps.Mean)),
					TunnelCPU:  div(c.CPUPerGB.Tunnel(), ref.CPUPerGB.Tunnel()),
					ProcessCPU: div(c.CPUPerGB.Processes(), ref.CPUPerGB.Processes()),
					SystemCPU:  div(c.CPUPerGB.System, ref.CPUPerGB.System)})
			}
		}
	}
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

// shownRSS is a peak RSS to show: none where it is zero, in results written
// before the bench read it.
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
	if rows := r.batchingRows(); rows != nil {
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
