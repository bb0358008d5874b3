package tunnel

import "time"

// Priority tiers (client.priorities, docs/config.md): traffic goes to the lowest
// tier that has a usable path. Tiers 1 to 3 are *secondary*: the next of them
// joins when the tiers in use are saturated — their windows full and packets
// waiting in the per-peer queue for tierJoinAfter — one tier per tierJoinAfter,
// and leaves again once the queue has stayed short for tierLeaveAfter. Tiers 4
// to 7, and the tier of paths over their budget (overBudgetTier), are *backup*:
// they carry traffic only while every path below them is down (Speedify's
// primary, secondary and backup: a secondary link adds capacity while the
// primary cannot carry the load, a backup one, often metered, stands by).
// Saturation is seen only with a congestion controller (without one nothing
// ever waits). On a server, joined secondary tiers carry only the flows the
// client asked for (asked, below).

const (
	// backupTier is the lowest tier that never joins for saturation.
	backupTier = 4
	// tierJoinAfter: how long the tiers in use must stay saturated before the
	// next one joins (long enough that a burst does not wake a metered link).
	tierJoinAfter = time.Second
	// tierLeaveAfter: how long the queue must stay short before the highest
	// joined tier leaves.
	tierLeaveAfter = 5 * time.Second
	// tierGap: a short queue for less than this does not end a saturated
	// stretch (the queue empties for a moment between an inner flow's bursts).
	tierGap = 100 * time.Millisecond
)

// tierJoin is a peer's record of joined tiers.
type tierJoin struct {
	extra    int       // tiers above the lowest usable one that carry traffic now
	satStart time.Time // start of the current saturated stretch
	lastSat  time.Time // last refresh that found the tiers saturated (zero: never)
	changed  time.Time // last join or leave
}

// saturated reports whether packets wait in the per-peer queue for the paths
// in use: some are queued and the smoothed wait is at least half CoDel's target.
func (p *peer) saturated() bool {
	return p.cc != nil && p.ccq.len() > 0 && p.ccq.sojourn >= p.e.tn.CoDel.Target/2
}

// joinTiers updates the joined tiers and sets p.infoTierCeil, the highest tier
// that carries traffic now. Called by refreshInfos once infoLowTier is known.
// Caller holds p.mu.
func (p *peer) joinTiers(now time.Time) {
	tj := &p.tiers
	if !p.infoTiersSpread {
		*tj = tierJoin{}
		p.infoTierCeil = p.infoLowTier
		return
	}
	if p.saturated() {
		if now.Sub(tj.lastSat) > tierGap {
			tj.satStart = now
		}
		tj.lastSat = now
	}
	// up[0] is the lowest usable tier, up[1:n] the usable secondary tiers
	// above it, in order: the tiers that can join.
	var present [backupTier]bool
	for k := range p.infos {
		if t := p.infoTier[k]; p.infos[k].Usable && t < backupTier {
			present[t] = true
		}
	}
	up, n := [backupTier + 1]int{p.infoLowTier}, 1
	for t := p.infoLowTier + 1; t < backupTier; t++ {
		if present[t] {
			up[n], n = t, n+1
		}
	}
	tj.extra = min(tj.extra, n-1)
	switch {
	case tj.extra+1 < n && now.Sub(tj.lastSat) <= tierGap &&
		now.Sub(tj.satStart) >= tierJoinAfter && now.Sub(tj.changed) >= tierJoinAfter:
		tj.extra++
		tj.changed = now
		p.e.log.Info("tier joins: the tiers below are saturated", "peer", p.name, "tier", up[tj.extra])
	case tj.extra > 0 && now.Sub(tj.lastSat) >= tierLeaveAfter && now.Sub(tj.changed) >= tierLeaveAfter:
		p.e.log.Info("tier leaves: the queue stayed short", "peer", p.name, "tier", up[tj.extra])
		tj.extra--
		tj.changed = now
	}
	p.infoTierCeil = up[tj.extra]
}

// askedFor is how long after the client last sent a packet of a flow the server
// counts the flow's traffic to the client as asked for (a request, a transport's
// acks): only such traffic may use the secondary tiers that joined for
// saturation (hideTiers).
const askedFor = 10 * time.Second

// noFlow stands for a datagram of no single flow (an FEC repair): never asked for.
const noFlow = ^uint16(0)

// markAsked records that the client sent a packet of flow (a server's flow
// bucket: the same for both directions of a 5-tuple, reorder.FlowID). Caller
// holds p.mu.
func (p *peer) markAsked(flow uint16, now time.Time) {
	if p.askedAt == nil {
		p.askedAt = make([]int64, len(p.flowSq))
	}
	if int(flow) < len(p.askedAt) {
		p.askedAt[flow] = int64(now.Sub(p.e.epoch)) + 1 // 0: never
	}
}

// asked reports whether the client sent a packet of flow within askedFor.
func (p *peer) asked(flow uint16, now time.Time) bool {
	if int(flow) >= len(p.askedAt) || p.askedAt[flow] == 0 {
		return false
	}
	return int64(now.Sub(p.e.epoch))+1-p.askedAt[flow] < int64(askedFor)
}
