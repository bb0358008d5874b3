package tunnel

import "time"

// Choosing the paths of one datagram: the engine hands the scheduler (package
// sched) a snapshot of every path (p.infos, refreshed by refreshInfos) and
// the scheduler picks; before it does, the engine hides for this one choice
// the paths the datagram must not take: those above the priority tiers that
// carry traffic now (tiers.go), and those too small for it while a larger
// path is usable (mtu.go). Nothing here allocates; the caller holds p.mu.

// pick asks the scheduler for the paths of a datagram of size bytes of flow,
// keeping it off paths that cannot carry it while some usable path can. Caller
// holds p.mu; p.infos is fresh.
func (p *peer) pick(size int, flow uint16, now time.Time) {
	var hidden [maxPaths]bool
	masked := p.hideUnfit(size, flow, now, &hidden)
	p.picks = p.sched.Pick(p.picks[:0], p.infos, size, uint32(flow), now)
	if masked {
		p.unhide(&hidden)
	}
}

// hideUnfit marks unusable in p.infos, for one choice of path, the usable paths
// that are not in the lowest priority tier that has a usable path, and those that
// cannot carry a datagram of size while another usable path can; it reports
// whether it hid any, and unhide undoes it.
func (p *peer) hideUnfit(size int, flow uint16, now time.Time, hidden *[maxPaths]bool) bool {
	masked := p.hideTiers(hidden, flow, now)
	if size <= p.infoMinMTU {
		return masked
	}
	fits := false
	for i := range p.infos {
		if p.infos[i].Usable && p.infoMTU[i] >= size {
			fits = true
			break
		}
	}
	if !fits {
		return masked
	}
	for i := range p.infos {
		if p.infos[i].Usable && p.infoMTU[i] < size {
			p.infos[i].Usable, hidden[i], masked = false, true, true
		}
	}
	return masked
}

// hideTiers hides the usable paths above the tiers that carry traffic now: the
// lowest tier that has a usable path, and those that joined while it was
// saturated (tiers.go). A backup tier carries traffic only while the tiers
// below are down or full. The tiers are found once per refreshInfos, not per
// packet. On a server the joined tiers carry only flows the client asked for
// (asked): anyone on the Internet can saturate a client's primary by sending to
// its tunnel address, and that must not spill onto its secondary paths, often
// metered links with an allowance.
func (p *peer) hideTiers(hidden *[maxPaths]bool, flow uint16, now time.Time) bool {
	if !p.infoTiersSpread {
		return false
	}
	ceil := p.infoTierCeil
	if ceil > p.infoLowTier && !p.isSrv && !p.asked(flow, now) {
		ceil = p.infoLowTier
	}
	for i := range p.infos {
		if p.infos[i].Usable && int(p.infoTier[i]) > ceil {
			p.infos[i].Usable, hidden[i] = false, true
		}
	}
	return true
}

func (p *peer) unhide(hidden *[maxPaths]bool) {
	for i := range p.infos {
		if hidden[i] {
			p.infos[i].Usable = true
		}
	}
}
