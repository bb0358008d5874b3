package stream

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/braid-vpn/braid/conn"
)

// serverConn listens on one address; each accepted connection is one endpoint.
type serverConn struct {
	base
	ln       *net.TCPListener
	wildcard bool

	mu    sync.Mutex
	links map[netip.AddrPort]*link
	// unauth holds, per source, the connections not yet authenticated, oldest
	// first (at most MaxUnauthPerSource each).
	unauth map[netip.Prefix][]*link
	// byPeer and bySource hold the authenticated connections of each peer and of
	// each source, in no particular order (MaxConnsPerPeer, MaxConnsPerSource).
	byPeer   map[conn.PeerID][]*link
	bySource map[netip.Prefix][]*link
	// lastAuth is the connection Authenticated found last: the engine reads
	// batches from one connection at a time, so most calls need no map lookup.
	lastAuth atomic.Pointer[link]

	wmu     sync.Mutex
	touched touchedQueues
}

var _ conn.Authenticator = (*serverConn)(nil)

// Server is the engine's Listen function on a server: a Conn listening on
// opt.Addr (and opt.Device, if set) that accepts stream connections.
func (t *Transport) Server(opt conn.Options) (conn.Conn, error) {
	addr := opt.Addr.Addr()
	network := "tcp"
	switch {
	case opt.Network == "udp4" || opt.Network == "tcp4" || (addr.IsValid() && addr.Unmap().Is4()):
		network = "tcp4"
	case opt.Network == "udp6" || opt.Network == "tcp6" || (addr.IsValid() && addr.Is6() && !addr.Is4In6()):
		network = "tcp6"
	}
	hostport := opt.Addr.String()
	if !addr.IsValid() {
		hostport = ":" + strconv.Itoa(int(opt.Addr.Port()))
	}
	lc := net.ListenConfig{Control: t.control(opt.Device)}
	// Explicit both ways: since Go 1.24 a listener is MPTCP by default, and a "tcp"
	// tunnel must be plain TCP even for an MPTCP client.
	lc.SetMultipathTCP(t.cfg.Kind == MPTCP)
	ln, err := lc.Listen(context.Background(), network, hostport)
	if err != nil {
		return nil, listenError(t.cfg.Kind, hostport, opt.Device, err)
	}
	tl := ln.(*net.TCPListener)
	local := unmap(tl.Addr().(*net.TCPAddr).AddrPort())
	s := &serverConn{
		ln: tl, wildcard: !addr.IsValid() || addr.IsUnspecified(),
		links:    make(map[netip.AddrPort]*link),
		unauth:   make(map[netip.Prefix][]*link),
		byPeer:   make(map[conn.PeerID][]*link),
		bySource: make(map[netip.Prefix][]*link),
	}
	s.init(t, local, opt.BatchSize)
	s.wg.Add(2)
	go s.acceptLoop()
	go s.janitor()
	return s, nil
}

func (s *serverConn) acceptLoop() {
	defer s.wg.Done()
	t := s.t
	cfg := &t.cfg
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait rather than spin.
			t.logRated(true, "stream accept", "listen", s.local.String(), "err", err.Error())
			select {
			case <-time.After(50 * time.Millisecond):
			case <-s.closing:
				return
			}
			continue
		}
		tc := nc.(*net.TCPConn)
		remote := unmap(tc.RemoteAddr().(*net.TCPAddr).AddrPort())
		src := sourceOf(remote.Addr())
		if victim, why := s.admit(src); why != "" {
			t.rejects.Add(1)
			t.logRated(true, "stream connection refused: "+why, "remote", remote.String(),
				"max", cfg.MaxConns, "max_unauthenticated_per_source", cfg.MaxUnauthPerSource)
			tc.Close()
			continue
		} else if victim != nil {
			t.evictions.Add(1)
			victim.fail(errors.New("evicted for a new connection: not authenticated, and the server is full"))
		}
		t.accepts.Add(1)
		t.afterConnect(tc)
		kind := TCP
		if t.cfg.Kind == MPTCP {
			if runsMPTCP(tc) {
				kind = MPTCP
			}
		}
		var local netip.Addr
		if s.wildcard {
			local = unmap(tc.LocalAddr().(*net.TCPAddr).AddrPort()).Addr()
		}
		q := newOutq(cfg.MaxPending)
		q.open = true
		l := newLink(t, &s.base, tc, q, remote, local, kind, unauthReadBuffer)
		l.helloBy = l.since.Add(cfg.HelloTimeout)
		l.src = src
		s.mu.Lock()
		if old := s.links[remote]; old != nil {
			s.forgetLocked(old)
			old.fail(errors.New("replaced by a new connection from the same address"))
		}
		s.links[remote] = l
		s.unauth[src] = append(s.unauth[src], l)
		l.listed = true
		s.mu.Unlock()
		cfg.Logger.Debug("stream accepted", "remote", remote.String(), "local", l.laddr.String(), "kind", kind.String())
		l.start()
		s.wg.Add(1)
		go s.reap(l)
	}
}

