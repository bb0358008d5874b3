package stream

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/braid-vpn/braid/conn"
	"github.com/braid-vpn/braid/wire"
)

// outq is a connection's send queue: two buffers of frames, one filled by
// WriteBatch while the writer goroutine hands the other to the kernel. A client
// keeps its queue across reconnections, so what was written while dialling goes
// out on the new connection.
type outq struct {
	mu   sync.Mutex
	bufs [2][]byte
	size int // the bound of each buffer, allocated on first use
	cur  int // the buffer WriteBatch appends to
	// open says whether writes are queued (a connection is up or being dialled)
	// or dropped.
	open bool
	wake chan struct{} // cap 1: "there is something to write"
}

// newOutq returns a queue of two buffers of size bytes each. They are allocated
// when first written to: a server connection nothing is sent to (a peer that never
// authenticates) costs no queue memory.
func newOutq(size int) *outq {
	return &outq{size: size, wake: make(chan struct{}, 1)}
}

// addLocked queues one datagram; false if it does not fit. Caller holds q.mu.
func (q *outq) addLocked(d []byte) bool {
	b := q.bufs[q.cur]
	if len(b)+wire.StreamFrameHeaderLen+len(d) > q.size || len(d) > wire.MaxStreamFrame {
		return false
	}
	if b == nil {
		b = make([]byte, 0, q.size)
	}
	q.bufs[q.cur] = appendFrame(b, d)
	return true
}

func (q *outq) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take swaps the buffers and returns the full one, or nil if nothing is queued.
// Only the writer goroutine calls it, and it calls done before taking again.
func (q *outq) take() []byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.bufs[q.cur]
	if len(b) == 0 {
		return nil
	}
	q.cur ^= 1
	return b
}

func (q *outq) done(b []byte) {
	q.mu.Lock()
	q.bufs[q.cur^1] = b[:0]
	q.mu.Unlock()
}

// reset empties the queue (a client starting to drop while down) and returns how
// many datagrams it held.
func (q *outq) reset() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for i := range q.bufs {
		for b := q.bufs[i]; len(b) >= wire.StreamFrameHeaderLen; n++ {
			b = b[min(len(b), wire.StreamFrameHeaderLen+(int(b[0])<<8|int(b[1]))):]
		}
		q.bufs[i] = q.bufs[i][:0]
	}
	return n
}

// link is one stream connection: a reader goroutine that cuts frames and hands them
// to ReadBatch calls, and a writer goroutine that drains the send queue.
type link struct {
	t      *Transport
	b      *base
	nc     net.Conn
	q      *outq
	remote netip.AddrPort // Endpoint.Remote of its frames
	local  netip.Addr     // Endpoint.Local of its frames (wildcard server sockets)
	// laddr, raddr are the connection's own addresses (for MPTCP: of the first
	// subflow); kind is what it runs (MPTCP falls back to TCP with a TCP peer).
	laddr, raddr netip.AddrPort
	kind         Kind
	since        time.Time

	fr frameReader
	// readBuffer is the size the read buffer takes once the connection is
	// authenticated (clients: from the start).
	readBuffer int
	// onHello runs once when the peer's hello has been checked (clients only).
	onHello func()

	// Server connections only. helloBy is the read deadline for the hello and the
	// first frame (zero: none). authed says the engine has authenticated a datagram
	// from the connection, authAt (unix ns) when it last did. src is its source
	// (MaxUnauthPerSource); listed says it is in serverConn.unauth (under its mu).
	// peer is the peer whose keys its datagrams last opened under (set under the
	// server's mu; read without it by Authenticated), and counted says it is in
	// serverConn.byPeer and bySource (under the server's mu).
	helloBy time.Time
	authed  atomic.Bool
	authAt  atomic.Int64
	src     netip.Prefix
	listed  bool
	peer    atomic.Pointer[conn.PeerID]
	counted bool

	dead     chan struct{}
	deadOnce sync.Once
	errMu    sync.Mutex
	err      error
	done     sync.WaitGroup // reader and writer

	txBytes, rxBytes atomic.Uint64
}

// newLink wraps a connection; its read buffer starts at readBuffer bytes and grows
// to the configured ReadBuffer when it is authenticated.
func newLink(t *Transport, b *base, nc net.Conn, q *outq, remote netip.AddrPort, local netip.Addr, kind Kind, readBuffer int) *link {
	l := &link{
		t: t, b: b, nc: nc, q: q, remote: remote, local: local, kind: kind,
		since:      time.Now(),
		fr:         newFrameReader(min(readBuffer, t.cfg.ReadBuffer)),
		readBuffer: t.cfg.ReadBuffer,
		dead:       make(chan struct{}),
	}
	if a, ok := nc.LocalAddr().(*net.TCPAddr); ok {
		l.laddr = unmap(a.AddrPort())
	}
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		l.raddr = unmap(a.AddrPort())
	}
	return l
}

func unmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// start launches the reader and writer; the writer sends the hello first.
func (l *link) start() {
	l.done.Add(2)
	l.b.wg.Add(2)
	go l.readLoop()
	go l.writeLoop()
}

