package load

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/lab/bench"
	"github.com/braid-vpn/braid/lab/report"
	"github.com/braid-vpn/braid/lab/stats"
	"github.com/braid-vpn/braid/lab/table"
)

// Num is a figure that is NaN (null in JSON) where it was not measured.
type Num = stats.Num

// BugDrops are the server's drop reasons that a load run of honest clients
// must not see: each means a client's datagram or inner packet arrived
// mangled, unknown or misrouted. The others shed load (handshake limits,
// cookies, queues), follow a rekey (a datagram under keys just retired) or
// come from the server's own host (no_route: the kernel's IPv6 router
// solicitations on the new TUN device, which no client routes) and are
// reported without blame.
var BugDrops = []string{
	"malformed", "oversized", "forged", "handshake_invalid", "handshake_unknown_peer",
	"spoofed_source", "bad_inner_packet", "tun_write_error", "send_error",
}

// Result is one load run: results.json.
type Result struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Host     string    `json:"host"`
	Kernel   string    `json:"kernel"`
	CPUs     int       `json:"cpus"`

	Clients    int     `json:"clients"`
	Paths      int     `json:"paths_per_client"`
	Rate       float64 `json:"rate_packets_per_client"`
	PacketSize int     `json:"packet_size"`
	StartRate  float64 `json:"start_rate"` // clients started a second; 0: all at once
	// RekeyAfterSeconds is rekey_after_time; 0: braid's default.
	RekeyAfterSeconds float64 `json:"rekey_after_seconds"`

	Ramp       Ramp       `json:"ramp"`
	Idle       Idle       `json:"idle"`
	Traffic    Traffic    `json:"traffic"`
	Handshakes Handshakes `json:"handshakes"`
	Generator  Generator  `json:"load_generator"`
	// ServerDrops are the server's drop counters over the run, by reason
	// (the ones with any); UnexpectedDrops those of them in BugDrops;
	// ClientDrops the client engines' together.
	ServerDrops     map[string]uint64 `json:"server_drops"`
	UnexpectedDrops map[string]uint64 `json:"unexpected_drops"`
	ClientDrops     map[string]uint64 `json:"client_drops"`
	Notes           []string          `json:"notes,omitempty"`
}

// Ramp: every engine starts (at StartRate); Established came up within the
// ramp timeout, the last AllUpSeconds after the first engine started.
type Ramp struct {
	Established     int `json:"established"`
	AllUpSeconds    Num `json:"all_up_seconds"`
	MedianUpSeconds Num `json:"median_up_seconds"`
	P90UpSeconds    Num `json:"p90_up_seconds"`
	// HandshakesPerSecond is Established over the time the last of them
	// took.
	HandshakesPerSecond Num `json:"handshakes_per_second"`
	// ServerCPUSeconds is the server's CPU time from the start to the end
	// of the ramp; CPUPerHandshakeMs that over Established.
	ServerCPUSeconds  float64 `json:"server_cpu_seconds"`
	CPUPerHandshakeMs Num     `json:"server_cpu_per_handshake_ms"`
}

// Idle: the clients up and silent but for their keepalives for
// HoldSeconds; the server's RSS (VmRSS) without clients in its file
// (another daemon, started and stopped first), with them before any
// started, and at the end; the growth since either per client; its peak
// (VmHWM), its Go memory, its CPU.
type Idle struct {
	HoldSeconds     float64 `json:"hold_seconds"`
	RSSEmptyMB      Num     `json:"rss_without_clients_mb"`
	RSSBeforeMB     Num     `json:"rss_before_clients_mb"`
	RSSMB           Num     `json:"rss_mb"`
	RSSPerClientKiB Num     `json:"rss_per_client_kib"`
	// RSSPerConfiguredKiB is (RSSMB − RSSEmptyMB) per client: what a
	// client costs configured and up.
	RSSPerConfiguredKiB Num `json:"rss_per_configured_client_kib"`
	PeakRSSMB           Num `json:"peak_rss_mb"`
	GoHeapMB            Num `json:"go_heap_mb"`
	GoTotalMB           Num `json:"go_total_mb"`
	ServerCores         Num `json:"server_cpu_cores"`
	// PeersUp are the server's established peers at the end of the hold.
	PeersUp int `json:"server_peers_up"`
}

