package tunnel

import (
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/braid-vpn/braid/conn"
	"github.com/braid-vpn/braid/path"
	"github.com/braid-vpn/braid/wire"
)

// openConns opens the path sockets: on a client one per local path, subflow and
// address family in use; on a server one per listen address.
func (e *Engine) openConns() error {
	if e.role == Server {
		readers := max(e.tn.ListenReaders, 1)
		add := func(c conn.Conn, lead *connState) *connState {
			cs := &connState{c: c, idx: len(e.conns), lead: lead}
			cs.auth, _ = c.(conn.Authenticator)
			e.conns = append(e.conns, cs)
			return cs
		}
		for _, a := range e.cfg.ListenAddrs {
			if readers > 1 && a.Port() != 0 {
				// A group would let a second daemon on the same port join it
				// (same user) and take a share of the clients; a plain bind
				// first fails as it always did when the port is taken.
				probe, err := e.cfg.Listen(conn.Options{Addr: a, NoOffload: true})
				if err != nil {
					return err
				}
				probe.Close()
			}
			c, err := e.cfg.Listen(conn.Options{Addr: a, NoOffload: e.cfg.NoOffload, ReusePort: readers > 1})
			if err != nil {
				return err
			}
			lead := add(c, nil)
			// The others join its port (a may ask for an ephemeral one).
			same := netip.AddrPortFrom(a.Addr(), c.LocalAddr().Port())
			for range readers - 1 {
				c, err := e.cfg.Listen(conn.Options{Addr: same, NoOffload: e.cfg.NoOffload, ReusePort: true})
				if err != nil {
					e.log.Warn("one socket reads the listen address", "addr", a.String(), "err", err)
					break
				}
				add(c, lead)
			}
		}
		return nil
	}
	_, err := e.syncClientPaths(e.cfg.LocalPaths, e.cfg.Subflows, e.cfg.Servers, time.Now())
	return err
}

// socketSpec identifies a client socket: local path, subflow, address family.
type socketSpec struct {
	local LocalPath
	sub   int
	v6    bool
}

// clientSockets lists the sockets a client needs for its local paths.
func clientSockets(locals []LocalPath, subflows int, servers []netip.AddrPort) []socketSpec {
	var need4, need6 bool
	for _, s := range servers {
		if s.Addr().Unmap().Is4() {
			need4 = true
		} else {
			need6 = true
		}
	}
	var specs []socketSpec
	for _, l := range locals {
		for sub := 0; sub < subflows; sub++ {
			if l.Addr.IsValid() {
				specs = append(specs, socketSpec{l, sub, !l.Addr.Unmap().Is4()})
				continue
			}
			if need4 {
				specs = append(specs, socketSpec{l, sub, false})
			}
			if need6 {
				specs = append(specs, socketSpec{l, sub, true})
			}
		}
	}
	return specs
}

