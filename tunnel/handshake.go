package tunnel

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"log/slog"
	"time"

	"github.com/braid-vpn/braid/conn"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/noise"
	"github.com/braid-vpn/braid/wire"
)

// newIndex picks a free receiver session index with top in its top bits
// (none with bits 0) and the rest random; it gives up (false) after a
// bounded number of tries, when the index space is nearly full. A server
// puts its server id there, so a stateless load balancer can route every
// path of a session (whatever its source address) to it; a client rekeying
// puts its server's (stickyBits). Caller holds e.idxMu.
func (e *Engine) newIndex(top uint32, bits int) (uint32, bool) {
	for range 64 {
		var b [4]byte
		rand.Read(b[:])
		idx := binary.BigEndian.Uint32(b[:])
		if bits > 0 {
			shift := 32 - bits
			idx = top<<shift | idx&(1<<shift-1)
		}
		if _, used := e.indices[idx]; !used && idx != 0 {
			return idx, true
		}
	}
	return 0, false
}

// stickyBits is how many top bits of its current server's receiver index a
// client copies into the sender index of a rekey's initiation: as many as a
// server id can take, so that a balancer steering initiations by those bits
// sends the rekey to the server that holds the session, whatever
// server_id_bits the servers use (docs/protocol.md, docs/scale.md).
const stickyBits = wire.MaxServerIDBits

// otherServer reports whether receiver index idx names a server other than
// this one. Behind a balancer that steers by those bits it cannot happen,
// unless the balancer's server list disagrees with the servers' own
// server_id: counting the drop (and skipping the index lookup) makes that
// misconfiguration visible.
func (e *Engine) otherServer(idx uint32) bool {
	bits := e.cfg.ServerIDBits
	return e.role == Server && bits > 0 && idx>>(32-bits) != e.cfg.ServerID
}

// reserveIndex reserves a free session index for a handshake in progress,
// with top in its top bits (bits 0: all random).
func (e *Engine) reserveIndex(ent indexEntry, top uint32, bits int) (uint32, bool) {
	e.idxMu.Lock()
	defer e.idxMu.Unlock()
	idx, ok := e.newIndex(top, bits)
	if ok {
		e.setIndex(idx, ent)
	}
	return idx, ok
}

// setIndex maps idx to ent and dropIndex unmaps it; both count the change in
// idxGen. Caller holds e.idxMu.
func (e *Engine) setIndex(idx uint32, ent indexEntry) {
	e.indices[idx] = ent
	e.idxGen.Add(1)
}

func (e *Engine) dropIndex(idx uint32) {
	delete(e.indices, idx)
	e.idxGen.Add(1)
}

// releaseIndex frees a session index.
func (e *Engine) releaseIndex(idx uint32) {
	e.idxMu.Lock()
	e.dropIndex(idx)
	e.idxMu.Unlock()
}

// initiateLocked starts a handshake (client). It sends the initiation on every path,
// so the fastest live path wins; the server ignores the extra copies because they
// carry the same timestamp. Caller holds p.mu.
func (p *peer) initiateLocked(now time.Time, first bool) {
	e := p.e
	sp := p.wireParams()
	sp.Rekey = p.cur != nil
	payload, err := wire.AppendParams(nil, sp)
	if err != nil {
		e.log.Error("handshake parameters", "err", err)
		return
	}
	if p.hsIndex != 0 {
		e.releaseIndex(p.hsIndex)
		p.hs, p.hsIndex = nil, 0
	}
	// A rekey of a live session goes back to the session's server behind a
	// balancer; a fresh handshake (no session, or one silent for
	// SessionDeadAfter: its server may be dead) is spread at random.
	var top uint32
	bits := 0
	if p.cur != nil && now.Sub(p.lastRx) < e.tn.SessionDeadAfter {
		top, bits = p.cur.RemoteIndex>>(32-stickyBits), stickyBits
	}
	idx, ok := e.reserveIndex(indexEntry{peer: p}, top, bits)
	if !ok {
		e.log.Error("handshake: no free session index")
		return
	}
	msg, st, err := noise.CreateInitiation(e.cfg.PrivateKey, p.pub, p.psk, idx, payload, now)
	if err != nil {
		e.releaseIndex(idx)
		e.log.Error("creating handshake initiation", "err", err)
		return
	}
	st.ReplayWindow = e.tn.ReplayWindow
	p.hs, p.hsIndex, p.hsSent, p.hsMsg = st, idx, now, msg
	if first || p.hsRetry == 0 {
		p.hsRetry = e.tn.HandshakeRetry
	} else {
		p.hsRetry = min(2*p.hsRetry, e.tn.HandshakeRetryMax)
	}
	for _, ps := range p.paths {
		if ps != nil {
			p.sendInitiation(ps, now)
		}
	}
	e.log.Debug("handshake initiation sent", "paths", len(p.paths))
}

