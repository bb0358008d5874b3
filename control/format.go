package control

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// ratio is a/b, 0 when b is 0.
func ratio(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// perRun describes coalesced runs: " (N runs, D datagrams each)".
func perRun(runs, dgrams uint64) string {
	if runs == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d runs, %.1f datagrams each)", runs, ratio(dgrams, runs))
}

// FormatStatus writes s as the human-readable report of `braid status`: the
// instance, then per peer a few summary lines and one table row per path.
func FormatStatus(w io.Writer, s Status) error {
	ew := &errWriter{w: w}
	ew.printf("interface %s (%s)\n", orDash(s.Interface), orDash(s.Role))
	ew.printf("  public key:  %s\n", orDash(s.PublicKey))
	if len(s.Listen) > 0 {
		ew.printf("  listening:   %s", strings.Join(s.Listen, ", "))
		if s.ListenSockets > len(s.Listen) {
			ew.printf(" (%d sockets)", s.ListenSockets)
		}
		ew.printf("\n")
	}
	if s.Transport != "" {
		ew.printf("  transport:   %s\n", s.Transport)
	}
	ew.printf("  uptime:      %s\n", s.Uptime.Round(time.Second))
	if m := s.Memory; m != nil {
		ew.printf("  memory:      %.1f MB heap, %.1f MB mapped by Go, %d GCs\n", float64(m.HeapBytes)/1e6, float64(m.TotalBytes)/1e6, m.GCs)
	}
	if t := s.TUN; t != nil && t.Reads+t.Writes > 0 {
		ew.printf("  tun:         %d reads (%.1f packets each), %d writes (%.1f packets each), %d runs to coalesce (%.1f packets each)\n", t.Reads, ratio(t.ReadPackets, t.Reads), t.Writes, ratio(t.WritePackets, t.Writes), t.WriteRuns, ratio(t.WriteRunPackets, t.WriteRuns))
	}
	if o := s.Offload; o != nil {
		ew.printf("  offload:     gso %s%s, gro %s%s\n", o.GSO, perRun(o.GSORuns, o.GSODatagrams), o.GRO, perRun(o.GRORuns, o.GRODatagrams))
	}
	if c := s.Crypto; c != nil {
		ew.printf("  crypto:      %d worker(s), %d batches shared (%.1f datagrams each), %.1f %% of them done by a worker\n", c.Workers, c.Batches, ratio(c.Items, c.Batches), 100*ratio(c.WorkerItems, c.Items))
	}

	drops, events := splitCounters(s.Counters)
	if len(drops) > 0 {
		ew.printf("  drops:       %s\n", strings.Join(drops, ", "))
	}
	if len(events) > 0 {
		ew.printf("  counters:    %s\n", strings.Join(events, ", "))
	}

	if len(s.Peers) == 0 {
		ew.printf("\nno peers\n")
	}
	for i := range s.Peers {
		ew.printf("\n")
		formatPeer(ew, s.Time, &s.Peers[i])
	}
	return ew.err
}