// syncClientPaths makes the client's sockets and paths match a configuration, at
// start and on reload: sockets and paths still wanted are kept (with their
// measurements), the others closed, the missing ones opened. The paths are the full
// mesh local path × server address × subflow; each remembers its position in that
// order, which is how weights are written in the config. It returns the sockets it
// opened (their readers must be started). Caller holds e.mu and the server peer's
// mu, or owns e.
func (e *Engine) syncClientPaths(locals []LocalPath, subflows int, servers []netip.AddrPort, now time.Time) ([]*connState, error) {
	p := e.server
	clear(e.waiting)
	configured := len(locals)
	locals = e.expandLocals(locals)
	if len(locals) == 0 && configured == 0 {
		locals = []LocalPath{{}}
	}
	if subflows <= 0 {
		subflows = 1
	}
	want := clientSockets(locals, subflows, servers)
	socks := make(map[socketSpec]*connState)
	for _, cs := range e.conns {
		if cs.closed {
			continue
		}
		if slices.Contains(want, cs.spec) && socks[cs.spec] == nil {
			socks[cs.spec] = cs
			continue
		}
		for _, ps := range p.paths {
			if ps != nil && ps.cs == cs {
				p.removePath(ps)
			}
		}
		cs.closed = true
		cs.c.Close()
	}
	var opened []*connState
	var firstErr error
	for _, spec := range want {
		if socks[spec] != nil {
			continue
		}
		opt := conn.Options{Device: spec.local.Device, Network: "udp4", Addr: netip.AddrPortFrom(netip.IPv4Unspecified(), 0), NoOffload: e.cfg.NoOffload}
		if spec.v6 {
			opt.Network, opt.Addr = "udp6", netip.AddrPortFrom(netip.IPv6Unspecified(), 0)
		}
		if spec.local.Addr.IsValid() {
			opt.Addr = netip.AddrPortFrom(spec.local.Addr, 0)
		}
		c, err := e.cfg.Listen(opt)
		if err != nil {
			if waitingError(err) {
				// Not there yet: the path waits for its interface (links.go).
				e.setWaiting(spec.local.String(), err.Error())
				continue
			}
			if firstErr == nil {
				firstErr = fmt.Errorf("path %s: %w", spec.local, err)
			}
			continue
		}
		cs := &connState{c: c, idx: len(e.conns), local: spec.local, sub: spec.sub, spec: spec}
		cs.auth, _ = c.(conn.Authenticator)
		e.conns = append(e.conns, cs)
		socks[spec] = cs
		opened = append(opened, cs)
	}
	wanted := make(map[pathKey]bool)
	for li, l := range locals {
		for si, srv := range servers {
			v6 := !srv.Addr().Unmap().Is4()
			for sub := 0; sub < subflows; sub++ {
				cs := socks[socketSpec{l, sub, v6}]
				if cs == nil {
					continue // a local address of the other family, or a failed socket
				}
				ep := conn.Endpoint{Remote: srv}
				key := p.keyFor(cs, ep)
				ps := p.byKey[key]
				if ps == nil {
					var err error
					if ps, err = p.addPath(cs, ep, true, now); err != nil {
						return opened, err
					}
				}
				ps.weightIdx = (li*len(servers)+si)*subflows + sub
				ps.baseTier = uint8(l.Priority)
				if ps.meter = p.meterFor(l); ps.meter == nil || !ps.meter.Exceeded(now) {
					ps.tier = ps.baseTier
				} else {
					ps.tier = overBudgetTier
				}
				wanted[key] = true
			}
		}
	}
	for _, ps := range p.paths {
		if ps != nil && !wanted[ps.key] {
			p.removePath(ps)
		}
	}
	p.resolveWeights()
	return opened, firstErr
}

// addPath registers a path; the caller holds p.mu or owns p exclusively.
func (p *peer) addPath(cs *connState, ep conn.Endpoint, validated bool, now time.Time) (*pathState, error) {
	id := -1
	for i, ps := range p.paths {
		if ps == nil {
			id = i
			break
		}
	}
	if id < 0 {
		if len(p.paths) >= maxPaths {
			return nil, fmt.Errorf("tunnel: more than %d paths", maxPaths)
		}
		id = len(p.paths)
		p.paths = append(p.paths, nil)
	}
	ps := &pathState{sbdID: -1,
		id:        uint16(id),
		cs:        cs,
		ep:        ep,
		key:       p.keyFor(cs, ep),
		sender:    path.NewSender(p.e.tn.Path, now),
		validated: validated,
		peerID:    -1,
		created:   now,
		link:      p.linkOf(cs, ep),
	}
	p.paths[id] = ps
	p.byKey[ps.key] = ps
	p.attachCC(ps, now)
	p.attachRecovery(ps)
	p.attachMTU(ps, now)
	return ps, nil
}

// linkOf numbers the access links paths cross, so the scheduler knows which paths of
// a full mesh share a bottleneck: on a client, the paths of one local path (interface
// or address, all its subflows); on a server, the paths from one client address.
func (p *peer) linkOf(cs *connState, ep conn.Endpoint) int {
	key := cs.local.String()
	if !p.isSrv {
		key = ep.Remote.Addr().Unmap().String()
	}
	id, ok := p.links[key]
	if !ok {
		id = len(p.links) + 1
		if id >= maxPaths {
			return 0
		}
		p.links[key] = id
	}
	return id
}

func (p *peer) keyFor(cs *connState, ep conn.Endpoint) pathKey {
	k := pathKey{conn: cs.pathSock().idx, remote: ep.Remote}
	if !p.isSrv {
		k.local = ep.Local
	}
	return k
}

// live reports whether ps is still one of p's paths (a path may be removed or
// replaced while a receive batch is being handled).
func (p *peer) live(ps *pathState) bool {
	return int(ps.id) < len(p.paths) && p.paths[ps.id] == ps
}

func (p *peer) removePath(ps *pathState) {
	delete(p.byKey, ps.key)
	if ps.validated && !p.isSrv {
		p.e.validated.remove(ps.ep.Remote)
	}
	p.dropRetainedPath(ps)
	if p.cc != nil && ps.cc != nil {
		p.cc.RemovePath(ps.cc)
		ps.cc = nil
	}
	p.sbdDetach(ps)
	if int(ps.id) < len(p.paths) && p.paths[ps.id] == ps {
		p.paths[ps.id] = nil
	}
	if p.leads[ps.link] == ps {
		p.leads[ps.link] = nil
	}
	for _, r := range p.rxList {
		if r.arrival == ps {
			r.arrival = nil
		}
	}
}