// sourceOf is the source a remote address counts against for MaxUnauthPerSource:
// the address itself for IPv4, its /64 for IPv6.
func sourceOf(a netip.Addr) netip.Prefix {
	a = a.Unmap().WithZone("")
	bits := SourceBits4
	if a.Is6() {
		bits = SourceBits6
	}
	p, _ := a.Prefix(bits)
	return p
}

// admit decides on a new connection from src: why is the reason to refuse it, or
// "" to accept it, in which case victim, if not nil, is an unauthenticated
// connection already forgotten, for the caller to close, whose slot it takes.
//
// The victim comes from the source with the most unauthenticated connections
// (the oldest of them; of equal sources the one whose oldest is oldest), so a
// flood from a few sources evicts itself before a lone client that is still
// authenticating. Authenticated connections are never evicted.
func (s *serverConn) admit(src netip.Prefix) (victim *link, why string) {
	cfg := &s.t.cfg
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.unauth[src]) >= cfg.MaxUnauthPerSource {
		return nil, "too many unauthenticated connections from this source"
	}
	if len(s.links) < cfg.MaxConns {
		return nil, ""
	}
	var worst []*link
	for _, ls := range s.unauth {
		if len(ls) > len(worst) || len(ls) == len(worst) && len(ls) > 0 && ls[0].since.Before(worst[0].since) {
			worst = ls
		}
	}
	if len(worst) == 0 {
		return nil, "too many connections, all authenticated"
	}
	victim = worst[0]
	s.forgetLocked(victim)
	return victim, ""
}

// forgetLocked removes l from the server's tables: it no longer takes a slot and
// WriteBatch no longer finds it. Caller holds s.mu.
func (s *serverConn) forgetLocked(l *link) {
	if s.links[l.remote] == l {
		delete(s.links, l.remote)
	}
	s.unlistLocked(l)
	if p := l.peer.Load(); p != nil && l.counted {
		l.counted = false
		dropFrom(s.byPeer, *p, l)
		dropFrom(s.bySource, l.src, l)
	}
}

// dropFrom removes l from m[k], and the key once its list is empty.
func dropFrom[K comparable](m map[K][]*link, k K, l *link) {
	ls := m[k]
	if i := slices.Index(ls, l); i >= 0 {
		ls = slices.Delete(ls, i, i+1)
	}
	if len(ls) == 0 {
		delete(m, k)
	} else {
		m[k] = ls
	}
}

// unlistLocked takes l out of its source's unauthenticated connections. Caller
// holds s.mu.
func (s *serverConn) unlistLocked(l *link) {
	if !l.listed {
		return
	}
	l.listed = false
	dropFrom(s.unauth, l.src, l)
}