func formatPeer(ew *errWriter, now time.Time, p *PeerStatus) {
	if p.Name != "" {
		ew.printf("peer %s (%s)\n", p.Name, p.PublicKey)
	} else {
		ew.printf("peer %s\n", p.PublicKey)
	}
	if len(p.AllowedIPs) > 0 {
		ew.printf("  allowed ips: %s\n", strings.Join(p.AllowedIPs, ", "))
	}
	state := "not established"
	if p.Established {
		state = fmt.Sprintf("established, index %#08x", p.SessionIndex)
	}
	ew.printf("  session:     %s, last handshake %s\n", state, handshakeAge(now, p.LastHandshake))
	queued := ""
	if hasCC(p) {
		queued = fmt.Sprintf(" (%d queued)", p.CCQueued)
	}
	ew.printf("  scheduler:   %s, reorder %s (hold %.1f ms), congestion %s%s\n",
		orDash(p.Scheduler), orDash(p.Reorder), p.ReorderStats.HoldMs, orDash(p.Congestion), queued)
	ew.printf("  transfer:    %s sent (%d packets), %s received (%d packets)\n",
		HumanBytes(p.TxBytes), p.TxPackets, HumanBytes(p.RxBytes), p.RxPackets)
	r := &p.ReorderStats
	ew.printf("  reorder:     %d in order, %d acks past gaps, %d reordered, %d timeouts, %d late, %d duplicates, %d held\n",
		r.InOrder, r.Bypassed, r.Reordered, r.Timeouts, r.Late, r.Duplicates, r.Held)
	if q := p.Queue; q != nil {
		ew.printf("  queue:       %.1f ms delay, %d CoDel marks, %d CoDel drops\n", q.DelayMs, q.Marks, q.Drops)
	}
	if rs := p.RecoveryStats; rs != nil {
		var retx, rec, res uint64
		for i := range p.Paths {
			if pr := p.Paths[i].Recovery; pr != nil {
				retx += pr.Retransmitted
				rec += pr.Recovered
				res += pr.Residual
			}
		}
		ew.printf("  recovery:    %s, hold %.1f ms, %d resent, %d recovered, %d given up (%d by budget), %d gaps released\n",
			p.Recovery, rs.HoldMs, retx, rec, res, rs.BudgetOut, rs.Abandoned)
		ew.printf("  fec:         rate %s, %d rebuilt here\n", orDash(rs.FEC), rs.Rebuilt)
	} else if p.Recovery != "" {
		ew.printf("  recovery:    %s\n", p.Recovery)
	}

	if len(p.Paths) == 0 {
		ew.printf("  no paths\n")
		return
	}
	ew.printf("\n")
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	// AlignRight pads every cell on the left, which suits the numeric
	// columns and also indents the table under the peer.
	// With congestion control the table also shows each path's window, slow-start
	// threshold and bytes in flight; without, it stays as narrow as before.
	cc := hasCC(p)
	head := "PATH\tLOCAL\tREMOTE\tDEVICE\tSTATE\tRTT\tLOSS\tRATE\tSHARE\tTX\tRX\tMTU\t"
	if cc {
		head += "CWND\tSSTHRESH\tINFLIGHT\tPACING\t"
	}
	rec := p.RecoveryStats != nil
	if rec {
		head += "RESENT\tRECOVERED\tREPAIRS\tREBUILT\tRESIDUAL\t"
	}
	fmt.Fprintln(tw, head)
	for i := range p.Paths {
		ps := &p.Paths[i]
		mtu := "-"
		if ps.MTU > 0 {
			mtu = strconv.Itoa(ps.MTU)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%.2f %%\t%.2f Mbit/s\t%.1f %%\t%s\t%s\t%s\t",
			ps.ID, orDash(ps.Local), orDash(ps.Remote), orDash(ps.Device), orDash(ps.State),
			rtt(ps.SRTTMs), 100*ps.LossRate, ps.DeliveryRateBps/1e6, 100*ps.Share,
			HumanBytes(ps.TxBytes), HumanBytes(ps.RxBytes), mtu)
		if cc {
			if c := ps.CC; c != nil {
				ss := "inf"
				if c.SsthreshBytes >= 0 {
					ss = HumanBytes(uint64(c.SsthreshBytes))
				}
				pacing := "-"
				if c.PacingRateBps > 0 {
					pacing = fmt.Sprintf("%.2f Mbit/s", c.PacingRateBps/1e6)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t", HumanBytes(uint64(c.CwndBytes)), ss, HumanBytes(uint64(max(ps.InFlight, 0))), pacing)
			} else {
				fmt.Fprintf(tw, "-\t-\t%s\t-\t", HumanBytes(uint64(max(ps.InFlight, 0))))
			}
		}
		if rec {
			var r PathRecovery
			if ps.Recovery != nil {
				r = *ps.Recovery
			}
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t", r.Retransmitted, r.Recovered, r.RepairSent, r.RepairUsed, r.Residual)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	for i := range p.Paths {
		if p.Paths[i].Stream != nil {
			ew.printf("\n")
			break
		}
	}
	for i := range p.Paths {
		formatStream(ew, now, &p.Paths[i])
	}
}

// formatStream writes the connection under a path of a tcp or mptcp tunnel, and
// its subflows.
func formatStream(ew *errWriter, now time.Time, ps *PathStatus) {
	st := ps.Stream
	if st == nil {
		return
	}
	if !st.Connected {
		last := ""
		if st.LastError != "" {
			last = ": " + st.LastError
		}
		ew.printf("  path %d: %s connection down (%d connects)%s\n", ps.ID, orDash(st.Kind), st.Connects, last)
		return
	}
	age := ""
	if !st.Since.IsZero() && !now.IsZero() {
		age = fmt.Sprintf(" for %s", now.Sub(st.Since).Round(time.Second))
	}
	ew.printf("  path %d: %s %s → %s connected%s (%d connects), %s sent, %s received",
		ps.ID, st.Kind, orDash(st.Local), orDash(st.Remote), age, st.Connects, HumanBytes(st.TxBytes), HumanBytes(st.RxBytes))
	if st.Kind == "tcp" && st.RTTMs > 0 {
		ew.printf(", rtt %.1f ms, cwnd %d, %d retransmits", st.RTTMs, st.CwndSegments, st.Retransmits)
	}
	ew.printf("\n")
	if st.Kind != "mptcp" {
		return
	}
	ew.printf("    %d subflows (limit %d more than the first)\n", st.ExtraSubflows+1, st.ExtraSubflowsMax)
	if len(st.Subflows) == 0 {
		return
	}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "SUBFLOW\tLOCAL\tREMOTE\tRTT\tCWND\tSENT\tACKED\tRETRANS\tRECEIVED\t")
	for i := range st.Subflows {
		sf := &st.Subflows[i]
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t\n", i, sf.Local, sf.Remote, rtt(sf.RTTMs), sf.CwndSegments,
			HumanBytes(sf.TxBytes), HumanBytes(sf.AckedBytes), HumanBytes(sf.RetransBytes), HumanBytes(sf.RxBytes))
	}
	tw.Flush()
}