// learnPath returns the path an authenticated datagram of the client's path pid
// arrived on. A server meeting a new source endpoint creates the path unvalidated
// and challenges it: nothing but the challenge is sent there until the client
// echoes it from that endpoint, so a spoofed or replayed source cannot divert
// traffic. If the client path is served from another endpoint, that endpoint is
// challenged at the same time (probeBack): see migrate.
func (p *peer) learnPath(cs *connState, ep conn.Endpoint, pid uint16, n int, now time.Time, w *writer) *pathState {
	key := p.keyFor(cs, ep)
	if ps := p.byKey[key]; ps != nil {
		if !ps.validated || ps.amp {
			ps.unvRx += n
		}
		return ps
	}
	if p.isSrv {
		return nil // a client talks only to the addresses it was configured with
	}
	// The endpoint a path has just left, while its answer may still bring the
	// path back: its datagrams arrive on that path, not on a new one.
	for _, o := range p.paths {
		if o != nil && o.back.live() && o.back.key == key && o.key != key {
			return o
		}
	}
	if p.countPaths() >= p.e.tn.MaxPathsPerPeer && !p.evictPath(now) {
		return nil
	}
	ps, err := p.addPath(cs, ep, false, now)
	if err != nil {
		return nil
	}
	ps.unvRx = n
	ps.peerID = int(pid)
	p.sendChallenge(ps, now, w)
	if o := p.sibling(ps); o != nil {
		p.probeBack(o, now, w)
	}
	return ps
}

// backProbe is a challenge of the endpoint a path serves (or served) when a new
// source of the same client path appears.
type backProbe struct {
	ep       conn.Endpoint
	key      pathKey
	chal     [wire.ChallengeLen]byte
	first    time.Time // zero: no probe
	sent     time.Time
	tries    int
	answered time.Time // zero: not (yet)
}

func (b *backProbe) live() bool { return !b.first.IsZero() }

// migrationHold is how long an answer of a path's endpoint to its back probe
// counts: a new source of the same client path that appears meanwhile loses to
// it at once, without a new probe. It is also how long a source that lost is
// remembered, so an on-path relay makes the server challenge two endpoints once
// per hold, not once per datagram. The time a source is challenged in all.
func (p *peer) migrationHold() time.Duration {
	tn := &p.e.tn
	return tn.ChallengeRetry * time.Duration(max(tn.ChallengeTries, 1))
}

// sibling returns the validated path that serves ps's client path (the peer's
// path id, over the same socket and server address) from another endpoint, or
// nil.
func (p *peer) sibling(ps *pathState) *pathState {
	if p.isSrv || ps.peerID < 0 {
		return nil
	}
	for _, o := range p.paths {
		if o != nil && o != ps && o.validated && o.peerID == ps.peerID && o.cs.pathSock() == ps.cs.pathSock() && o.key.local == ps.key.local {
			return o
		}
	}
	return nil
}

// probeBack challenges the endpoint o serves now, unless a probe of it is under
// way or answered within migrationHold.
func (p *peer) probeBack(o *pathState, now time.Time, w *writer) {
	b := &o.back
	if b.live() && b.key == o.key && now.Sub(b.first) < p.migrationHold() {
		return
	}
	*b = backProbe{ep: o.ep, key: o.key, first: now}
	if _, err := rand.Read(b.chal[:]); err != nil {
		*b = backProbe{}
		return
	}
	p.sendBackProbe(o, now, w)
}

// sendBackProbe sends o's back challenge to the endpoint it probes (which is no
// longer o's own once o has moved). It is not ack-eliciting: its loss must not
// count against the path, which may be elsewhere now.
func (p *peer) sendBackProbe(o *pathState, now time.Time, w *writer) {
	if p.cur == nil {
		return
	}
	b := &o.back
	b.sent = now
	b.tries++
	pb := p.e.pool.get()
	f := wire.AppendChallenge(pb.b[innerStart:innerStart], b.chal, false)
	p.sealAndQueueTo(w, o, b.ep, pb, len(f), false, now)
}

