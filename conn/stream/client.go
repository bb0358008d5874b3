package stream

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/braid-vpn/braid/conn"
)

// clientConn is a client's path: one stream connection per remote it writes to.
type clientConn struct {
	base
	opt conn.Options

	mu      sync.Mutex // guards remotes
	remotes map[netip.AddrPort]*remote

	wmu     sync.Mutex // serialises WriteBatch
	touched touchedQueues
}

// remote is the client's state for one endpoint: its queue, the current connection
// and the dialler's bookkeeping.
type remote struct {
	addr      netip.AddrPort
	q         *outq
	link      atomic.Pointer[link]
	lastWrite atomic.Int64 // unix ns
	active    atomic.Bool  // a dialler goroutine runs for it
	connects  atomic.Uint64
	lastErr   atomic.Pointer[string]
}

// Client is the engine's Listen function on a client (tunnel.Config.Listen): each Conn is one
// local path, pinned to opt.Device and/or opt.Addr like a UDP path socket, that
// dials a stream connection to every endpoint it is asked to write to.
func (t *Transport) Client(opt conn.Options) (conn.Conn, error) {
	c := &clientConn{opt: opt, remotes: make(map[netip.AddrPort]*remote)}
	local := netip.AddrPortFrom(opt.Addr.Addr().Unmap(), opt.Addr.Port())
	c.init(t, local, opt.BatchSize)
	if opt.Device != "" {
		if _, err := net.InterfaceByName(opt.Device); err != nil {
			return nil, &conn.Error{Msg: `interface "` + opt.Device + `" not found`, Err: err}
		}
	}
	return c, nil
}

func (c *clientConn) WriteBatch(bufs [][]byte, eps []conn.Endpoint) error {
	if len(eps) < len(bufs) {
		return errBadWrite
	}
	if c.closed.Load() {
		return c.closedErr("write")
	}
	t := c.t
	c.wmu.Lock()
	defer c.wmu.Unlock()
	now := time.Now().UnixNano()
	var rs *remote
	var q *outq // locked
	for i, d := range bufs {
		if rs == nil || rs.addr != eps[i].Remote {
			// Lock order is c.mu before a queue's mu (Close flushes under c.mu).
			if q != nil {
				q.mu.Unlock()
				q = nil
			}
			if rs = c.remoteFor(eps[i].Remote, now); rs == nil {
				t.dropDown.Add(1)
				continue
			}
		}
		if rs.q != q {
			if q != nil {
				q.mu.Unlock()
			}
			q = rs.q
			q.mu.Lock()
			c.touched.add(q)
		}
		switch {
		case !q.open:
			t.dropDown.Add(1)
		case !q.addLocked(d):
			t.dropFull.Add(1)
		}
	}
	if q != nil {
		q.mu.Unlock()
	}
	c.touched.signal()
	return nil
}

// remoteFor finds (or creates) the state of an endpoint, notes the write and makes
// sure a dialler runs for it. nil for an endpoint no connection can go to.
func (c *clientConn) remoteFor(ep netip.AddrPort, now int64) *remote {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil
	}
	rs := c.remotes[ep]
	if rs == nil {
		if !ep.Addr().IsValid() || ep.Port() == 0 {
			return nil
		}
		rs = &remote{addr: ep, q: newOutq(c.t.cfg.MaxPending)}
		c.remotes[ep] = rs
	}
	rs.lastWrite.Store(now)
	if !rs.active.Load() && rs.active.CompareAndSwap(false, true) {
		rs.q.mu.Lock()
		rs.q.open = true // queue what is written while the first dial runs
		rs.q.mu.Unlock()
		c.wg.Add(1)
		go c.dialLoop(rs)
	}
	return rs
}