// hasCC reports whether any path of p runs a congestion controller.
func hasCC(p *PeerStatus) bool {
	for i := range p.Paths {
		if p.Paths[i].CC != nil {
			return true
		}
	}
	return false
}

func handshakeAge(now, t time.Time) string {
	switch {
	case t.IsZero():
		return "never"
	case now.IsZero():
		return t.Format(time.RFC3339)
	}
	age := now.Sub(t).Round(time.Second)
	if age < 0 {
		age = 0
	}
	return age.String() + " ago"
}

func rtt(ms float64) string {
	if ms <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f ms", ms)
}

// splitCounters renders non-zero counters as "name value", drop reasons
// apart from other events, each sorted by name for a stable display.
func splitCounters(c map[string]uint64) (drops, events []string) {
	for k, v := range c {
		if v == 0 {
			continue
		}
		if reason, ok := strings.CutPrefix(k, DropPrefix); ok {
			drops = append(drops, fmt.Sprintf("%s %d", reason, v))
		} else {
			events = append(events, fmt.Sprintf("%s %d", k, v))
		}
	}
	slices.Sort(drops)
	slices.Sort(events)
	return drops, events
}

// HumanBytes renders a byte count with binary prefixes, as ip -h and wg do.
func HumanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	prefixes := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := -1
	for v >= unit && i < len(prefixes)-1 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.2f %s", v, prefixes[i])
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// errWriter keeps the first write error so the formatting code can stay a
// flat list of prints.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) {
	fmt.Fprintf(e, format, args...)
}
