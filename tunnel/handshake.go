package tunnel

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"time"

	"github.com/braid-vpn/braid/conn"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/noise"
	"github.com/braid-vpn/braid/wire"
)

// newIndex picks a free receiver session index. Its top ServerIDBits carry the
// server id, so a stateless load balancer can route every path of a session (whatever
// its source address) to this server.
func (e *Engine) newIndex() uint32 {
	for {
		var b [4]byte
		rand.Read(b[:])
		idx := binary.BigEndian.Uint32(b[:])
		if bits := e.cfg.ServerIDBits; e.role == Server && bits > 0 {
			shift := 32 - bits
			idx = e.cfg.ServerID<<shift | idx&(1<<shift-1)
		}
		if _, used := e.indices[idx]; !used && idx != 0 {
			return idx
		}
	}
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
	e.idxMu.Lock()
	if p.hsIndex != 0 {
		delete(e.indices, p.hsIndex)
	}
	idx := e.newIndex()
	e.indices[idx] = indexEntry{peer: p}
	e.idxMu.Unlock()
	msg, st, err := noise.CreateInitiation(e.cfg.PrivateKey, p.pub, p.psk, idx, payload, now)
	if err != nil {
		e.log.Error("creating handshake initiation", "err", err)
		return
	}
	st.ReplayWindow = e.tn.ReplayWindow
	p.hs, p.hsIndex, p.hsSent = st, idx, now
	if first || p.hsRetry == 0 {
		p.hsRetry = e.tn.HandshakeRetry
	} else {
		p.hsRetry = min(2*p.hsRetry, e.tn.HandshakeRetryMax)
	}
	for _, ps := range p.paths {
		if ps == nil {
			continue
		}
		if err := ps.cs.c.WriteBatch([][]byte{msg}, []conn.Endpoint{ps.ep}); err != nil {
			e.log.Debug("sending initiation", "path", ps.cs.local.String(), "server", ps.ep.Remote.String(), "err", err)
		}
	}
	e.log.Debug("handshake initiation sent", "paths", len(p.paths))
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
	// Weights travel by client path id, the ids the server sees in inner headers.
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
	e.idxMu.RLock()
	ent, found := e.indices[recv]
	e.idxMu.RUnlock()
	if !found || ent.kp != nil {
		e.counters.drop(dropHandshakeStale)
		return
	}
	p := ent.peer
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hs == nil || p.hsIndex != recv {
		e.counters.drop(dropHandshakeStale)
		return
	}
	kp, rp, err := p.hs.ConsumeResponse(d, now)
	if err != nil {
		e.counters.drop(dropHandshakeInvalid)
		return
	}
	if len(rp) > 0 && rp[0]&wire.RespFresh != 0 {
		p.resetFlows()
		// The server numbers its paths and their datagrams afresh as well (after a
		// restart it starts again from path 0, seq 1): receive state kept from the
		// old session would take those for ancient duplicates and never ack them.
		p.resetRx()
	}
	p.hs, p.hsIndex = nil, 0
	e.idxMu.Lock()
	e.indices[kp.LocalIndex] = indexEntry{peer: p, kp: kp}
	if p.prev != nil {
		delete(e.indices, p.prev.LocalIndex)
	}
	e.idxMu.Unlock()
	p.prev, p.cur = p.cur, kp
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

// handleInitiation answers a client's handshake (server). Nothing is stored for an
// initiation that does not authenticate.
func (e *Engine) handleInitiation(cs *connState, d []byte, ep conn.Endpoint, now time.Time, w *writer) {
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
	e.idxMu.Lock()
	idx := e.newIndex()
	e.indices[idx] = indexEntry{} // reserve while the DH runs
	e.idxMu.Unlock()
	acc, err := e.responder.ConsumeInitiation(d, ep.Remote.Addr(), lookup, idx, now)
	if err != nil {
		e.idxMu.Lock()
		delete(e.indices, idx)
		e.idxMu.Unlock()
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
		return
	}
	e.mu.RLock()
	p := e.byKey[acc.PeerPublic]
	e.mu.RUnlock()
	if p == nil { // removed by a reload meanwhile
		e.idxMu.Lock()
		delete(e.indices, idx)
		e.idxMu.Unlock()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if string(acc.Timestamp[:]) <= string(p.lastTS[:]) {
		// Lost a race with a concurrent copy of the same initiation on another path.
		e.idxMu.Lock()
		delete(e.indices, idx)
		e.idxMu.Unlock()
		e.counters.drop(dropHandshakeReplayed)
		return
	}
	p.lastTS = acc.Timestamp
	sp, err := wire.ParseParams(acc.Payload)
	if err == nil {
		if err := p.applyParams(paramsFromWire(sp)); err != nil {
			e.log.Warn("client asked for unusable session parameters; using defaults", "peer", p.name, "err", err)
			p.applyParams(Params{})
		}
	}
	if p.freshSession(sp.Rekey) {
		p.resetFlows()
		// A fresh session from a client that had one means the client restarted:
		// its old sockets are gone, so are the paths to them.
		p.dropPaths()
	}
	e.idxMu.Lock()
	if p.next != nil {
		delete(e.indices, p.next.LocalIndex)
	}
	e.indices[idx] = indexEntry{peer: p, kp: acc.Keypair}
	e.idxMu.Unlock()
	p.next = acc.Keypair
	p.lastHS = now
	if err := cs.c.WriteBatch([][]byte{acc.Response}, []conn.Endpoint{ep}); err != nil {
		e.counters.drop(dropSendError)
	}
	e.log.Debug("handshake answered", "peer", p.name, "from", ep.Remote.String())
}

// freshSession decides whether a server starts a client's session afresh: the client
// asked for it (it had no session), or there is nothing to continue (we restarted).
// Caller holds p.mu. The response payload carries the same decision to the client.
func (p *peer) freshSession(rekey bool) bool {
	return !rekey || (p.cur == nil && p.next == nil)
}

// responsePayload is the server's half of that decision, called by the responder
// once an initiation has authenticated.
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
	if fresh {
		return []byte{wire.RespFresh}
	}
	return []byte{0}
}

func paramsFromWire(sp wire.SessionParams) Params {
	p := Params{
		Scheduler:   sp.Scheduler,
		Reorder:     sp.Reorder,
		ReorderHold: time.Duration(sp.ReorderHold) * time.Microsecond,
		Congestion:  sp.Congestion,
		Recovery:    sp.Recovery,
	}
	for _, w := range sp.Weights {
		p.Weights = append(p.Weights, float64(w))
	}
	return p
}

// confirmNext switches a server to the keys of a completed handshake once the client
// has used them (so the client certainly has them too).
func (p *peer) confirmNext(now time.Time) {
	e := p.e
	e.idxMu.Lock()
	if p.prev != nil {
		delete(e.indices, p.prev.LocalIndex)
	}
	e.idxMu.Unlock()
	p.prev, p.cur, p.next = p.cur, p.next, nil
	if !p.everEstab {
		e.log.Info("client session established", "peer", p.name)
	}
	p.everEstab = true
	p.estab = now
}

// endSession forgets every key and path of the session (peer closed or keys expired).
func (p *peer) endSession(now time.Time) {
	e := p.e
	e.idxMu.Lock()
	for _, kp := range [](*noise.Keypair){p.cur, p.prev, p.next} {
		if kp != nil {
			delete(e.indices, kp.LocalIndex)
		}
	}
	e.idxMu.Unlock()
	p.cur, p.prev, p.next = nil, nil, nil
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
