package tunnel

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/braid-vpn/braid/lanes"
	"github.com/braid-vpn/braid/noise"
	"github.com/braid-vpn/braid/path"
	"github.com/braid-vpn/braid/wire"
)

// routineTimers runs everything that happens on a clock: delayed acks, probes of
// idle and dead paths, liveness, path challenges, reorder timeouts, rekeying.
func (e *Engine) routineTimers() {
	defer e.wg.Done()
	t := time.NewTicker(e.tn.Tick)
	defer t.Stop()
	w := &writer{e: e}
	var toTUN []*packetBuf
	var tw tunWrite
	var turn lanes.Ticket
	var peers []*peer
	for {
		select {
		case <-e.closing:
			return
		case now := <-t.C:
			e.mu.RLock()
			peers = append(peers[:0], e.peers...)
			e.mu.RUnlock()
			for _, p := range peers {
				p.mu.Lock()
				toTUN = p.tick(now, w, toTUN)
				p.takeTurn(&turn, toTUN)
				p.mu.Unlock()
				p.writeTurn(&turn, toTUN, &tw)
				toTUN = toTUN[:0]
				w.flush()
			}
			clear(peers)
		}
	}
}

// tick is one timer step for a peer. Caller holds p.mu.
func (p *peer) tick(now time.Time, w *writer, toTUN []*packetBuf) []*packetBuf {
	e := p.e
	tn := &e.tn
	if p.cur != nil || p.next != nil {
		for _, ps := range p.paths {
			if ps == nil {
				continue
			}
			if !ps.validated {
				switch {
				case !ps.lostAt.IsZero():
					// It lost the client path to the old endpoint: forgotten
					// after the hold, challenged anew if it sends again.
					if now.Sub(ps.lostAt) >= p.migrationHold() {
						p.removePath(ps)
					}
					continue
				case ps.ready:
					p.decideMove(ps, now, w)
					continue
				}
				// A source that does not answer a few challenges is forgotten: it
				// may be spoofed, and we must not keep sending to it. One whose
				// 3× budget allowed fewer challenges (it sent one small datagram)
				// goes after as long as they would all have taken.
				if now.Sub(ps.chalSent) >= tn.ChallengeRetry {
					if ps.chalTries >= tn.ChallengeTries || now.Sub(ps.created) >= tn.ChallengeRetry*time.Duration(tn.ChallengeTries+1) {
						p.removePath(ps)
					} else {
						p.sendChallenge(ps, now, w)
					}
				}
				continue
			}
			p.backTick(ps, now, w)
			wasUsable := ps.sender.Usable()
			if ps.sender.OnTimer(now) {
				p.sendControl(w, ps, now, framePing, [wire.ChallengeLen]byte{})
			}
			p.sendCookie(w, ps, now)
			if ps.cc != nil {
				p.ccTick(ps, now)
			}
			if !ps.amp { // probes are large; the path waits for an ack first
				p.mtuTick(w, ps, now)
			}
			st := ps.sender.State()
			if wasUsable != ps.sender.Usable() {
				p.logClient(now, slog.LevelInfo, "path state", "path", ps.id, "local", ps.cs.local.String(), "remote", ps.ep.Remote.String(), "state", st.String())
			}
			if wasUsable && st == path.Down {
				p.shareFate(ps, now)
			}
			if st == path.Down {
				if ps.downSince.IsZero() {
					ps.downSince = now
				}
				if !p.isSrv && now.Sub(ps.downSince) > tn.PathForgetAfter {
					p.removePath(ps)
					continue
				}
			} else {
				ps.downSince = time.Time{}
			}
		}
		p.refreshMTU()
		p.sbdTick(now)
		for _, r := range p.rxList {
			if r.arrival == nil || !r.r.AckDue(now) {
				continue
			}
			p.sendControl(w, r.arrival, now, frameAckOnly, [wire.ChallengeLen]byte{})
		}
	}
	// Losses found above are resent or given up; losses and liveness changes may
	// have opened windows; and packets that waited too long go.
	p.processLosses(w, now)
	p.processDeferred(w, now)
	p.rescueLate(w, now)
	p.fecTick(w, now)
	p.flushNotices(w, now)
	p.drainQueue(w, now, true)
	if p.reorder != nil {
		p.updateHold()
		if p.store != nil {
			// Gaps in TCP flows wait for a resend as long as one can take.
			p.refreshInfos(now)
			p.reorder.SetRecoveryHold(p.recHold)
		}
		toTUN = p.fecRxTick(now, toTUN)
		toTUN = p.reorder.Expire(now, toTUN)
	}
	if p.isSrv {
		p.budgetTick(now)
		p.clientTick(now)
	} else {
		p.serverTick(now)
	}
	p.releaseIdle(now)
	return toTUN
}

// shareFate takes down the paths that cross the same access link as ps, which just
// went Down: an interface or uplink that fails takes all its paths with it, and a
// path the scheduler used little would otherwise be noticed only by the idle
// timer, seconds later, while it still gets packets. Paths that are in fact alive
// answer the immediate probe and return within a round trip.
func (p *peer) shareFate(ps *pathState, now time.Time) {
	if ps.link == 0 {
		return
	}
	for _, o := range p.paths {
		if o == nil || o == ps || o.link != ps.link || !o.validated || !o.sender.Usable() {
			continue
		}
		o.sender.ForceDown()
		p.logClient(now, slog.LevelInfo, "path state", "path", o.id, "local", o.cs.local.String(), "remote", o.ep.Remote.String(), "state", "down", "reason", "shares a link with path "+strconv.Itoa(int(ps.id)))
	}
}

