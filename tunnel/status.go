package tunnel

import (
	"slices"
	"strconv"
	"time"

	"github.com/braid-vpn/braid/conn"
	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/keys"
)

// Status returns a snapshot for `braid status` and the metrics endpoint.
func (e *Engine) Status() control.Status {
	now := time.Now()
	name, _ := e.tun.Name()
	st := control.Status{
		Role:      e.role.String(),
		Interface: name,
		PublicKey: e.public.String(),
		Uptime:    now.Sub(e.epoch),
		Counters:  make(map[string]uint64),
	}
	for k, v := range e.Drops() {
		st.Counters[control.DropPrefix+k] = v
	}
	e.mu.RLock()
	if e.role == Server {
		for _, cs := range e.conns {
			// Sockets of one listen address (ListenReaders) are one address.
			if a := cs.c.LocalAddr().String(); !slices.Contains(st.Listen, a) {
				st.Listen = append(st.Listen, a)
			}
		}
		st.ListenSockets = len(e.conns)
	}
	st.Offload = offloadStatus(e.conns)
	if e.crypto != nil {
		s := e.crypto.Stats()
		st.Crypto = &control.CryptoStatus{Workers: e.crypto.Workers(), Batches: s.Batches, Items: s.Items, WorkerItems: s.WorkerItems}
	}
	st.TUN = &control.TUNStatus{Reads: e.counters.tunReads.Load(), ReadPackets: e.counters.tunReadPkts.Load(),
		Writes: e.counters.tunWrites.Load(), WritePackets: e.counters.tunWritePkts.Load(),
		WriteRuns: e.counters.tunRuns.Load(), WriteRunPackets: e.counters.tunRunPkts.Load()}
	peers := append([]*peer(nil), e.peers...)
	e.mu.RUnlock()
	for _, p := range peers {
		st.Peers = append(st.Peers, p.status(now))
	}
	return st
}

// PeerStatuses returns the status of the peers whose public keys (base64, as
// in PeerStatus.PublicKey) are in keys, in the engine's order, and nothing of
// the others: the console's history samples the peers a page watches every
// second without paying for a server's other clients.
func (e *Engine) PeerStatuses(pubs []string) []control.PeerStatus {
	now := time.Now()
	// Compared as keys, not strings: encoding a thousand keys a second
	// would cost more than the statuses.
	want := make([]keys.Key, 0, len(pubs))
	for _, s := range pubs {
		if k, err := keys.Parse(s); err == nil {
			want = append(want, k)
		}
	}
	e.mu.RLock()
	var peers []*peer
	for _, p := range e.peers {
		if slices.Contains(want, p.pub) {
			peers = append(peers, p)
		}
	}
	e.mu.RUnlock()
	out := make([]control.PeerStatus, 0, len(peers))
	for _, p := range peers {
		out = append(out, p.status(now))
	}
	return out
}

// offloadStatus sums the UDP sockets' offload state; nil when none has any.
func offloadStatus(conns []*connState) *control.OffloadStatus {
	var o *control.OffloadStatus
	for _, cs := range conns {
		of, ok := cs.c.(conn.Offloader)
		if !ok || cs.closed {
			continue
		}
		s := of.Offload()
		if o == nil {
			o = &control.OffloadStatus{GSO: "on", GRO: "on"}
		}
		if !s.GSO {
			o.GSO = "off (" + s.GSOOff + ")"
		}
		if !s.GRO {
			o.GRO = "off"
		}
		o.GSORuns += s.GSOSends
		o.GSODatagrams += s.GSODatagrams
		o.GRORuns += s.GRORuns
		o.GRODatagrams += s.GRODatagrams
	}
	return o
}

