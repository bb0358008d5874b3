package tunnel

import (
	"time"

	"github.com/braid-vpn/braid/path"
	"github.com/braid-vpn/braid/sbd"
)

// Shared bottlenecks. The controller couples only the paths that share one
// (cc.Path.SetGroup; docs/congestion.md): coupling paths through different
// bottlenecks would hold each below what one TCP flow gets there, and leaving
// paths through one bottleneck uncoupled would take several flows' share of it.
// Paths over one access link share it for certain and form one group. The
// others are grouped by package sbd (RFC 8382's summary statistics of delay and
// loss, docs/sbd.md) from their RTT samples, which the server, the sender of a
// download, has for every path on one clock. Until the detector has evidence
// (about 11 s of a congested bottleneck), each access link is a group of its own.

// sbdAttach makes ps a flow of the peer's detector (created with the first
// path) and puts it in its group. Caller holds p.mu; p.cc is not nil.
func (p *peer) sbdAttach(ps *pathState) {
	if p.sbd == nil {
		p.sbd = sbd.New(p.e.tn.SBD)
	}
	if ps.sbdID < 0 {
		ps.sbdID = p.sbd.AddFlow()
	}
	p.applyGroups()
}

// sbdDetach forgets a path that goes away.
func (p *peer) sbdDetach(ps *pathState) {
	if p.sbd != nil && ps.sbdID >= 0 {
		p.sbd.RemoveFlow(ps.sbdID)
		ps.sbdID = -1
	}
}

// sbdSample hands the detector what one ACK frame measured on ps: its RTT
// sample and the packets it judged (acknowledged, and lost since the last call).
func (p *peer) sbdSample(ps *pathState, r *path.AckResult, lost int, now time.Time) {
	if p.sbd == nil || ps.sbdID < 0 {
		return
	}
	acked := 0
	if r != nil {
		if r.RTT > 0 {
			p.sbd.OnDelay(ps.sbdID, now, r.RTT)
		}
		acked = r.Packets
	}
	if acked+lost > 0 {
		p.sbd.OnPackets(ps.sbdID, acked+lost, lost)
	}
}

// sbdTick closes the detector's base intervals and regroups the paths when the
// groups changed. Caller holds p.mu.
func (p *peer) sbdTick(now time.Time) {
	if p.sbd != nil && p.cc != nil && p.sbd.Tick(now) {
		p.applyGroups()
	}
}

// applyGroups gives every path's controller its group: the detector's, the same
// for every path over one access link (the group of the first of them).
func (p *peer) applyGroups() {
	for _, ps := range p.paths {
		if ps == nil || ps.cc == nil || ps.sbdID < 0 {
			continue
		}
		g := p.sbd.Group(ps.sbdID)
		if ps.link != 0 {
			for _, o := range p.paths {
				if o != nil && o.cc != nil && o.sbdID >= 0 && o.link == ps.link {
					g = p.sbd.Group(o.sbdID)
					break
				}
			}
		}
		ps.cc.SetGroup(g)
	}
}