// dialLoop keeps rs connected while it is written to: dial, serve until the
// connection fails, back off, dial again.
func (c *clientConn) dialLoop(rs *remote) {
	defer c.wg.Done()
	t := c.t
	cfg := &t.cfg
	backoff := cfg.BackoffMin
	for {
		if c.closed.Load() {
			rs.active.Store(false)
			return
		}
		if time.Since(time.Unix(0, rs.lastWrite.Load())) > cfg.IdleRedial {
			rs.active.Store(false)
			// A write that raced with this decision restarts the dialler.
			if time.Since(time.Unix(0, rs.lastWrite.Load())) <= cfg.IdleRedial && rs.active.CompareAndSwap(false, true) {
				continue
			}
			return
		}
		rs.q.mu.Lock()
		rs.q.open = true // queue while dialling
		rs.q.mu.Unlock()
		nc, kind, err := c.dial(rs.addr)
		if err != nil {
			t.dialFails.Add(1)
			msg := err.Error()
			rs.lastErr.Store(&msg)
			t.logRated(false, "stream connect failed", "remote", rs.addr.String(), "path", c.pathName(), "err", msg, "retry_in", backoff.String())
			rs.q.mu.Lock()
			rs.q.open = false
			rs.q.mu.Unlock()
			t.dropDown.Add(uint64(rs.q.reset()))
			if !c.sleep(backoff) {
				rs.active.Store(false)
				return
			}
			backoff = min(2*backoff, cfg.BackoffMax)
			continue
		}
		t.connects.Add(1)
		rs.connects.Add(1)
		l := newLink(t, &c.base, nc, rs.q, rs.addr, netip.Addr{}, kind, cfg.ReadBuffer)
		l.onHello = cfg.OnEstablished
		if kind != t.cfg.Kind {
			t.logRated(true, "server does not speak MPTCP; this connection runs as plain TCP", "remote", l.raddr.String())
		}
		cfg.Logger.Debug("stream connected", "remote", l.raddr.String(), "local", l.laddr.String(), "kind", kind.String())
		rs.link.Store(l)
		l.start()
		select {
		case <-l.dead:
		case <-c.closing:
			l.fail(net.ErrClosed)
		}
		l.done.Wait() // the queue is ours again
		rs.link.Store(nil)
		if err := l.lastErr(); err != nil {
			msg := err.Error()
			rs.lastErr.Store(&msg)
		}
		rs.q.mu.Lock()
		rs.q.open = false
		rs.q.mu.Unlock()
		t.dropDown.Add(uint64(rs.q.reset()))
		if time.Since(l.since) >= cfg.BackoffReset {
			backoff = cfg.BackoffMin
		}
		if !c.sleep(backoff) {
			rs.active.Store(false)
			return
		}
		backoff = min(2*backoff, cfg.BackoffMax)
	}
}

func (c *clientConn) sleep(d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-c.closing:
		return false
	}
}

func (c *clientConn) pathName() string {
	switch {
	case c.opt.Device != "":
		return c.opt.Device
	case c.opt.Addr.Addr().IsValid() && !c.opt.Addr.Addr().IsUnspecified():
		return c.opt.Addr.Addr().String()
	}
	return "default"
}

// dial connects to addr, then to the fallbacks in order; it returns the kind the
// connection actually runs.
func (c *clientConn) dial(addr netip.AddrPort) (net.Conn, Kind, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	var firstErr error
	for i, a := range append([]netip.AddrPort{addr}, c.t.cfg.Fallbacks...) {
		if i > 0 && a == addr {
			continue
		}
		nc, kind, err := c.dialOne(ctx, a)
		if err == nil && kind != c.t.cfg.Kind {
			// An MPTCP connection that fell back to TCP: the server may not
			// speak MPTCP, or the fallback was a passing accident (the kernel
			// also falls back when a SYN had to be retransmitted, for one).
			// One more try tells the two apart; the tunnel would otherwise
			// stay on one path for the connection's lifetime.
			c.t.logRated(true, "MPTCP connection fell back to TCP; dialling once more", "remote", a.String())
			nc.Close()
			nc, kind, err = c.dialOne(ctx, a)
		}
		if err == nil {
			return nc, kind, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, 0, firstErr
}

func (c *clientConn) dialOne(ctx context.Context, a netip.AddrPort) (net.Conn, Kind, error) {
	cfg := &c.t.cfg
	d := net.Dialer{Timeout: cfg.DialTimeout, Control: c.t.control(c.opt.Device)}
	if la := c.opt.Addr.Addr(); la.IsValid() && !la.IsUnspecified() {
		d.LocalAddr = &net.TCPAddr{IP: la.AsSlice()}
	}
	d.SetMultipathTCP(cfg.Kind == MPTCP)
	var nc net.Conn
	var err error
	if cfg.Dial != nil {
		nc, err = cfg.Dial(ctx, &d, a.String())
	} else {
		nc, err = d.DialContext(ctx, "tcp", a.String())
	}
	if err != nil {
		return nil, 0, err
	}
	tc := nc.(*net.TCPConn)
	kind := TCP
	if cfg.Kind == MPTCP {
		if runsMPTCP(tc) {
			kind = MPTCP
		}
	}
	c.t.afterConnect(tc)
	return tc, kind, nil
}

func (c *clientConn) Close() error {
	c.mu.Lock()
	deadline := time.Now().Add(closeFlushTime)
	for _, rs := range c.remotes {
		if l := rs.link.Load(); l != nil && !c.closed.Load() {
			l.flush(deadline)
		}
	}
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		close(c.closing)
	})
	for _, rs := range c.remotes {
		if l := rs.link.Load(); l != nil {
			l.fail(net.ErrClosed)
		}
	}
	c.mu.Unlock()
	c.wg.Wait()
	return nil
}
