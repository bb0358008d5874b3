package fleet

import (
	"fmt"
	"strconv"
	"time"

	"github.com/braid-vpn/braid/lab/report"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/lab/table"
)

// Legend explains the report's columns (docs/lab.md, "Fleet", says more).
var Legend = []string{
	"goodput: bytes the client's download received in the measured window ÷ its length (Mbit/s, 10^6 bit)",
	"stall: the longest time in the window with no byte received, and when it began (s into the window); with a kill, also per phase (before the kill / after it / after the revival), a stall belonging to the phase where it ended",
	"servers: the server holding the client's session at the window's start, just before the kill and at the end (-: none)",
	"paths: per server, the client's paths that server's status lists as usable at the end / that brought it bytes in the run's last 500 ms; home = all usable on its session's server, none bringing another server bytes",
	"moves: changes of server between two live servers that no kill forced (e.g. a rekey that moved)",
	"Jain: (Σx)² / (n·Σx²) over the clients' goodputs",
}

// Document is the run's report: results.json, report.md and samples.csv.
func (r *Results) Document() *report.Doc {
	s := r.Setup
	lead := fmt.Sprintf("%d client daemon(s) × %d path(s), %d server(s)", s.Clients, s.Paths, s.Servers)
	if s.Servers > 1 {
		lead += fmt.Sprintf(" behind the nftables balancer (server_id_bits %d)", s.ServerIDBits)
	}
	if s.UplinkBps > 0 {
		lead += fmt.Sprintf(", each server's uplink shaped to %s (tbf)", scenario.Rate(s.UplinkBps))
	}
	obj := "one continuous download"
	if s.ObjectBytes != Continuous {
		obj = table.Size(s.ObjectBytes, "") + " downloads repeated"
	}
	lead += fmt.Sprintf("; %s per client, TCP %s; %.0f s measured after %.0f s warm-up", obj, s.CC, s.Seconds, s.WarmupS)
	if s.Kill >= 0 {
		lead += fmt.Sprintf("; server %d killed at %.1f s", s.Kill, s.KillAtS)
		if s.ReviveAtS > 0 {
			lead += fmt.Sprintf(", started again at %.1f s", s.ReviveAtS)
		}
	}
	if s.RekeyAfterS > 0 {
		lead += fmt.Sprintf("; rekey_after_time %gs", s.RekeyAfterS)
	}
	lead += fmt.Sprintf("; seed %d; started %s.", r.Seed, r.Started.UTC().Format("2006-01-02 15:04 MST"))
	d := &report.Doc{
		Title:  "braid lab fleet " + r.Scenario,
		Lead:   lead,
		Tables: []report.Table{{Caption: "Summary", Rows: r.summaryRows()}, {Caption: "Clients", Rows: r.clientRows()}, {Caption: "Servers at the end", Rows: r.serverRows()}},
		Legend: Legend,
		MD:     table.Markdown{First: "---", Others: "---:"},
		JSON:   r,
		CSV:    []report.CSV{{Name: "samples.csv", Rows: r.sampleRows()}},
	}
	if c := r.CPU; c != nil {
		d.Notes = append(d.Notes, fmt.Sprintf("CPU over the window, cores busy of %d: machine %.2f (every process), client daemons %.2f, server daemons %.2f, the lab process %.2f",
			c.CPUs, c.Machine, c.Clients, c.Servers, c.Lab))
	}
	for _, e := range r.Events {
		d.Notes = append(d.Notes, fmt.Sprintf("%.2f s: %s", e.T, e.What))
	}
	for _, e := range r.Errors {
		d.Notes = append(d.Notes, "error: "+e)
	}
	return d
}

// verdict marks a figure against its target.
func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func ms(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) + " ms" }