// sendInitiation sends the pending initiation on one path, with the mac2 of the
// cookie the server gave that path's source, if it has a fresh one. Caller holds
// p.mu.
func (p *peer) sendInitiation(ps *pathState, now time.Time) {
	msg := p.hsMsg
	if ps.cookie != (noise.Cookie{}) && now.Sub(ps.cookieAt) < noise.CookieUseFor {
		msg = bytes.Clone(msg)
		noise.SetMAC2(msg, ps.cookie)
	}
	if err := ps.cs.c.WriteBatch([][]byte{msg}, []conn.Endpoint{ps.ep}); err != nil {
		p.e.log.Debug("sending initiation", "path", ps.cs.local.String(), "server", ps.ep.Remote.String(), "err", err)
	}
}

// pendingPeer returns the peer whose pending initiation has session index idx
// (client), or nil, counted as stale.
func (e *Engine) pendingPeer(idx uint32) *peer {
	e.idxMu.RLock()
	ent, found := e.indices[idx]
	e.idxMu.RUnlock()
	if !found || ent.kp != nil {
		e.counters.drop(dropHandshakeStale)
		return nil
	}
	return ent.peer
}

// handleCookieReply takes a cookie from a server (client) that is under load or
// refused an initiation without one, and sends the pending initiation again from
// that path, now with a mac2 the server accepts.
func (e *Engine) handleCookieReply(cs *connState, d []byte, ep conn.Endpoint, now time.Time) {
	idx, ok := noise.PeekCookieReceiver(d)
	if !ok {
		e.counters.drop(dropMalformed)
		return
	}
	p := e.pendingPeer(idx)
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.byKey[p.keyFor(cs, ep)]
	if p.hs == nil || p.hsIndex != idx || ps == nil {
		e.counters.drop(dropHandshakeStale)
		return
	}
	c, err := noise.ConsumeCookieReply(d, p.pub, p.hs.MAC1())
	if err != nil {
		e.counters.drop(dropHandshakeInvalid)
		return
	}
	// A replayed reply carries the cookie we have: no resend, so replies cannot
	// make us send more initiations than the server asked for.
	if c == ps.cookie && now.Sub(ps.cookieAt) < noise.CookieUseFor {
		return
	}
	ps.cookie, ps.cookieAt = c, now
	// At most one resend per initiation and path: anyone who saw the
	// initiation's mac1 (on path) can seal replies with new cookies, and each
	// would otherwise make us send again. Later cookies still go with the next
	// retry.
	if ps.cookieResent == idx {
		return
	}
	ps.cookieResent = idx
	e.log.Debug("cookie received", "path", ps.cs.local.String(), "server", ep.Remote.String())
	p.sendInitiation(ps, now)
}

// wireParams converts the client's Params to their handshake form.
func (p *peer) wireParams() wire.SessionParams {
	sp := wire.SessionParams{
		Scheduler:   p.params.Scheduler,
		Reorder:     p.params.Reorder,
		ReorderHold: uint32(p.params.ReorderHold / time.Microsecond),
		Congestion:  p.params.Congestion,
		Recovery:    p.params.Recovery,
	}
	// Tiers and weights travel by client path id, the ids the server sees in
	// inner headers; tiers only when some path is not in the first.
	for _, ps := range p.paths {
		if ps != nil && ps.tier > 0 {
			sp.Tiers = make([]uint8, min(len(p.paths), wire.MaxWeights))
			for _, q := range p.paths {
				if q != nil && int(q.id) < len(sp.Tiers) {
					sp.Tiers[q.id] = q.tier
				}
			}
			break
		}
	}
	var sum float64
	for _, w := range p.weights {
		sum += w
	}
	for i, w := range p.weights {
		if i == wire.MaxWeights || sum <= 0 {
			break
		}
		sp.Weights = append(sp.Weights, uint16(w/sum*1000+0.5))
	}
	return sp
}

