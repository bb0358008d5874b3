package tunnel

import (
	"crypto/rand"
	"fmt"
	"net/netip"
	"time"

	"github.com/braid-vpn/braid/conn"
	"github.com/braid-vpn/braid/path"
)

// openConns opens the path sockets: on a client one per local path, subflow and
// address family in use; on a server one per listen address.
func (e *Engine) openConns() error {
	switch e.role {
	case Server:
		for _, a := range e.cfg.ListenAddrs {
			c, err := e.cfg.Listen(conn.Options{Addr: a})
			if err != nil {
				return err
			}
			e.conns = append(e.conns, &connState{c: c, idx: len(e.conns)})
		}
		return nil
	default:
		return e.openClientPaths(e.cfg.LocalPaths, e.cfg.Subflows, e.cfg.Servers, time.Now())
	}
}

// clientSocketSpecs lists the sockets a client needs for its local paths.
type socketSpec struct {
	local LocalPath
	sub   int
	v6    bool
}

func clientSockets(locals []LocalPath, subflows int, servers []netip.AddrPort) []socketSpec {
	if len(locals) == 0 {
		locals = []LocalPath{{}}
	}
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

// openClientPaths opens sockets for the local paths and builds the full mesh of paths
// (every local path × every server address × every subflow). Path ids follow that
// order — local path, then server, then subflow — which is the order weights are
// written in the config. Caller holds e.mu and the server peer's mu, or owns e.
func (e *Engine) openClientPaths(locals []LocalPath, subflows int, servers []netip.AddrPort, now time.Time) error {
	p := e.server
	socks := make(map[socketSpec]*connState)
	for _, spec := range clientSockets(locals, subflows, servers) {
		opt := conn.Options{Device: spec.local.Device, Network: "udp4"}
		if spec.v6 {
			opt.Network = "udp6"
		}
		if spec.local.Addr.IsValid() {
			opt.Addr = netip.AddrPortFrom(spec.local.Addr, 0)
		} else if spec.v6 {
			opt.Addr = netip.AddrPortFrom(netip.IPv6Unspecified(), 0)
		} else {
			opt.Addr = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
		}
		c, err := e.cfg.Listen(opt)
		if err != nil {
			return fmt.Errorf("path %s: %w", spec.local, err)
		}
		cs := &connState{c: c, idx: len(e.conns), local: spec.local, sub: spec.sub}
		e.conns = append(e.conns, cs)
		socks[spec] = cs
	}
	if len(locals) == 0 {
		locals = []LocalPath{{}}
	}
	for _, l := range locals {
		for _, srv := range servers {
			v6 := !srv.Addr().Unmap().Is4()
			for sub := 0; sub < subflows; sub++ {
				cs := socks[socketSpec{l, sub, v6}]
				if cs == nil {
					continue // a local address of the other family
				}
				if _, err := p.addPath(cs, conn.Endpoint{Remote: srv}, true, now); err != nil {
					return err
				}
			}
		}
	}
	return nil
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
	ps := &pathState{
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
	k := pathKey{conn: cs.idx, remote: ep.Remote}
	if !p.isSrv {
		k.local = ep.Local
	}
	return k
}

func (p *peer) removePath(ps *pathState) {
	delete(p.byKey, ps.key)
	if int(ps.id) < len(p.paths) && p.paths[ps.id] == ps {
		p.paths[ps.id] = nil
	}
	for _, r := range p.rx {
		if r != nil && r.arrival == ps {
			r.arrival = nil
		}
	}
}

// learnPath returns the path an authenticated datagram arrived on. A server meeting a
// new source endpoint creates the path unvalidated and challenges it: nothing but the
// challenge is sent there until the client echoes it from that endpoint, so a spoofed
// or replayed source cannot divert traffic.
func (p *peer) learnPath(cs *connState, ep conn.Endpoint, now time.Time, w *writer) *pathState {
	if ps := p.byKey[p.keyFor(cs, ep)]; ps != nil {
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
	p.sendChallenge(ps, now, w)
	return ps
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
	ps.chalSent = now
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
