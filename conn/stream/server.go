package stream

import (
	"context"
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
		links:  make(map[netip.AddrPort]*link),
		unauth: make(map[netip.Prefix][]*link),
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
}

// unlistLocked takes l out of its source's unauthenticated connections. Caller
// holds s.mu.
func (s *serverConn) unlistLocked(l *link) {
	if !l.listed {
		return
	}
	l.listed = false
	ls := s.unauth[l.src]
	if i := slices.Index(ls, l); i >= 0 {
		ls = slices.Delete(ls, i, i+1)
	}
	if len(ls) == 0 {
		delete(s.unauth, l.src)
	} else {
		s.unauth[l.src] = ls
	}
}

// Authenticated implements conn.Authenticator: the engine authenticated a datagram
// from ep. The connection's idle clock restarts, and the first call ends its
// probation: it no longer counts against MaxUnauthPerSource, cannot be evicted,
// is held to IdleTimeout instead of AuthTimeout, and gets its full read buffer.
func (s *serverConn) Authenticated(ep conn.Endpoint) {
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
	if !l.authed.Load() {
		s.mu.Lock()
		l.authed.Store(true)
		s.unlistLocked(l)
		s.mu.Unlock()
	}
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