// updateHold sets the adaptive reorder hold from what the receiver measures: the
// spread of one-way delays between the peer's paths plus their jitter is how long a
// packet overtaken by a faster path can still be on its way.
func (p *peer) updateHold() {
	var lo, hi int32
	var jit time.Duration
	var ref uint32
	n := 0
	for _, r := range p.rxList {
		if r.arrival == nil || r.r.Stats().RxPackets == 0 {
			continue
		}
		if r.arrival.validated && r.arrival.sender.State() == path.Down {
			continue
		}
		v := r.r.OWDRaw()
		if n == 0 {
			ref = v
		}
		d := int32(v - ref)
		if n == 0 || d < lo {
			lo = d
		}
		if n == 0 || d > hi {
			hi = d
		}
		jit = max(jit, r.r.OWDJitter())
		n++
	}
	if n == 0 {
		return
	}
	skew := time.Duration(hi-lo)*time.Microsecond + 2*jit + p.e.tn.ReorderMargin
	p.reorder.SetHold(skew)
}

// clientTick handles the client's handshake timers.
func (p *peer) clientTick(now time.Time) {
	tn := &p.e.tn
	switch {
	case p.hs != nil:
		if now.Sub(p.hsSent) >= p.hsRetry {
			p.initiateLocked(now, false)
		}
	case p.cur == nil:
		p.initiateLocked(now, true)
	case now.Sub(p.cur.Created) >= tn.rekeyAfter(p.cur),
		p.cur.SendCounter() >= tn.RekeyAfterMessages,
		p.cur.MaxRecvCounter() >= tn.RekeyAfterMessages:
		p.initiateLocked(now, true)
	case now.Sub(p.lastRx) >= tn.SessionDeadAfter:
		// Idle paths are probed, so silence this long means the server lost our
		// session (restart) or every path is dead: handshake again.
		p.e.log.Info("no answer from server; handshaking again", "silent", now.Sub(p.lastRx).Round(time.Millisecond).String())
		p.initiateLocked(now, true)
	case tn.SessionSuspectAfter > 0 && now.Sub(p.lastRx) >= tn.SessionSuspectAfter && p.lastHS.Before(p.lastRx):
		// Silent for a while: rekey early, to the same server (see
		// SessionSuspectAfter). Once per silence: the handshake's own retries
		// follow, and turn random at SessionDeadAfter.
		p.e.log.Info("server silent; rekeying early", "silent", now.Sub(p.lastRx).Round(time.Millisecond).String())
		p.initiateLocked(now, true)
	}
	if p.prev != nil && now.Sub(p.prev.Created) >= tn.RejectAfterTime {
		// releaseIndex counts the change (idxGen): a reader's kept entry for
		// these keys goes with them.
		p.e.releaseIndex(p.prev.LocalIndex)
		p.prev = nil
	}
	if p.cur != nil && now.Sub(p.cur.Created) >= tn.RejectAfterTime {
		p.e.log.Warn("session keys expired")
		p.endSessionKeysOnly()
	}
}

// rekeyAfter is the age at which a client rekeys kp: RekeyAfterTime less a
// share of RekeyJitter of it taken from the low 16 bits of kp's local index.
// Those bits are random (newIndex), so the share is uniform over sessions
// and needs no state of its own.
func (tn *Tunables) rekeyAfter(kp *noise.Keypair) time.Duration {
	share := float64(kp.LocalIndex&0xffff) / (1 << 16)
	return tn.RekeyAfterTime - time.Duration(float64(tn.RekeyAfterTime)*tn.RekeyJitter*share)
}

// serverTick expires a client's keys.
func (p *peer) serverTick(now time.Time) {
	tn := &p.e.tn
	if p.prev != nil && now.Sub(p.prev.Created) >= tn.RejectAfterTime {
		// releaseIndex counts the change (idxGen): a reader's kept entry for
		// these keys goes with them.
		p.e.releaseIndex(p.prev.LocalIndex)
		p.prev = nil
	}
	if p.cur != nil && now.Sub(p.cur.Created) >= tn.RejectAfterTime {
		p.e.log.Info("client session expired", "peer", p.name)
		p.endSession(now, false)
	}
	if p.next != nil && now.Sub(p.next.Created) >= tn.RejectAfterTime {
		p.e.releaseIndex(p.next.LocalIndex)
		p.next = nil
	}
}

// endSessionKeysOnly drops a client's keys but keeps its configured paths.
func (p *peer) endSessionKeysOnly() {
	e := p.e
	e.idxMu.Lock()
	if p.cur != nil {
		e.dropIndex(p.cur.LocalIndex)
	}
	if p.prev != nil {
		e.dropIndex(p.prev.LocalIndex)
	}
	e.idxMu.Unlock()
	p.cur, p.prev = nil, nil
}
