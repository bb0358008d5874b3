package stream

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"sync"
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

	wmu     sync.Mutex
	touched touchedQueues
}

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
	s := &serverConn{ln: tl, wildcard: !addr.IsValid() || addr.IsUnspecified(), links: make(map[netip.AddrPort]*link)}
	s.init(t, local, opt.BatchSize)
	s.wg.Add(2)
	go s.acceptLoop()
	go s.janitor()
	return s, nil
}

func (s *serverConn) acceptLoop() {
	defer s.wg.Done()
	t := s.t
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
		s.mu.Lock()
		full := len(s.links) >= t.cfg.MaxConns
		s.mu.Unlock()
		if full {
			t.rejects.Add(1)
			t.logRated(true, "stream connection refused: too many connections", "remote", remote.String(), "max", t.cfg.MaxConns)
			tc.Close()
			continue
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
		q := newOutq(t.cfg.MaxPending)
		q.open = true
		l := newLink(t, &s.base, tc, q, remote, local, kind)
		s.mu.Lock()
		if old := s.links[remote]; old != nil {
			old.fail(errors.New("replaced by a new connection from the same address"))
		}
		s.links[remote] = l
		s.mu.Unlock()
		t.cfg.Logger.Debug("stream accepted", "remote", remote.String(), "local", l.laddr.String(), "kind", kind.String())
		l.start()
		s.wg.Add(1)
		go s.reap(l)
	}
}

// reap forgets a connection once it has ended.
func (s *serverConn) reap(l *link) {
	defer s.wg.Done()
	<-l.dead
	l.done.Wait()
	s.mu.Lock()
	if s.links[l.remote] == l {
		delete(s.links, l.remote)
	}
	s.mu.Unlock()
}

// janitor closes connections that have been silent for IdleTimeout.
func (s *serverConn) janitor() {
	defer s.wg.Done()
	idle := s.t.cfg.IdleTimeout
	tk := time.NewTicker(max(idle/4, 10*time.Millisecond))
	defer tk.Stop()
	var stale []*link
	for {
		select {
		case <-s.closing:
			return
		case now := <-tk.C:
			s.mu.Lock()
			for _, l := range s.links {
				if now.Sub(time.Unix(0, l.lastRx.Load())) > idle {
					stale = append(stale, l)
				}
			}
			s.mu.Unlock()
			for i, l := range stale {
				s.t.idleClosed.Add(1)
				l.fail(errors.New("idle: no frame for " + idle.String()))
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