// Authenticated implements conn.Authenticator: the engine authenticated a datagram
// from ep under peer's session. The connection's idle clock restarts, and the
// first call ends its probation: it no longer counts against MaxUnauthPerSource,
// cannot be evicted for a new unauthenticated connection, is held to IdleTimeout
// instead of AuthTimeout, and gets its full read buffer. It then counts against
// its peer's MaxConnsPerPeer and its source's MaxConnsPerSource; when that goes
// over either, the least recently authenticated connection of that peer (of the
// source: an unused one, else one of the peer holding the most there) is closed.
//
// The common case, another datagram of the same peer on the connection found
// last, takes no lock.
func (s *serverConn) Authenticated(ep conn.Endpoint, peer conn.PeerID) {
	l := s.lastAuth.Load()
	if l == nil || l.remote != ep.Remote || l.isDead() {
		s.mu.Lock()
		l = s.links[ep.Remote]
		s.mu.Unlock()
		if l == nil {
			return
		}
		s.lastAuth.Store(l)
	}
	l.authAt.Store(time.Now().UnixNano())
	if p := l.peer.Load(); p != nil && *p == peer {
		return
	}
	var victims [2]*link
	s.mu.Lock()
	// A connection already forgotten (evicted, replaced, reaped) must not be
	// counted again: nothing would take it out of byPeer and bySource.
	if s.links[l.remote] == l {
		victims = s.attributeLocked(l, peer)
	}
	s.mu.Unlock()
	for _, v := range victims {
		if v == nil {
			continue
		}
		s.t.capEvictions.Add(1)
		s.t.logRated(false, "stream connection closed: its peer or source holds too many", "remote", v.raddr.String(),
			"peer", shortPeer(*v.peer.Load()), "max_per_peer", s.t.cfg.MaxConnsPerPeer, "max_per_source", s.t.cfg.MaxConnsPerSource)
		v.fail(errors.New("evicted: its peer or source was over its connection cap"))
	}
}

// attributeLocked counts l, just authenticated, as a connection of peer, and
// returns the connections (already forgotten, for the caller to close) that the
// per-peer and per-source caps push out. A connection whose datagrams open under
// another peer's keys than before moves to that peer. Caller holds s.mu.
func (s *serverConn) attributeLocked(l *link, peer conn.PeerID) (victims [2]*link) {
	cfg := &s.t.cfg
	if old := l.peer.Load(); old != nil && l.counted {
		dropFrom(s.byPeer, *old, l)
	} else {
		l.authed.Store(true)
		s.unlistLocked(l)
		s.bySource[l.src] = append(s.bySource[l.src], l)
	}
	l.peer.Store(&peer)
	l.counted = true
	s.byPeer[peer] = append(s.byPeer[peer], l)
	// A peer legitimately holds one connection per path, and reconnects leave
	// dead ones behind until IdleTimeout: the least recently authenticated goes
	// first, which is a dead one when there is one.
	if ls := s.byPeer[peer]; len(ls) > cfg.MaxConnsPerPeer {
		v := leastRecent(ls, l, nil)
		s.forgetLocked(v)
		victims[0] = v
	}
	if ls := s.bySource[l.src]; len(ls) > cfg.MaxConnsPerSource {
		v := s.sourceVictim(ls, l)
		s.forgetLocked(v)
		victims[1] = v
	}
	return victims
}

// unusedAfter: a connection not authenticated for this long carries no live
// path. The engine probes every path of a session every 400 ms, so a live
// connection is authenticated several times a second.
const unusedAfter = 5 * time.Second

// sourceVictim picks, among the authenticated connections ls of a source over
// MaxConnsPerSource, the one to close for l: the least recently authenticated if
// it is unused, else the least recently authenticated of the peer that holds the
// most of them, so that clients sharing a NAT pay for their own excess and not
// for one another's.
func (s *serverConn) sourceVictim(ls []*link, l *link) *link {
	if v := leastRecent(ls, l, nil); time.Since(time.Unix(0, v.authAt.Load())) >= unusedAfter {
		return v
	}
	held := make(map[conn.PeerID]int)
	most := 0
	for _, x := range ls {
		n := held[*x.peer.Load()] + 1
		held[*x.peer.Load()] = n
		most = max(most, n)
	}
	return leastRecent(ls, l, func(x *link) bool { return held[*x.peer.Load()] == most })
}