func (r *Results) summaryRows() [][]string {
	s := r.Summary
	rows := [][]string{{"figure", "value", "target"},
		{"aggregate goodput", fmt.Sprintf("%.1f Mbit/s", s.AggregateMbps), ""},
		{"Jain's index", fmt.Sprintf("%.3f", s.Jain), fmt.Sprintf("≥ %.2f: %s", TargetJain, verdict(s.Jain >= TargetJain))},
		{"goodput min / median / max", fmt.Sprintf("%.1f / %.1f / %.1f Mbit/s", s.MinMbps, s.MedianMbps, s.MaxMbps), ""},
		{"longest stall, any client", ms(s.LongestStallMs), ""},
	}
	if s.UplinkShare > 0 {
		rows = append(rows, []string{"aggregate ÷ the servers' uplinks", fmt.Sprintf("%.3f (ceiling %.3f)", s.UplinkShare, s.UplinkCeiling),
			fmt.Sprintf("≥ %.2f: %s", TargetUplinkShare, verdict(s.UplinkShare >= TargetUplinkShare))})
	}
	if r.Setup.Kill >= 0 {
		rows = append(rows,
			[]string{"killed server's clients", strconv.Itoa(s.KilledClients), ""},
			[]string{"their longest stall from the kill on", ms(s.KilledStallMs), fmt.Sprintf("≤ %v: %s", TargetFailoverStall, verdict(s.KilledStallMs <= ms64(TargetFailoverStall)))},
			[]string{"they landed on", fmt.Sprint(s.KilledLanded), ""},
			[]string{"their sessions back on a live server within", fmt.Sprintf("%.1f s", s.KilledSessionBackS), "(the tunnel's part of the stall)"},
			[]string{"the others' longest stall from the kill on", ms(s.OthersStallMs), fmt.Sprintf("≤ %v: %s", TargetUndisturbStall, verdict(s.OthersStallMs <= ms64(TargetUndisturbStall)))},
			[]string{"the others' longest stall before the kill", ms(s.OthersBaselineMs), "(their baseline)"})
	}
	rows = append(rows,
		[]string{"clients with every path home", fmt.Sprintf("%d of %d", s.ClientsPathsHome, len(r.Clients)), verdict(s.ClientsPathsHome == len(r.Clients))},
		[]string{"unforced moves", strconv.Itoa(s.Moves), ""},
		[]string{"clients whose download broke", strconv.Itoa(s.ClientsWithFailures), ""})
	return rows
}

func ms64(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func server(j int) string {
	if j < 0 {
		return "-"
	}
	return strconv.Itoa(j)
}

func (r *Results) clientRows() [][]string {
	rows := [][]string{{"client", "goodput Mbit/s", "stall", "at s", "stall by phase ms", "servers", "paths", "moves", "broke"}}
	for _, c := range r.Clients {
		servers := server(c.ServerStart)
		if c.ServerBeforeKill != nil {
			servers += "→" + server(*c.ServerBeforeKill)
		}
		servers += "→" + server(c.ServerEnd)
		paths := fmt.Sprintf("%v / %v", c.PathsUsable, c.PathsReceiving)
		if c.PathsHome {
			paths += " home"
		}
		phases := "-"
		if r.Setup.Kill >= 0 {
			phases = fmt.Sprintf("%.0f / %.0f / %.0f", c.PhaseStallMs[0], c.PhaseStallMs[1], c.PhaseStallMs[2])
		}
		rows = append(rows, []string{strconv.Itoa(c.Index), fmt.Sprintf("%.1f", c.GoodputMbps), ms(c.LongestStallMs),
			fmt.Sprintf("%.2f", c.StallAtS), phases, servers, paths, strconv.Itoa(c.Moves), strconv.Itoa(c.Failures)})
	}
	return rows
}

func (r *Results) serverRows() [][]string {
	rows := [][]string{{"server", "sessions at start", "sessions", "established peers", "usable paths", "stray paths", "killed"}}
	for _, s := range r.Servers {
		k := ""
		if s.Killed {
			k = "yes"
		}
		rows = append(rows, []string{strconv.Itoa(s.ID), strconv.Itoa(s.SessionsStart), strconv.Itoa(s.Sessions), strconv.Itoa(s.Established),
			strconv.Itoa(s.Paths), strconv.Itoa(s.StrayPaths), k})
	}
	return rows
}

// sampleRows is samples.csv: seconds into the window, then each client's
// bytes since it began.
func (r *Results) sampleRows() [][]string {
	head := []string{"t"}
	for i := range r.Clients {
		head = append(head, "client"+strconv.Itoa(i))
	}
	rows := [][]string{head}
	for _, s := range r.Samples {
		row := []string{strconv.FormatFloat(s.T, 'f', 3, 64)}
		for _, b := range s.Bytes {
			row = append(row, strconv.FormatInt(b, 10))
		}
		rows = append(rows, row)
	}
	return rows
}