func (p *peer) status(now time.Time) control.PeerStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := control.PeerStatus{
		Name:          p.name,
		PublicKey:     p.pub.String(),
		Established:   p.cur != nil,
		LastHandshake: p.lastHS,
		Scheduler:     p.params.Scheduler,
		Reorder:       p.params.Reorder,
		Congestion:    p.params.Congestion,
		TxBytes:       p.txBytes,
		RxBytes:       p.rxBytes,
		TxPackets:     p.txPackets,
		RxPackets:     p.rxPackets,
		CCQueued:      p.ccq.len(),
		Recovery:      p.params.Recovery,
	}
	if p.cc != nil {
		ps.Queue = &control.QueueStatus{DelayMs: ms(p.ccq.sojourn), Marks: p.ccq.marks, Drops: p.ccq.drops}
	}
	if p.store != nil {
		ps.RecoveryStats = &control.RecoveryStatus{
			HoldMs:       ms(p.recHold),
			Retained:     p.store.Len(),
			GiveUps:      p.giveupsSent,
			BudgetOut:    p.recBudgetOut,
			EarlyResends: p.recEarly,
			Rebuilt:      p.fecUsed,
		}
		if p.fecEnc != nil {
			if r := p.fecEnc.Rate(); !r.Off() {
				ps.RecoveryStats.FEC = strconv.Itoa(r.K) + "+" + strconv.Itoa(int(r.M[r.K]))
			}
		}
		if p.reorder != nil {
			ps.RecoveryStats.HoldMs = ms(p.reorder.RecoveryHold())
			ps.RecoveryStats.Abandoned = p.reorder.Stats().Abandoned
		}
	}
	for _, a := range p.allowed {
		ps.AllowedIPs = append(ps.AllowedIPs, a.String())
	}
	if p.cur != nil {
		ps.SessionIndex = p.cur.LocalIndex
	}
	if p.reorder != nil {
		rs := p.reorder.Stats()
		ps.ReorderStats = control.ReorderStatus{
			HoldMs:     ms(p.reorder.Hold()),
			InOrder:    rs.InOrder,
			Bypassed:   rs.Bypassed,
			Reordered:  rs.Reordered,
			Timeouts:   rs.Timeouts,
			Late:       rs.Late,
			Duplicates: rs.Duplicates,
			Held:       uint64(rs.Held),
		}
	}
	var total uint64
	for _, pa := range p.paths {
		if pa != nil {
			total += pa.sender.Stats().TxBytes
		}
	}
	for _, pa := range p.paths {
		if pa == nil {
			continue
		}
		s := pa.sender.Stats()
		state := s.State.String()
		if !pa.validated {
			state = "validating"
		}
		x := control.PathStatus{
			ID:              int(pa.id),
			Local:           pa.cs.c.LocalAddr().String(),
			Remote:          pa.ep.Remote.String(),
			Device:          pa.cs.local.Device,
			State:           state,
			SRTTMs:          ms(s.SRTT),
			RTTVarMs:        ms(s.RTTVar),
			MinRTTMs:        ms(s.MinRTT),
			LossRate:        s.LossRate,
			DeliveryRateBps: s.DeliveryRate * 8,
			TxBytes:         s.TxBytes,
			TxPackets:       s.TxPackets,
			RxBytes:         pa.rxBytes,
			RxPackets:       pa.rxPackets,
			LostPackets:     s.LostPackets,
			SpuriousLost:    s.SpuriousLost,
			InFlight:        s.InFlight,
			QueueDelayMs:    ms(s.QueueDelay),
			OWDTrend:        s.OWDTrend,
			MTU:             pa.datagramLimit(),
			Priority:        int(p.tierOf(pa)),
			Stream:          streamStatus(pa.cs.c, pa.ep.Remote),
		}
		if pa.cc != nil {
			cs := pa.cc.Stats()
			x.CC = &control.PathCC{
				CwndBytes:        pa.cc.Window(),
				SsthreshBytes:    pa.cc.Ssthresh(),
				SlowStart:        cs.SlowStart,
				InRecovery:       cs.InRecovery,
				CongestionEvents: cs.CongestionEvents + cs.RTOs,
				PacingRateBps:    pa.cc.PacingRate() * 8,
				Mode:             cs.Mode,
				BandwidthBps:     cs.BW * 8,
			}
		}
		if p.store != nil {
			x.Recovery = &control.PathRecovery{Retransmitted: pa.retx, RetransmittedBytes: pa.retxBytes, Recovered: pa.recovered, Residual: pa.gaveUp, Rescued: pa.rescued,
				RepairSent: pa.repairs, RepairSentBytes: pa.repairBytes, RepairUsed: pa.rebuilt,
				RetransmittedLatencyBytes: pa.retxLatencyBytes, RepairSentLatencyBytes: pa.repairLatencyBytes}
		}
		if total > 0 {
			x.Share = float64(s.TxBytes) / float64(total)
		}
		if pa.meter != nil {
			x.BudgetUsed, x.Budget, x.BudgetBytes = pa.meter.Used, pa.meter.Limit.String(), pa.meter.Limit.Bytes
		}
		ps.Paths = append(ps.Paths, x)
	}
	if !p.isSrv {
		return ps
	}
	// A client's local paths still waiting for their interface.
	names := make([]string, 0, len(p.e.waiting))
	for l := range p.e.waiting {
		names = append(names, l)
	}
	slices.Sort(names)
	for _, l := range names {
		ps.Paths = append(ps.Paths, control.PathStatus{ID: -1, Local: l, Device: l, State: "waiting"})
	}
	return ps
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