// answerBack takes a RESPONSE that echoes some path's back challenge, wherever it
// arrived from: the challenge went only to that path's old endpoint, so the client
// receives there. The endpoint keeps its path — a source waiting to take it over
// loses — or gets it back if it moved. It reports whether chal was one.
func (p *peer) answerBack(chal [wire.ChallengeLen]byte, now time.Time, w *writer) bool {
	for _, o := range p.paths {
		if o == nil || !o.back.live() || !o.back.answered.IsZero() || o.back.chal != chal {
			continue
		}
		o.back.answered = now
		if o.key != o.back.key {
			p.moveBack(o, now, w)
		}
		for _, c := range p.paths {
			if c != nil && !c.validated && c.lostAt.IsZero() && p.sibling(c) == o {
				p.loseMove(c, now)
			}
		}
		return true
	}
	return false
}

// validatedBy handles the client's echo of ps's own challenge. A source of a
// client path that another endpoint serves takes the path over (migrate) only
// if that endpoint did not answer its back challenge: at once when only the port
// changed (a NAT rebinding) or the old endpoint is Down, otherwise once the old
// endpoint has had a round trip to answer (tick). It returns the path that now
// serves ps's endpoint.
func (p *peer) validatedBy(ps *pathState, now time.Time, w *writer) *pathState {
	o := p.sibling(ps)
	switch {
	case o == nil:
		p.validate(ps, now)
		return ps
	case o.back.live() && o.back.key == o.key && !o.back.answered.IsZero():
		p.loseMove(ps, now)
		return ps
	case sameAddr(o.ep, ps.ep) || o.sender.State() == path.Down:
		return p.migrate(ps, o, now, w)
	}
	// The old endpoint's probe may have ended (a source that answered late):
	// it gets a new one, and its round trip to answer.
	p.probeBack(o, now, w)
	ps.ready = true
	return ps
}

// decideMove is tick's step for a path that answered its challenge and waits for
// the old endpoint: it takes the path over once the old endpoint has had the
// longer of ChallengeRetry and two probe timeouts to answer, or has gone Down.
func (p *peer) decideMove(ps *pathState, now time.Time, w *writer) {
	o := p.sibling(ps)
	switch {
	case o == nil:
		ps.ready = false
		p.validate(ps, now)
	case !o.back.live():
		p.probeBack(o, now, w)
	case !o.back.answered.IsZero():
		p.loseMove(ps, now)
	case o.sender.State() == path.Down ||
		now.Sub(o.back.first) >= max(p.e.tn.ChallengeRetry, 2*o.sender.PTO()):
		p.migrate(ps, o, now, w)
	}
}

func sameAddr(a, b conn.Endpoint) bool {
	return a.Remote.Addr().Unmap() == b.Remote.Addr().Unmap()
}

// validate makes ps a path of its own (no other endpoint serves its client path).
func (p *peer) validate(ps *pathState, now time.Time) {
	ps.validated, ps.ready = true, false
	p.e.validated.add(ps.ep.Remote)
	p.logClient(now, slog.LevelInfo, "path validated", "remote", ps.ep.Remote.String(), "path", ps.id)
}

// loseMove refuses ps the client path another endpoint answered for: ps stays an
// unvalidated source (its datagrams are delivered, nothing is sent there) until
// migrationHold has passed, then it is forgotten.
func (p *peer) loseMove(ps *pathState, now time.Time) {
	ps.ready, ps.lostAt = false, now
	p.logClient(now, slog.LevelInfo, "path stays: its endpoint answered", "source", ps.ep.Remote.String(), "path", ps.id)
}

// migrate lets the validated source ps take over the path o that served the same
// client path from its old endpoint, and returns o, which now serves ps's
// endpoint. A NAT that gave the client's flow a new port, or a client that moved
// to a new address, thus keeps the path's id, share and receive state, instead of
// starting a new path and leaving the old one to go Down and be forgotten.
//
// As QUIC does (RFC 9000 §9.3–9.4): a new address is a new route, so the path's
// congestion state, pacing and RTT estimates start over (a new port only keeps
// them: the route is the same); and the new endpoint has proved only that the
// client received one challenge through it — an on-path relay can prove that for
// any address it forwards from — so until it acks a datagram sent there it gets
// no data and at most three times the bytes that came from it (amp). The old
// endpoint's back challenge stays out: its answer brings the path back.
func (p *peer) migrate(ps, o *pathState, now time.Time, w *writer) *pathState {
	p.removePath(ps)
	delete(p.byKey, o.key)
	from := o.ep.Remote
	p.e.validated.remove(from)
	p.e.validated.add(ps.ep.Remote)
	moved := !sameAddr(o.ep, ps.ep)
	o.ep, o.key = ps.ep, ps.key
	o.unvRx, o.unvTx = ps.unvRx, ps.unvTx
	o.amp, o.ampSeq = true, o.sender.NextSeq()
	if moved {
		p.restartPath(o, now)
	}
	p.rehome(o, now)
	p.logClient(now, slog.LevelInfo, "path moved", "path", o.id, "from", from.String(), "to", o.ep.Remote.String(), "estimates_reset", moved)
	// A path whose old endpoint stopped answering is likely Down: its first ack
	// from the new endpoint brings it back, and ends amp.
	p.sendControl(w, o, now, framePing, [wire.ChallengeLen]byte{})
	return o
}