// leastRecent returns the connection of ls, other than l and among those keep
// accepts (all if keep is nil), authenticated longest ago; of equals the oldest.
func leastRecent(ls []*link, l *link, keep func(*link) bool) *link {
	var v *link
	for _, x := range ls {
		if x == l || keep != nil && !keep(x) {
			continue
		}
		if v == nil || x.authAt.Load() < v.authAt.Load() ||
			x.authAt.Load() == v.authAt.Load() && x.since.Before(v.since) {
			v = x
		}
	}
	return v
}

// shortPeer is how logs name a peer: the start of its public key in base64.
func shortPeer(p conn.PeerID) string {
	return base64.StdEncoding.EncodeToString(p[:])[:8]
}

// reap forgets a connection once it has ended.
func (s *serverConn) reap(l *link) {
	defer s.wg.Done()
	<-l.dead
	l.done.Wait()
	s.mu.Lock()
	s.forgetLocked(l)
	s.mu.Unlock()
	s.lastAuth.CompareAndSwap(l, nil)
}

// janitor closes connections that were not authenticated within AuthTimeout of
// connecting, or not for IdleTimeout since. (HelloTimeout is a read deadline.)
func (s *serverConn) janitor() {
	defer s.wg.Done()
	cfg := &s.t.cfg
	tk := time.NewTicker(max(min(cfg.IdleTimeout, cfg.AuthTimeout)/4, 10*time.Millisecond))
	defer tk.Stop()
	var stale []*link
	expired := func(l *link, now time.Time) bool {
		if !l.authed.Load() {
			return now.Sub(l.since) > cfg.AuthTimeout
		}
		return now.Sub(time.Unix(0, l.authAt.Load())) > cfg.IdleTimeout
	}
	for {
		select {
		case <-s.closing:
			return
		case now := <-tk.C:
			s.mu.Lock()
			for _, l := range s.links {
				if expired(l, now) {
					stale = append(stale, l)
				}
			}
			s.mu.Unlock()
			for i, l := range stale {
				// Check again: the engine may have authenticated it meanwhile.
				switch {
				case !expired(l, time.Now()) || l.isDead():
				case !l.authed.Load():
					s.t.authTimeouts.Add(1)
					l.fail(errors.New("not authenticated within " + cfg.AuthTimeout.String() + " of connecting"))
				default:
					s.t.idleClosed.Add(1)
					l.fail(errors.New("idle: nothing authenticated for " + cfg.IdleTimeout.String()))
				}
				stale[i] = nil
			}
			stale = stale[:0]
		}
	}
}

func (s *serverConn) WriteBatch(bufs [][]byte, eps []conn.Endpoint) error {
	if len(eps) < len(bufs) {
		return errBadWrite
	}
	if s.closed.Load() {
		return s.closedErr("write")
	}
	t := s.t
	s.wmu.Lock()
	defer s.wmu.Unlock()
	var l *link
	var q *outq // locked
	s.mu.Lock()
	for i, d := range bufs {
		if l == nil || l.remote != eps[i].Remote {
			l = s.links[eps[i].Remote]
			if l == nil || l.isDead() {
				l = nil
				t.dropNoConn.Add(1)
				continue
			}
		}
		if l.q != q {
			if q != nil {
				q.mu.Unlock()
			}
			q = l.q
			q.mu.Lock()
			s.touched.add(q)
		}
		if !q.addLocked(d) {
			t.dropFull.Add(1)
		}
	}
	if q != nil {
		q.mu.Unlock()
	}
	s.mu.Unlock()
	s.touched.signal()
	return nil
}

func (s *serverConn) Close() error {
	if !s.closed.Load() {
		deadline := time.Now().Add(closeFlushTime)
		s.mu.Lock()
		for _, l := range s.links {
			l.flush(deadline)
		}
		s.mu.Unlock()
	}
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.closing)
	})
	err := s.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	s.mu.Lock()
	for _, l := range s.links {
		l.fail(net.ErrClosed)
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}