// Traffic: every client sends Rate packets a second to the sink; the
// server's CPU time per GB delivered (10^9 bytes at the sink, IPv4 and UDP
// headers counted), also less its idle CPU over the same time.
type Traffic struct {
	Seconds          float64 `json:"seconds"`
	SentPackets      uint64  `json:"sent_packets"`
	SentBytes        uint64  `json:"sent_bytes"`
	DeliveredPackets uint64  `json:"delivered_packets"`
	DeliveredBytes   uint64  `json:"delivered_bytes"`
	Mbps             Num     `json:"delivered_mbps"`
	LossPercent      Num     `json:"loss_percent"`
	ServerCPUSeconds float64 `json:"server_cpu_seconds"`
	CPUPerGB         Num     `json:"server_cpu_seconds_per_gb"`
	CPUPerGBAbove    Num     `json:"server_cpu_seconds_per_gb_above_idle"`
}

// Generator is the client process's own cost, to tell whether it, rather
// than the server, limited the run: its CPU time over the whole run and
// its cores busy in the traffic phase, its peak RSS.
type Generator struct {
	CPUSeconds   float64 `json:"cpu_seconds"`
	TrafficCores float64 `json:"traffic_cores"`
	PeakRSSMB    float64 `json:"peak_rss_mb"`
}

// Handshakes are every handshake the clients completed over the run:
// PerSecond[s] of them in second s after the first engine started. Rekeys
// are those beyond each client's first; PeakAfterRamp the most in any one
// second after the ramp, which shows whether rekeys come in a burst.
type Handshakes struct {
	Total         int   `json:"total"`
	Rekeys        int   `json:"rekeys"`
	PeakAfterRamp int   `json:"peak_per_second_after_ramp"`
	PerSecond     []int `json:"per_second"`
}

func newResult(cfg Config) *Result {
	host, kernel, cpus := hostInfo()
	r := &Result{Started: time.Now(), Host: host, Kernel: kernel, CPUs: cpus,
		Clients: cfg.Clients, Paths: cfg.Paths, Rate: cfg.Rate, PacketSize: cfg.PacketSize, StartRate: cfg.StartRate,
		RekeyAfterSeconds: cfg.RekeyAfter.Seconds(),
		ServerDrops:       map[string]uint64{}, UnexpectedDrops: map[string]uint64{}, ClientDrops: map[string]uint64{}}
	r.Ramp = Ramp{AllUpSeconds: stats.NaN(), MedianUpSeconds: stats.NaN(), P90UpSeconds: stats.NaN(),
		HandshakesPerSecond: stats.NaN(), CPUPerHandshakeMs: stats.NaN()}
	r.Idle = Idle{HoldSeconds: cfg.Hold.Seconds(), RSSBeforeMB: stats.NaN(), RSSMB: stats.NaN(), RSSPerClientKiB: stats.NaN(),
		RSSEmptyMB: stats.NaN(), RSSPerConfiguredKiB: stats.NaN(), PeakRSSMB: stats.NaN(), GoHeapMB: stats.NaN(), GoTotalMB: stats.NaN(), ServerCores: stats.NaN()}
	r.Traffic = Traffic{Mbps: stats.NaN(), LossPercent: stats.NaN(), CPUPerGB: stats.NaN(), CPUPerGBAbove: stats.NaN()}
	return r
}

// setRamp takes the clients' up times and the server's CPU over the ramp.
func (r *Result) setRamp(rep reply, cpu float64) {
	var up []float64
	for _, s := range rep.Up {
		if s >= 0 {
			up = append(up, s)
		}
	}
	slices.Sort(up)
	rr := &r.Ramp
	rr.Established, rr.ServerCPUSeconds = len(up), cpu
	if len(up) == 0 {
		return
	}
	last := up[len(up)-1]
	if len(up) == r.Clients {
		rr.AllUpSeconds = Num(last)
	}
	rr.MedianUpSeconds, rr.P90UpSeconds = Num(quantile(up, 0.5)), Num(quantile(up, 0.9))
	if last > 0 {
		rr.HandshakesPerSecond = Num(float64(len(up)) / last)
	}
	rr.CPUPerHandshakeMs = Num(cpu / float64(len(up)) * 1e3)
}