// handleResponse completes a client handshake.
func (e *Engine) handleResponse(cs *connState, d []byte, ep conn.Endpoint, now time.Time, w *writer) {
	_, recv, ok := noise.PeekResponseIndices(d)
	if !ok {
		e.counters.drop(dropMalformed)
		return
	}
	p := e.pendingPeer(recv)
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	defer w.seal() // before the lock goes: see writer.batch
	if p.hs == nil || p.hsIndex != recv {
		e.counters.drop(dropHandshakeStale)
		return
	}
	kp, rp, err := p.hs.ConsumeResponse(d, now)
	if err != nil {
		e.counters.drop(dropHandshakeInvalid)
		return
	}
	fresh := len(rp) > 0 && rp[0]&wire.RespFresh != 0
	if len(rp) >= wire.RespPayloadLen {
		// A new boot epoch means the server restarted, whatever the flag says.
		epoch := binary.BigEndian.Uint64(rp[1:])
		fresh = fresh || (p.srvEpoch != 0 && epoch != p.srvEpoch)
		p.srvEpoch = epoch
	}
	if fresh {
		p.resetFlows()
		// The server numbers its paths and their datagrams afresh as well (after a
		// restart it starts again from path 0, seq 1): receive state kept from the
		// old session would take those for ancient duplicates and never ack them.
		p.resetRx()
	}
	p.hs, p.hsIndex, p.hsMsg = nil, 0, nil
	e.idxMu.Lock()
	e.setIndex(kp.LocalIndex, indexEntry{peer: p, kp: kp})
	if p.prev != nil {
		e.dropIndex(p.prev.LocalIndex)
	}
	p.prev = p.cur
	if fresh && p.prev != nil {
		// Not a rekey: the new session numbers its flows from 0 again, so a
		// datagram of the old one (late, or withheld and replayed) would take
		// the place of a new packet. The old keys go at once.
		e.dropIndex(p.prev.LocalIndex)
		p.prev = nil
	}
	e.idxMu.Unlock()
	p.cur = kp
	p.lastHS, p.lastRx = now, now
	if !p.everEstab {
		e.log.Info("session established", "server", ep.Remote.String())
	} else {
		e.log.Debug("rekeyed", "server", ep.Remote.String())
	}
	p.everEstab = true
	p.estab = now
	// The first packets under the new keys confirm them to the server and open
	// every path (the server challenges each new source endpoint).
	for _, ps := range p.paths {
		if ps != nil {
			p.sendControl(w, ps, now, framePing, [wire.ChallengeLen]byte{})
		}
	}
}

