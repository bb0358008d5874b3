package tunnel

import (
	"crypto/rand"
	"fmt"
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
		p.e.validated.Delete(ps.ep.Remote)
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

// learnPath returns the path an authenticated datagram arrived on. A server meeting a
// new source endpoint creates the path unvalidated and challenges it: nothing but the
// challenge is sent there until the client echoes it from that endpoint, so a spoofed
// or replayed source cannot divert traffic.
func (p *peer) learnPath(cs *connState, ep conn.Endpoint, n int, now time.Time, w *writer) *pathState {
	if ps := p.byKey[p.keyFor(cs, ep)]; ps != nil {
		if !ps.validated {
			ps.unvRx += n
		}
		return ps
	}
	if p.isSrv {
		return nil // a client talks only to the addresses it was configured with
	}
	if p.countPaths() >= p.e.tn.MaxPathsPerPeer && !p.evictPath(now) {
		return nil
	}
	ps, err := p.addPath(cs, ep, false, now)
	if err != nil {
		return nil
	}
	ps.unvRx = n
	p.sendChallenge(ps, now, w)
	return ps
}

// migratePath lets a path that has just been validated take over the path the same
// client path (the peer's path id) used from its old endpoint, and returns the path
// that now serves the endpoint. A NAT that gave the client's flow a new port, or a
// client that moved to a new address, thus keeps the path's measurements,
// congestion state and share, instead of starting a new path and leaving the old
// one to go Down and be forgotten. Only a validated endpoint takes a path over: the
// client has proved it receives there.
func (p *peer) migratePath(ps *pathState, now time.Time, w *writer) *pathState {
	if p.isSrv || ps.peerID < 0 {
		return ps
	}
	var old *pathState
	for _, o := range p.paths {
		if o != nil && o != ps && o.peerID == ps.peerID && o.cs.pathSock() == ps.cs.pathSock() && o.key.local == ps.key.local {
			old = o
			break
		}
	}
	if old == nil {
		return ps
	}
	p.removePath(ps)
	delete(p.byKey, old.key)
	from := old.ep.Remote
	p.e.validated.Delete(from)
	p.e.validated.Store(ps.ep.Remote, struct{}{})
	old.ep, old.key, old.validated = ps.ep, ps.key, true
	p.attachMTU(old, now) // a new route may carry another size
	p.byKey[old.key] = old
	if p.leads[old.link] == old {
		p.leads[old.link] = nil
	}
	old.link = p.linkOf(old.cs, old.ep)
	if r := p.rxFor(uint16(old.peerID)); r != nil {
		r.arrival = old
	}
	p.e.log.Info("path moved", "peer", p.name, "path", old.id, "from", from.String(), "to", old.ep.Remote.String())
	// A path whose old endpoint stopped answering is likely Down: its first ack
	// from the new endpoint brings it back.
	p.sendControl(w, old, now, framePing, [wire.ChallengeLen]byte{})
	return old
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
