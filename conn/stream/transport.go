package stream

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/braid-vpn/braid/conn"
)

// Transport opens stream Conns of one kind with one configuration and keeps their
// counters. A process normally has one.
type Transport struct {
	cfg Config

	// Counters, summed over every Conn of the Transport; see Counters.
	dropDown   atomic.Uint64 // datagrams written while the connection was down
	dropFull   atomic.Uint64 // datagrams that found the send queue full
	dropNoConn atomic.Uint64 // server: datagrams to an endpoint without a connection
	badPeers   atomic.Uint64 // connections closed for garbage or a truncated frame
	connects   atomic.Uint64 // client connections established
	dialFails  atomic.Uint64 // failed connection attempts
	accepts    atomic.Uint64 // server connections accepted
	rejects    atomic.Uint64 // server connections refused (MaxConns, MaxUnauthPerSource)
	evictions  atomic.Uint64 // unauthenticated server connections closed for a new one
	// capEvictions: authenticated server connections closed because their peer
	// or source went over MaxConnsPerPeer or MaxConnsPerSource.
	capEvictions atomic.Uint64
	disconnects  atomic.Uint64 // connections that ended, for whatever reason
	idleClosed   atomic.Uint64 // server connections not authenticated for IdleTimeout
	// helloTimeouts, authTimeouts: server connections closed for no first frame
	// within HelloTimeout, not authenticated within AuthTimeout.
	helloTimeouts, authTimeouts atomic.Uint64

	logMu      sync.Mutex
	logNext    time.Time
	logSkipped int
}

// New checks that the kernel can open streams of cfg.Kind (MPTCP may be missing or
// switched off, see ErrMPTCPDisabled) and that cfg.Congestion is accepted, so a
// misconfiguration stops `braid up` with one clear line before anything is set up.
func New(cfg Config) (*Transport, error) {
	cfg = cfg.withDefaults()
	switch cfg.Kind {
	case TCP, MPTCP:
	default:
		return nil, fmt.Errorf("stream: unknown kind %d", cfg.Kind)
	}
	if err := probe(cfg); err != nil {
		return nil, err
	}
	return &Transport{cfg: cfg}, nil
}

// Kind returns the transport's kind.
func (t *Transport) Kind() Kind { return t.cfg.Kind }

// Counters returns the transport's event counters under the names braid status and
// the metrics use: keys starting with "drop_" count dropped datagrams, the others
// events.
func (t *Transport) Counters() map[string]uint64 {
	return map[string]uint64{
		"drop_stream_down":          t.dropDown.Load(),
		"drop_stream_queue_full":    t.dropFull.Load(),
		"drop_stream_no_connection": t.dropNoConn.Load(),
		"stream_bad_peer":           t.badPeers.Load(),
		"stream_connects":           t.connects.Load(),
		"stream_connect_failures":   t.dialFails.Load(),
		"stream_accepts":            t.accepts.Load(),
		"stream_rejects":            t.rejects.Load(),
		"stream_evictions":          t.evictions.Load(),
		"stream_cap_evictions":      t.capEvictions.Load(),
		"stream_disconnects":        t.disconnects.Load(),
		"stream_idle_closed":        t.idleClosed.Load(),
		"stream_hello_timeouts":     t.helloTimeouts.Load(),
		"stream_auth_timeouts":      t.authTimeouts.Load(),
	}
}

// logRated logs at most once per LogInterval; the next line that passes says how
// many were skipped. A peer spraying garbage from many connections cannot flood
// the log.
func (t *Transport) logRated(warn bool, msg string, args ...any) {
	t.logMu.Lock()
	now := time.Now()
	if now.Before(t.logNext) {
		t.logSkipped++
		t.logMu.Unlock()
		return
	}
	t.logNext = now.Add(t.cfg.LogInterval)
	skipped := t.logSkipped
	t.logSkipped = 0
	t.logMu.Unlock()
	if skipped > 0 {
		args = append(args, "suppressed", skipped)
	}
	if warn {
		t.cfg.Logger.Warn(msg, args...)
	} else {
		t.cfg.Logger.Info(msg, args...)
	}
}

// readReq is one ReadBatch call handed to whichever connection has frames ready.
type readReq struct {
	bufs  [][]byte
	sizes []int
	eps   []conn.Endpoint
	n     int
	done  chan struct{}
}

// base is what client and server Conns share: the read hand-off and closing.
type base struct {
	t     *Transport
	local netip.AddrPort
	batch int

	// reqs is unbuffered: a ReadBatch call waits in it until a connection with a
	// complete frame takes the request, fills it and signals done.
	reqs chan *readReq
	rmu  sync.Mutex
	req  readReq

	closing   chan struct{}
	closeOnce sync.Once
	closed    atomic.Bool
	wg        sync.WaitGroup
}

func (b *base) init(t *Transport, local netip.AddrPort, batch int) {
	if batch <= 0 {
		batch = conn.DefaultBatchSize
	}
	b.t = t
	b.local = local
	b.batch = batch
	b.reqs = make(chan *readReq)
	b.req.done = make(chan struct{}, 1)
	b.closing = make(chan struct{})
}

func (b *base) closedErr(op string) error {
	return &net.OpError{Op: op, Net: b.t.cfg.Kind.String(), Addr: net.TCPAddrFromAddrPort(b.local), Err: net.ErrClosed}
}

// ReadBatch implements conn.Conn: it waits for a connection with complete frames and
// returns as many of them as fit.
func (b *base) ReadBatch(bufs [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
	n := min(len(bufs), len(sizes), len(eps), b.batch)
	if n == 0 {
		return 0, nil
	}
	if b.closed.Load() {
		return 0, b.closedErr("read")
	}
	b.rmu.Lock()
	defer b.rmu.Unlock()
	r := &b.req
	r.bufs, r.sizes, r.eps, r.n = bufs[:n], sizes[:n], eps[:n], 0
	select {
	case b.reqs <- r:
	case <-b.closing:
		r.bufs, r.sizes, r.eps = nil, nil, nil
		return 0, b.closedErr("read")
	}
	<-r.done // whoever took the request completes it without blocking
	n = r.n
	r.bufs, r.sizes, r.eps = nil, nil, nil
	return n, nil
}

func (b *base) LocalAddr() netip.AddrPort { return b.local }
func (b *base) BatchSize() int            { return b.batch }

// errBadWrite is returned for a WriteBatch whose endpoints do not cover its buffers.
var errBadWrite = errors.New("stream: WriteBatch with fewer endpoints than datagrams")