// quantile is the q-quantile of sorted xs (nearest rank).
func quantile(xs []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// setIdle takes the server's RSS without clients, its samples before the
// clients, in the hold and after it, and its status then.
func (r *Result) setIdle(empty float64, base, from, to procSample, st *control.Status) {
	id := &r.Idle
	id.RSSMB, id.PeakRSSMB = Num(to.rss/1e6), Num(to.hwm/1e6)
	id.RSSPerClientKiB = Num((to.rss - base.rss) / float64(r.Clients) / 1024)
	id.RSSPerConfiguredKiB = Num((to.rss - empty) / float64(r.Clients) / 1024)
	if d := to.at.Sub(from.at).Seconds(); d > 0 {
		id.ServerCores = Num((to.cpu - from.cpu) / d)
	}
	if st.Memory != nil {
		id.GoHeapMB, id.GoTotalMB = Num(float64(st.Memory.HeapBytes)/1e6), Num(float64(st.Memory.TotalBytes)/1e6)
	}
	for _, p := range st.Peers {
		if p.Established {
			id.PeersUp++
		}
	}
}

// setTraffic takes what the clients sent, what reached the sink, over how
// long, and the server's CPU meanwhile.
func (r *Result) setTraffic(sent reply, bytes, pkts uint64, d time.Duration, cpu float64) {
	t := &r.Traffic
	t.Seconds, t.ServerCPUSeconds = d.Seconds(), cpu
	t.SentPackets, t.SentBytes, t.DeliveredPackets, t.DeliveredBytes = sent.Packets, sent.Bytes, pkts, bytes
	if t.Seconds > 0 {
		t.Mbps = Num(float64(bytes) * 8 / t.Seconds / 1e6)
	}
	if sent.Packets > 0 {
		t.LossPercent = Num(100 * (1 - float64(pkts)/float64(sent.Packets)))
	}
	if bytes > 0 {
		gb := float64(bytes) / bench.GB
		t.CPUPerGB = Num(cpu / gb)
		if r.Idle.ServerCores.Valid() {
			t.CPUPerGBAbove = Num((cpu - float64(r.Idle.ServerCores)*(t.Seconds+drainWait.Seconds())) / gb)
		}
	}
}

// setEnd takes the handshakes and drops of the run; rampEnd is when the
// ramp ended, in seconds after the first engine started.
func (r *Result) setEnd(rep reply, drops0, drops1 map[string]uint64, rampEnd float64) {
	h := &r.Handshakes
	h.Total = len(rep.Handshakes)
	h.Rekeys = max(h.Total-r.Ramp.Established, 0)
	for _, s := range rep.Handshakes {
		sec := max(int(s), 0)
		for len(h.PerSecond) <= sec {
			h.PerSecond = append(h.PerSecond, 0)
		}
		h.PerSecond[sec]++
	}
	for s := int(math.Ceil(rampEnd)); s < len(h.PerSecond); s++ {
		h.PeakAfterRamp = max(h.PeakAfterRamp, h.PerSecond[s])
	}
	for k, v := range drops1 {
		if d := v - drops0[k]; v > drops0[k] {
			r.ServerDrops[k] = d
			if slices.Contains(BugDrops, k) {
				r.UnexpectedDrops[k] = d
			}
		}
	}
	r.ClientDrops = nonZero(rep.Drops)
}

func (rr Ramp) line() string {
	return fmt.Sprintf("ramp: %d clients up, the last after %s s (%s handshakes/s), server CPU %.2f s (%s ms per handshake)",
		rr.Established, f2(rr.AllUpSeconds), f0(rr.HandshakesPerSecond), rr.ServerCPUSeconds, f2(rr.CPUPerHandshakeMs))
}

func (id Idle) line() string {
	return fmt.Sprintf("idle: server RSS %s MB (%s MB before the clients, %s without; %s KiB per client, %s per configured client), %s cores busy, %d peers up",
		f1(id.RSSMB), f1(id.RSSBeforeMB), f1(id.RSSEmptyMB), f1(id.RSSPerClientKiB), f1(id.RSSPerConfiguredKiB), f2(id.ServerCores), id.PeersUp)
}

func (t Traffic) line() string {
	return fmt.Sprintf("traffic: %s Mbit/s delivered (%s %% lost), server %s CPU-s per GB (%s above idle)",
		f1(t.Mbps), f2(t.LossPercent), f2(t.CPUPerGB), f2(t.CPUPerGBAbove))
}

func fmtNum(v Num, prec int) string {
	if !v.Valid() {
		return "–"
	}
	return strconv.FormatFloat(float64(v), 'f', prec, 64)
}

func f0(v Num) string { return fmtNum(v, 0) }
func f1(v Num) string { return fmtNum(v, 1) }
func f2(v Num) string { return fmtNum(v, 2) }

// Document is the report: results.json, report.md, handshakes.csv.
func (r *Result) Document() *report.Doc {
	rekey := "braid's default rekey_after_time"
	if r.RekeyAfterSeconds > 0 {
		rekey = fmt.Sprintf("rekey_after_time %gs", r.RekeyAfterSeconds)
	}
	start := "all at once"
	if r.StartRate > 0 {
		start = fmt.Sprintf("%g a second", r.StartRate)
	}
	rr, id, t, h := r.Ramp, r.Idle, r.Traffic, r.Handshakes
	phases := [][]string{
		{"phase", "figure", "value"},
		{"ramp", "clients up", fmt.Sprintf("%d of %d", rr.Established, r.Clients)},
		{"ramp", "all up after (s)", f2(rr.AllUpSeconds)},
		{"ramp", "median / p90 up (s)", f2(rr.MedianUpSeconds) + " / " + f2(rr.P90UpSeconds)},
		{"ramp", "handshakes/s", f0(rr.HandshakesPerSecond)},
		{"ramp", "server CPU per handshake (ms)", f2(rr.CPUPerHandshakeMs)},
		{"idle", "server RSS without clients (MB)", f1(id.RSSEmptyMB)},
		{"idle", "server RSS before clients (MB)", f1(id.RSSBeforeMB)},
		{"idle", "server RSS idle (MB)", f1(id.RSSMB)},
		{"idle", "server RSS per client (KiB)", f1(id.RSSPerClientKiB)},
		{"idle", "server RSS per configured client (KiB)", f1(id.RSSPerConfiguredKiB)},
		{"idle", "server peak RSS (MB)", f1(id.PeakRSSMB)},
		{"idle", "server Go heap / total (MB)", f1(id.GoHeapMB) + " / " + f1(id.GoTotalMB)},
		{"idle", "server CPU (cores)", f2(id.ServerCores)},
		{"traffic", "delivered (Mbit/s)", f1(t.Mbps)},
		{"traffic", "lost (%)", f2(t.LossPercent)},
		{"traffic", "server CPU-s per GB", f2(t.CPUPerGB)},
		{"traffic", "server CPU-s per GB above idle", f2(t.CPUPerGBAbove)},
		{"run", "handshakes / rekeys", fmt.Sprintf("%d / %d", h.Total, h.Rekeys)},
		{"run", "most handshakes in a second after the ramp", strconv.Itoa(h.PeakAfterRamp)},
		{"load generator", "CPU-s / cores in traffic / peak RSS (MB)", fmt.Sprintf("%.1f / %.2f / %.0f", r.Generator.CPUSeconds, r.Generator.TrafficCores, r.Generator.PeakRSSMB)},
	}
	drops := [][]string{{"reason", "server", "clients", "a bug?"}}
	all := map[string]bool{}
	for k := range r.ServerDrops {
		all[k] = true
	}
	for k := range r.ClientDrops {
		all[k] = true
	}
	for _, k := range sortedKeys(all) {
		bug := ""
		if slices.Contains(BugDrops, k) {
			bug = "yes"
		}
		drops = append(drops, []string{k, strconv.FormatUint(r.ServerDrops[k], 10), strconv.FormatUint(r.ClientDrops[k], 10), bug})
	}
	tables := []report.Table{{Caption: "Phases", Rows: phases}}
	if len(drops) > 1 {
		tables = append(tables, report.Table{Caption: "Drops over the run", Rows: drops})
	}
	notes := slices.Clone(r.Notes)
	if len(drops) == 1 {
		notes = append(notes, "No drops over the run, server or clients.")
	}
	notes = append(notes, "Handshakes per second (second after the first engine started: count): "+perSecondText(h.PerSecond, 30)+".")
	csv := [][]string{{"second", "handshakes"}}
	for s, n := range h.PerSecond {
		csv = append(csv, []string{strconv.Itoa(s), strconv.Itoa(n)})
	}
	return &report.Doc{
		Title: "braid load test",
		Lead: fmt.Sprintf("One braid server daemon and %d client engines of %d path(s) each, every path from its own source address, "+
			"started %s; %g inner packets a second per client of %d bytes for %.0f s after an idle hold of %.0f s; %s. "+
			"Host %s, kernel %s, %d CPUs, %s.",
			r.Clients, r.Paths, start, r.Rate, r.PacketSize, t.Seconds, id.HoldSeconds, rekey, r.Host, r.Kernel, r.CPUs,
			r.Started.UTC().Format(time.RFC3339)),
		Tables: tables,
		Notes:  notes,
		Legend: []string{
			"RSS per client: (server VmRSS after the idle hold − VmRSS before any client started) ÷ clients, every client configured in both; per configured client: the same from a server without clients.",
			"CPU: the server process's user + system time (/proc/PID/stat); per handshake over the ramp, per GB of inner bytes at the sink over the traffic phase (above idle: less the idle phase's cores over the same time).",
			"Drops: the server's drop counters (braid status) over the run; \"a bug?\" marks the reasons an honest client must never cause (the others shed load or follow rekeys).",
		},
		MD:   table.Markdown{First: "---", Others: "--:"},
		JSON: r,
		CSV:  []report.CSV{{Name: "handshakes.csv", Rows: csv}},
	}
}

// perSecondText lists the seconds with handshakes, at most limit of them.
func perSecondText(per []int, limit int) string {
	var parts []string
	for s, n := range per {
		if n == 0 {
			continue
		}
		if len(parts) == limit {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprintf("%d: %d", s, n))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
