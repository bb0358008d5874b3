package bench

import (
	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/lab/runner"
)

// Batching is how a braid download crossed the kernel, from the daemons'
// status counters over the timed download (docs/architecture.md, "Data-path
// speed"): at the server, the sender, packets per TUN read (the inner TCP's
// super-packets split) and datagrams per UDP GSO send; at the client, the
// receiver, datagrams per UDP GRO run, packets per TUN write and per run
// laid out for the TUN to coalesce. 0: none happened. Near 1 at speed means
// the offload is not in effect.
type Batching struct {
	ServerReadPackets  float64 `json:"server_tun_packets_per_read"`
	ServerGSO          float64 `json:"server_datagrams_per_gso_send"`
	ClientGRO          float64 `json:"client_datagrams_per_gro_run"`
	ClientWritePackets float64 `json:"client_tun_packets_per_write"`
	ClientRunPackets   float64 `json:"client_tun_packets_per_run"`
}

// counts is the part of a daemon's status that Batching is computed from.
type counts struct {
	tun     control.TUNStatus
	offload control.OffloadStatus
}

func countsOf(st control.Status) counts {
	var c counts
	if st.TUN != nil {
		c.tun = *st.TUN
	}
	if st.Offload != nil {
		c.offload = *st.Offload
	}
	return c
}

// batching is Batching over the counters' growth from before to after.
func batching(cliBefore, cliAfter, srvBefore, srvAfter counts) Batching {
	per := func(n, d uint64) float64 {
		if d == 0 {
			return 0
		}
		return float64(n) / float64(d)
	}
	ct, cb := cliAfter.tun, cliBefore.tun
	st, sb := srvAfter.tun, srvBefore.tun
	co, cob := cliAfter.offload, cliBefore.offload
	so, sob := srvAfter.offload, srvBefore.offload
	return Batching{
		ServerReadPackets:  per(st.ReadPackets-sb.ReadPackets, st.Reads-sb.Reads),
		ServerGSO:          per(so.GSODatagrams-sob.GSODatagrams, so.GSORuns-sob.GSORuns),
		ClientGRO:          per(co.GRODatagrams-cob.GRODatagrams, co.GRORuns-cob.GRORuns),
		ClientWritePackets: per(ct.WritePackets-cb.WritePackets, ct.Writes-cb.Writes),
		ClientRunPackets:   per(ct.WriteRunPackets-cb.WriteRunPackets, ct.WriteRuns-cb.WriteRuns),
	}
}

// batchingOf is Batching over the growth of the braid daemons' counters
// from before to after; nil for a tunnel without them.
func batchingOf(before, after runner.Counters) *Batching {
	if before.Receiver == nil || before.Sender == nil || after.Receiver == nil || after.Sender == nil {
		return nil
	}
	b := batching(countsOf(*before.Receiver), countsOf(*after.Receiver), countsOf(*before.Sender), countsOf(*after.Sender))
	return &b
}

// meanBatching averages the samples' Batching (nil when none has one).
func meanBatching(samples []Sample) *Batching {
	var m Batching
	n := 0
	for _, s := range samples {
		if b := s.Batching; b != nil {
			m.ServerReadPackets += b.ServerReadPackets
			m.ServerGSO += b.ServerGSO
			m.ClientGRO += b.ClientGRO
			m.ClientWritePackets += b.ClientWritePackets
			m.ClientRunPackets += b.ClientRunPackets
			n++
		}
	}
	if n == 0 {
		return nil
	}
	f := 1 / float64(n)
	m = Batching{m.ServerReadPackets * f, m.ServerGSO * f, m.ClientGRO * f, m.ClientWritePackets * f, m.ClientRunPackets * f}
	return &m
}

// batchingRows is the batching table, header first; nil when no case has it.
func (r *Report) batchingRows() [][]string {
	rows := [][]string{{"batching (braid)", "srv TUN pkts/read", "srv dgrams/GSO send", "cli dgrams/GRO run", "cli TUN pkts/write", "cli pkts/run to coalesce"}}
	for _, c := range r.Cases {
		if b := c.Batching; b != nil {
			rows = append(rows, []string{c.Label, fnum(Num(b.ServerReadPackets), 1), fnum(Num(b.ServerGSO), 1),
				fnum(Num(b.ClientGRO), 1), fnum(Num(b.ClientWritePackets), 1), fnum(Num(b.ClientRunPackets), 1)})
		}
	}
	if len(rows) == 1 {
		return nil
	}
	return rows
}

// batchingLegend explains the batching table.
const batchingLegend = "batching: braid's daemons' status counters over each timed download, averaged over the repetitions: the server's packets per TUN read (super-packets split) and datagrams per UDP GSO send, the client's datagrams per UDP GRO run, packets per TUN write and per run laid out for the TUN to coalesce (tundev.Stager). 0: none happened; near 1 at speed: the offload is not in effect."