// moveBack returns o to the endpoint its back challenge went to, which answered.
func (p *peer) moveBack(o *pathState, now time.Time, w *writer) {
	b := &o.back
	if c := p.byKey[b.key]; c != nil && c != o {
		p.removePath(c)
	}
	delete(p.byKey, o.key)
	from := o.ep
	p.e.validated.remove(from.Remote)
	p.e.validated.add(b.ep.Remote)
	o.ep, o.key = b.ep, b.key
	// The old endpoint acked datagrams before the move, and its answer shows
	// it still receives.
	o.amp = false
	if !sameAddr(from, o.ep) {
		p.restartPath(o, now)
	}
	p.rehome(o, now)
	p.logClient(now, slog.LevelInfo, "path moved back: the old endpoint answered", "path", o.id, "from", from.Remote.String(), "to", o.ep.Remote.String())
	p.sendControl(w, o, now, framePing, [wire.ChallengeLen]byte{})
}

// restartPath gives a path that moved to a new address fresh congestion state,
// pacing and RTT estimates (RFC 9000 §9.4).
func (p *peer) restartPath(o *pathState, now time.Time) {
	o.sender.ResetEstimates()
	if o.cc != nil {
		o.cc.Reset(now)
	}
	o.ccFrom = now
}

// rehome updates what depends on a path's endpoint after it changed.
func (p *peer) rehome(o *pathState, now time.Time) {
	p.attachMTU(o, now) // a new route may carry another size
	p.byKey[o.key] = o
	if p.leads[o.link] == o {
		p.leads[o.link] = nil
	}
	o.link = p.linkOf(o.cs, o.ep)
	if r := p.rxFor(uint16(o.peerID)); r != nil {
		r.arrival = o
	}
}

// backTick repeats an unanswered back challenge every ChallengeRetry,
// ChallengeTries times in all, and ends a probe after migrationHold.
func (p *peer) backTick(o *pathState, now time.Time, w *writer) {
	b := &o.back
	if !b.live() {
		return
	}
	tn := &p.e.tn
	switch {
	case b.answered.IsZero() && b.tries < tn.ChallengeTries && now.Sub(b.sent) >= tn.ChallengeRetry:
		p.sendBackProbe(o, now, w)
	case now.Sub(b.first) >= p.migrationHold() && (!b.answered.IsZero() || now.Sub(b.sent) >= tn.ChallengeRetry):
		*b = backProbe{}
	}
}

func (p *peer) countPaths() int {
	n := 0
	for _, ps := range p.paths {
		if ps != nil {
			n++
		}
	}
	return n
}

// evictPath drops the oldest unvalidated or down path to make room.
func (p *peer) evictPath(now time.Time) bool {
	var victim *pathState
	for _, ps := range p.paths {
		if ps == nil || (ps.validated && ps.sender.State() != path.Down) {
			continue
		}
		if victim == nil || ps.created.Before(victim.created) {
			victim = ps
		}
	}
	if victim == nil {
		return false
	}
	p.removePath(victim)
	return true
}

func (p *peer) sendChallenge(ps *pathState, now time.Time, w *writer) {
	if ps.chalSent.IsZero() {
		if _, err := rand.Read(ps.chal[:]); err != nil {
			return
		}
	}
	// A challenge datagram is 16 + 12 + 9 + 16 bytes, less than three times any
	// authenticated datagram; retries wait for the source to send more.
	const chalLen = wire.DataOverhead + wire.InnerHeaderLen + wire.ChallengeFrameLen
	if ps.unvTx+chalLen > 3*ps.unvRx {
		return
	}
	ps.unvTx += chalLen
	ps.chalSent = now
	ps.chalTries++
	p.sendControl(w, ps, now, frameChallenge, ps.chal)
}

// closeConns closes every path socket, which ends the reader goroutines.
func (e *Engine) closeConns() {
	e.mu.Lock()
	conns := e.conns
	e.mu.Unlock()
	for _, cs := range conns {
		if !cs.closed {
			cs.closed = true
			cs.c.Close()
		}
	}
}