// fail ends the link once, with the reason; it is safe from any goroutine.
func (l *link) fail(err error) {
	l.deadOnce.Do(func() {
		l.errMu.Lock()
		l.err = err
		l.errMu.Unlock()
		close(l.dead)
		l.nc.Close()
		l.t.disconnects.Add(1)
		switch {
		case isPeerError(err):
			l.t.badPeers.Add(1)
			l.t.logRated(true, "stream peer disconnected: bad framing", "remote", l.raddr.String(), "local", l.laddr.String(), "err", err.Error())
		case l.b.closed.Load() || errors.Is(err, net.ErrClosed):
		default:
			l.t.logRated(false, "stream connection closed", "remote", l.raddr.String(), "local", l.laddr.String(), "err", err.Error())
		}
	})
}

func (l *link) isDead() bool {
	select {
	case <-l.dead:
		return true
	default:
		return false
	}
}

func (l *link) lastErr() error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return l.err
}

func (l *link) readLoop() {
	defer l.b.wg.Done()
	defer l.done.Done()
	// A server connection must deliver its hello and a first frame by helloBy;
	// the deadline is lifted at that frame.
	waitFirst := !l.helloBy.IsZero()
	if waitFirst {
		if err := l.nc.SetReadDeadline(l.helloBy); err != nil {
			l.fail(err)
			return
		}
	}
	big := len(l.fr.buf) >= l.readBuffer
	for {
		for {
			_, ok, err := l.fr.peek()
			if err != nil {
				l.fail(err)
				return
			}
			if l.onHello != nil && l.fr.hello {
				go l.onHello()
				l.onHello = nil
			}
			if ok {
				break
			}
			if !big && l.authed.Load() {
				l.fr.grow(l.readBuffer)
				big = true
			}
			if err := l.fr.fill(l.nc); err != nil {
				switch {
				case errors.Is(err, io.EOF):
					err = errors.New("closed by the peer")
				case errors.Is(err, syscall.ECONNRESET):
					err = errors.New("reset by the peer")
				case waitFirst && errors.Is(err, os.ErrDeadlineExceeded):
					l.t.helloTimeouts.Add(1)
					what := "no hello"
					if l.fr.hello {
						what = "no complete frame"
					}
					err = errors.New(what + " within " + l.t.cfg.HelloTimeout.String() + " of connecting")
				}
				l.fail(err)
				return
			}
		}
		if waitFirst {
			waitFirst = false
			if err := l.nc.SetReadDeadline(time.Time{}); err != nil {
				l.fail(err)
				return
			}
		}
		select {
		case r := <-l.b.reqs:
			l.deliver(r)
			r.done <- struct{}{}
		case <-l.dead:
			return
		case <-l.b.closing:
			l.fail(net.ErrClosed)
			return
		}
	}
}

// deliver copies every complete frame that is buffered into r (at least one: the
// reader checked before taking r). A frame that fails the check stays in the buffer
// for the read loop to condemn.
func (l *link) deliver(r *readReq) {
	n := 0
	var bytes uint64
	for n < len(r.bufs) {
		d, ok, err := l.fr.peek()
		if !ok || err != nil {
			break
		}
		r.sizes[n] = copy(r.bufs[n], d) // a datagram larger than the buffer is truncated, as over UDP
		r.eps[n] = conn.Endpoint{Remote: l.remote, Local: l.local}
		bytes += uint64(len(d))
		l.fr.consume(d)
		n++
	}
	r.n = n
	l.rxBytes.Add(bytes)
}

func (l *link) writeLoop() {
	defer l.b.wg.Done()
	defer l.done.Done()
	if _, err := l.nc.Write(wire.StreamHello[:]); err != nil {
		l.fail(err)
		return
	}
	for {
		for {
			b := l.q.take()
			if b == nil {
				break
			}
			_, err := l.nc.Write(b)
			l.txBytes.Add(uint64(len(b)))
			l.q.done(b)
			if err != nil {
				l.fail(err)
				return
			}
		}
		select {
		case <-l.q.wake:
		case <-l.dead:
			return
		}
	}
}

// closeFlushTime bounds how long Close waits for queued frames to reach the kernel:
// the engine's last words (CLOSE frames) should get out, a stuck peer must not hold
// up a shutdown.
const closeFlushTime = 200 * time.Millisecond

// flush waits until everything queued on l has been handed to the kernel, l died,
// or the deadline passed. What the kernel holds it still sends after Close.
func (l *link) flush(deadline time.Time) {
	l.q.signal()
	for time.Now().Before(deadline) && !l.isDead() {
		l.q.mu.Lock()
		empty := len(l.q.bufs[0]) == 0 && len(l.q.bufs[1]) == 0
		l.q.mu.Unlock()
		if empty {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// touchedQueues collects the queues one WriteBatch filled, so each writer
// is woken once per batch rather than once per datagram.
type touchedQueues []*outq

func (t *touchedQueues) add(q *outq) {
	for _, x := range *t {
		if x == q {
			return
		}
	}
	*t = append(*t, q)
}

// signal wakes every collected queue's writer and forgets them (keeping
// the backing array, so a steady state does not allocate).
func (t *touchedQueues) signal() {
	for i, q := range *t {
		q.signal()
		(*t)[i] = nil
	}
	*t = (*t)[:0]
}