// handleInitiation answers a client's handshake (server, on the handshake worker)
// and returns the peer and the response, or nil when the initiation is refused.
// Nothing is stored for an initiation that does not authenticate, and nothing of
// the session changes until the client confirms the new keys (confirmNext): an
// initiation replayed after a restart, or a response that is lost, cannot reset a
// session.
func (e *Engine) handleInitiation(cs *connState, d []byte, ep conn.Endpoint, proof noise.Proof, now time.Time) (*peer, []byte, error) {
	lookup := func(pub keys.Key) (psk keys.Key, ts [wire.TimestampLen]byte, ok bool) {
		e.mu.RLock()
		p := e.byKey[pub]
		e.mu.RUnlock()
		if p == nil {
			return psk, ts, false
		}
		p.mu.Lock()
		ts = p.lastTS
		p.mu.Unlock()
		return p.psk, ts, true
	}
	var idx uint32
	newIdx := func() (uint32, bool) {
		var ok bool
		// Reserved while the response is made.
		idx, ok = e.reserveIndex(indexEntry{}, e.cfg.ServerID, e.cfg.ServerIDBits)
		return idx, ok
	}
	acc, err := e.responder.ConsumeInitiationFrom(d, ep.Remote, proof, lookup, newIdx, now)
	if err != nil {
		if idx != 0 {
			e.releaseIndex(idx)
		}
		switch {
		case errors.Is(err, noise.ErrRateLimited):
			e.counters.drop(dropHandshakeRateLimited)
		case errors.Is(err, noise.ErrUnknownPeer):
			e.counters.drop(dropHandshakeUnknownPeer)
		case errors.Is(err, noise.ErrReplayedInitiation):
			e.counters.drop(dropHandshakeReplayed)
		default:
			e.counters.drop(dropHandshakeInvalid)
		}
		return nil, nil, err
	}
	e.mu.RLock()
	p := e.byKey[acc.PeerPublic]
	e.mu.RUnlock()
	if p == nil { // removed by a reload meanwhile
		e.releaseIndex(idx)
		return nil, nil, noise.ErrUnknownPeer
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if string(acc.Timestamp[:]) <= string(p.lastTS[:]) || p.holdsPending(acc.Timestamp, now) {
		// A replay, or lost a race with a concurrent copy of the same initiation.
		e.releaseIndex(idx)
		e.counters.drop(dropHandshakeReplayed)
		return nil, nil, noise.ErrReplayedInitiation
	}
	if !p.lastInit.IsZero() && now.Sub(p.lastInit) < e.tn.HandshakeMinInterval {
		e.releaseIndex(idx)
		e.counters.drop(dropHandshakeTooSoon)
		return nil, nil, errTooSoon
	}
	// lastTS moves only when the client confirms these keys (confirmNext): an
	// answer proves nothing about who sent the initiation. Someone with the
	// client's static key but not its PSK, or a client whose clock once ran
	// ahead, gets an answer to a future-dated initiation that nobody can
	// confirm; had it moved lastTS, the client would be refused until the
	// server restarted.
	p.lastInit = now
	sp, perr := wire.ParseParams(acc.Payload)
	p.pending = pendingSession{fresh: p.freshSession(sp.Rekey), params: perr == nil, ts: acc.Timestamp, at: now}
	if perr == nil {
		p.pending.want = paramsFromWire(sp)
	}
	e.idxMu.Lock()
	if p.next != nil {
		e.dropIndex(p.next.LocalIndex)
	}
	e.setIndex(idx, indexEntry{peer: p, kp: acc.Keypair})
	e.idxMu.Unlock()
	p.next = acc.Keypair
	e.sendHandshake(cs, acc.Response, ep)
	e.log.Debug("handshake answered", "peer", p.name, "from", ep.Remote.String())
	return p, acc.Response, nil
}

var errTooSoon = errors.New("tunnel: a second initiation from one client within HandshakeMinInterval")

// pendingSession is what an answered handshake changes once the client confirms
// it: the session parameters it asked for, and whether it starts afresh.
type pendingSession struct {
	fresh  bool
	params bool // want is set
	want   Params
	// ts is the timestamp of the initiation p.next answers, at when it was
	// answered; confirming p.next makes ts the client's lastTS.
	ts [wire.TimestampLen]byte
	at time.Time
}

// pendingHold is how long an answered initiation is protected from one with an
// older timestamp (which only a replay has, or a client whose clock stepped
// back). A genuine handshake confirms within a round trip, and a client whose
// response was lost sends a newer initiation after HandshakeRetry (1 s); the
// hold keeps a replay of the client's previous initiation from taking the
// place of the handshake in progress, and a future-dated initiation that
// nobody confirms holds the client off for no longer than this.
const pendingHold = 2 * time.Second

// holdsPending reports whether an initiation dated ts (newer than lastTS) must
// yield to the unconfirmed handshake p.next: it is not newer than that one's,
// and that one was answered less than pendingHold ago. Caller holds p.mu.
func (p *peer) holdsPending(ts [wire.TimestampLen]byte, now time.Time) bool {
	return p.next != nil && string(ts[:]) <= string(p.pending.ts[:]) && now.Sub(p.pending.at) < pendingHold
}

// freshSession decides whether a server starts a client's session afresh: the client
// asked for it (it had no session), or there is nothing to continue (we restarted, or
// the session ended). An answered but unconfirmed handshake is not a session: were
// it counted, a lost fresh response would make the retry's answer "not fresh" and the
// client would keep numbers the server has dropped. Caller holds p.mu. The response
// payload carries the same decision to the client.
func (p *peer) freshSession(rekey bool) bool {
	return !rekey || p.cur == nil
}

// responsePayload is the server's half of that decision, called by the responder
// once an initiation has authenticated: the flags and the server's boot epoch.
func (e *Engine) responsePayload(pub keys.Key, initPayload []byte) []byte {
	e.mu.RLock()
	p := e.byKey[pub]
	e.mu.RUnlock()
	if p == nil {
		return nil
	}
	sp, _ := wire.ParseParams(initPayload)
	p.mu.Lock()
	fresh := p.freshSession(sp.Rekey)
	p.mu.Unlock()
	b := make([]byte, wire.RespPayloadLen)
	if fresh {
		b[0] = wire.RespFresh
	}
	binary.BigEndian.PutUint64(b[1:], e.bootEpoch)
	return b
}

func paramsFromWire(sp wire.SessionParams) Params {
	p := Params{
		Scheduler:   sp.Scheduler,
		Reorder:     sp.Reorder,
		ReorderHold: time.Duration(sp.ReorderHold) * time.Microsecond,
		Congestion:  sp.Congestion,
		Recovery:    sp.Recovery,
	}
	p.Tiers = sp.Tiers
	for _, w := range sp.Weights {
		p.Weights = append(p.Weights, float64(w))
	}
	return p
}

// confirmNext switches a server to the keys of a completed handshake once the client
// has used them (so the client certainly has them too).
func (p *peer) confirmNext(now time.Time) {
	e := p.e
	pend := p.pending
	e.idxMu.Lock()
	if p.prev != nil {
		e.dropIndex(p.prev.LocalIndex)
	}
	p.prev, p.cur, p.next = p.cur, p.next, nil
	if pend.fresh && p.prev != nil {
		// A fresh session (the client restarted, or had none) is no rekey: the
		// old keys are not kept for receiving, or an old datagram would enter
		// the new flow numbering (it starts at 0 again, resetFlows below).
		e.dropIndex(p.prev.LocalIndex)
		p.prev = nil
	}
	e.idxMu.Unlock()
	p.pending = pendingSession{}
	// The client used these keys, so the initiation was its own: from now on
	// no initiation dated before it is accepted (replay protection).
	if string(pend.ts[:]) > string(p.lastTS[:]) {
		p.lastTS = pend.ts
	}
	// The last handshake is the last one the client completed: an answered
	// initiation may be a replay, and a balancer routes the client's prefixes
	// to the server with the newest one (docs/scale.md).
	p.lastHS = pend.at
	if pend.params {
		if err := p.applyParams(pend.want); err != nil {
			p.logClient(now, slog.LevelWarn, "client asked for unusable session parameters; using defaults", "err", err)
			p.applyParams(Params{})
		}
	}
	if pend.fresh {
		p.resetFlows()
		// A fresh session from a client that had one means the client restarted:
		// its old sockets are gone, so are the paths to them.
		p.dropPaths()
	}
	if !p.everEstab {
		e.log.Info("client session established", "peer", p.name)
	}
	p.everEstab = true
	p.estab = now
}

// endSession forgets every key and path of the session (peer closed or keys
// expired). keepNext spares an answered handshake the client has not confirmed
// yet (server): a close ends the session it was sent in, not a newer one.
func (p *peer) endSession(now time.Time, keepNext bool) {
	e := p.e
	if !keepNext && p.next != nil {
		e.releaseIndex(p.next.LocalIndex)
		p.next = nil
	}
	e.idxMu.Lock()
	for _, kp := range [](*noise.Keypair){p.cur, p.prev} {
		if kp != nil {
			e.dropIndex(kp.LocalIndex)
		}
	}
	e.idxMu.Unlock()
	p.cur, p.prev = nil, nil
	if !p.isSrv {
		// A server relearns a client's paths when it comes back.
		p.dropPaths()
	} else {
		p.hsRetry = 0
		p.initiateLocked(now, true)
	}
}

// dropPaths forgets every path and receive state of a client (server side).
func (p *peer) dropPaths() {
	for _, ps := range p.paths {
		if ps != nil {
			p.removePath(ps)
		}
	}
	p.resetRx()
}

// resetRx forgets the receive state of every peer path id.
func (p *peer) resetRx() {
	clear(p.rx[:])
	clear(p.rxList)
	p.rxList = p.rxList[:0]
}

// sendCloseAll tells every peer that the session ends, so it does not wait for
// liveness timers.
func (e *Engine) sendCloseAll() {
	w := &writer{e: e}
	now := time.Now()
	e.mu.RLock()
	peers := append([]*peer(nil), e.peers...)
	e.mu.RUnlock()
	for _, p := range peers {
		p.mu.Lock()
		for _, ps := range p.paths {
			if ps != nil && ps.validated {
				p.sendControl(w, ps, now, frameClose, [wire.ChallengeLen]byte{})
			}
		}
		p.mu.Unlock()
	}
	w.flush()
}
