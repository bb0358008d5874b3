package conntest

import (
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/braid-vpn/braid/conn"
)

// Conn is one socket of a Network. It implements conn.Conn.
type Conn struct {
	net   *Network
	key   bindKey
	local netip.AddrPort

	mu     sync.Mutex
	queue  []*packet // ring of received datagrams
	head   int
	count  int
	closed bool
	notify chan struct{} // a datagram was queued
	done   chan struct{} // closed by Close
}

var _ conn.Conn = (*Conn)(nil)

// enqueue adds a received datagram; false if the queue is full or closed.
func (c *Conn) enqueue(p *packet) bool {
	c.mu.Lock()
	if c.closed || c.count == len(c.queue) {
		c.mu.Unlock()
		return false
	}
	c.queue[(c.head+c.count)%len(c.queue)] = p
	c.count++
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
	return true
}

func (c *Conn) wildcard() bool { return c.local.Addr().IsUnspecified() }

// ReadBatch implements conn.Conn. Endpoint.Local is the destination address
// for wildcard conns and zero otherwise, as with real sockets.
func (c *Conn) ReadBatch(bufs [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
	limit := min(len(bufs), len(sizes), len(eps), c.net.cfg.BatchSize)
	if limit == 0 {
		return 0, nil
	}
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return 0, errClosed
		}
		if c.count > 0 {
			n := 0
			for n < limit && c.count > 0 {
				p := c.queue[c.head]
				c.queue[c.head] = nil
				c.head = (c.head + 1) % len(c.queue)
				c.count--
				sizes[n] = copy(bufs[n], p.data)
				eps[n] = conn.Endpoint{Remote: p.from}
				if c.wildcard() {
					eps[n].Local = p.to.Addr()
				}
				freePacket(p)
				n++
			}
			c.mu.Unlock()
			return n, nil
		}
		c.mu.Unlock()
		select {
		case <-c.notify:
		case <-c.done:
		}
	}
}

// source picks the source address of a datagram to dst: the bound address,
// else the endpoint's Local, else the pinned interface's first address of
// the right family.
func (c *Conn) source(ep conn.Endpoint) (netip.AddrPort, error) {
	if !c.wildcard() {
		return c.local, nil
	}
	if ep.Local.IsValid() {
		return netip.AddrPortFrom(ep.Local.Unmap(), c.local.Port()), nil
	}
	if c.key.device != "" {
		c.net.mu.Lock()
		addrs := c.net.ifaces[c.key.device]
		c.net.mu.Unlock()
		for _, a := range addrs {
			if a.Is4() == ep.Remote.Addr().Unmap().Is4() {
				return netip.AddrPortFrom(a, c.local.Port()), nil
			}
		}
	}
	return netip.AddrPort{}, fmt.Errorf("conntest: write to %v from wildcard %v: no source address (set Endpoint.Local or pin the conn to an interface)", ep.Remote, c.local)
}

// WriteBatch implements conn.Conn. Payloads are copied; the caller may reuse
// bufs at once.
func (c *Conn) WriteBatch(bufs [][]byte, eps []conn.Endpoint) error {
	if len(eps) < len(bufs) {
		return fmt.Errorf("conntest: WriteBatch with %d datagrams but %d endpoints", len(bufs), len(eps))
	}
	n := c.net
	var first error
	for i, b := range bufs {
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return errClosed
		}
		ep := eps[i]
		to := netip.AddrPortFrom(ep.Remote.Addr().Unmap(), ep.Remote.Port())
		if !to.Addr().IsValid() || to.Port() == 0 {
			if first == nil {
				first = fmt.Errorf("conntest: write to invalid address %v", ep.Remote)
			}
			continue
		}
		from, err := c.source(ep)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		if f := n.capture.Load(); f != nil {
			(*f)(from, to, b)
		}
		if f := n.filter.Load(); f != nil && !(*f)(from, to, b) {
			continue
		}
		p := newPacket(from, to, b)
		n.mu.Lock()
		if n.closed {
			n.mu.Unlock()
			freePacket(p)
			return errClosed
		}
		now := n.now
		if !n.cfg.ManualClock {
			now = timeNow()
		}
		n.sendLocked(p, now)
		n.mu.Unlock()
	}
	return first
}

// LocalAddr implements conn.Conn.
func (c *Conn) LocalAddr() netip.AddrPort { return c.local }

// BatchSize implements conn.Conn.
func (c *Conn) BatchSize() int { return c.net.cfg.BatchSize }

// Close unbinds the conn and unblocks ReadBatch with net.ErrClosed.
func (c *Conn) Close() error {
	c.net.mu.Lock()
	if c.net.conns[c.key] == c {
		delete(c.net.conns, c.key)
	}
	c.net.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	for c.count > 0 {
		freePacket(c.queue[c.head])
		c.queue[c.head] = nil
		c.head = (c.head + 1) % len(c.queue)
		c.count--
	}
	close(c.done)
	return nil
}

var timeNow = time.Now
