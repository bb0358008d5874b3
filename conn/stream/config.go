package stream

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"time"
)

// Kind is the stream protocol.
type Kind uint8

const (
	TCP Kind = iota + 1
	MPTCP
)

func (k Kind) String() string {
	switch k {
	case TCP:
		return "tcp"
	case MPTCP:
		return "mptcp"
	}
	return "unknown"
}

// Config tunes a Transport. DefaultConfig documents every default; a zero field
// takes its default.
type Config struct {
	Kind Kind
	// Congestion is the TCP congestion control of braid's own stream sockets
	// (TCP_CONGESTION; for MPTCP every subflow uses it). "" keeps the system default
	// (net.ipv4.tcp_congestion_control). As root any built-in algorithm may be set,
	// even one that a network namespace's tcp_allowed_congestion_control omits.
	Congestion string
	// Fallbacks, on a client, are further addresses to dial, in order, when an
	// endpoint's own address does not answer; frames still carry the endpoint the
	// engine wrote to. The MPTCP tunnel, which dials one connection to the first
	// server address, lists the server's other addresses here.
	Fallbacks []netip.AddrPort
	Logger    *slog.Logger
	// Dial, when set, opens client connections instead of d.DialContext(ctx, "tcp",
	// address). Tests use it to dial inside a network namespace: a socket belongs to
	// the namespace of the thread that creates it, and the dialler runs on a
	// goroutine of its own.
	Dial func(ctx context.Context, d *net.Dialer, address string) (net.Conn, error)

	// OnEstablished, if set, is called (on a goroutine of its own) each time a client
	// connection is up and the server's hello has arrived on it, i.e. the server
	// has accepted it. cmd/braid announces MPTCP extra ports then
	// (PathManager.Announce).
	OnEstablished func()

	// DialTimeout bounds one connection attempt (default 5s).
	DialTimeout time.Duration
	// BackoffMin and BackoffMax bound the wait between failed attempts, doubled after
	// each failure (defaults 100ms and 5s). A connection that lived at least
	// BackoffReset (default 2s) resets it, so a server restart is retried quickly
	// but a server that accepts and drops at once is not hammered.
	BackoffMin, BackoffMax, BackoffReset time.Duration
	// IdleRedial: a client stops redialling a remote nothing was written to for this
	// long (default 30s); the next write starts again. The engine probes every path
	// every 400 ms, so only a remote the engine dropped goes quiet.
	IdleRedial time.Duration
	// IdleTimeout: a server closes an authenticated connection (see HelloTimeout)
	// that has not been authenticated again for this long (default 30s). Only the
	// engine's Authenticated calls count, not frames: well-formed frames are easy to
	// forge, and clients probe idle paths every 400 ms, each probe an authenticated
	// datagram, so a connection that carries none is dead or not a braid client.
	IdleTimeout time.Duration
	// HelloTimeout: a server closes a connection that has not delivered the hello
	// and one complete, well-formed frame this long after it was accepted (default
	// 5s). A braid client sends both at once, its hello and its handshake
	// initiation; a silent or trickling peer holds a slot for no longer than this.
	HelloTimeout time.Duration
	// AuthTimeout: a server closes a connection that has not been authenticated
	// this long after it was accepted (default 10s). A connection counts as
	// authenticated from the first time the engine reports an authenticated
	// datagram from it (conn.Authenticator, which the server Conn implements);
	// before that its frames do not keep it alive, however well-formed.
	AuthTimeout time.Duration
	// MaxPending is the user-space send queue per connection, in bytes (default
	// 64 KiB, at least 16 KiB): datagrams beyond it are dropped (counted as
	// drop_stream_queue_full). Together with NotSentLowat it is the queue in front of
	// the outer TCP: at 10 Mbit/s, 64 KiB + 32 KiB is ~80 ms.
	MaxPending int
	// NotSentLowat is TCP_NOTSENT_LOWAT (default 32 KiB): how many bytes the kernel
	// keeps queued but unsent. Without it the socket buffer autotunes to megabytes,
	// seconds of delay on a slow path, and the engine's path measurements (and the
	// inner TCP) see that queue. -1 leaves the system default.
	NotSentLowat int
	// UserTimeout is TCP_USER_TIMEOUT (default 15s): a connection whose sent data
	// stays unacknowledged this long is ended by the kernel, and a client dials
	// again, instead of TCP retrying for the quarter of an hour tcp_retries2 allows.
	// -1 leaves the system default.
	UserTimeout time.Duration
	// ReadBuffer is the per-connection read buffer (default 32 KiB). It grows once
	// if a peer sends a larger frame. A server connection starts with a 1 KiB buffer
	// (enough for the hello and a handshake) and takes the full size when it is
	// first authenticated, and its send queue (MaxPending) is allocated when the
	// engine first writes to it, so connections that never authenticate cost little
	// memory.
	ReadBuffer int
	// MaxConns bounds a server's connections per listen address (default 1024). At
	// the bound a new connection takes the place of an unauthenticated one (the
	// oldest of the source with the most of them), and is closed on accept if every
	// connection is authenticated.
	MaxConns int
	// MaxUnauthPerSource bounds a server's unauthenticated connections per source
	// (default 16): one source is an IPv4 address or an IPv6 /64. A connection from
	// a source that has that many is closed on accept.
	MaxUnauthPerSource int
	// MaxConnsPerPeer bounds a server's authenticated connections per peer (per
	// client key) and listen address (default 64). When a peer's connection
	// authenticates beyond it, the peer's least recently authenticated connection
	// is closed: a dead one left by a reconnect if there is one.
	MaxConnsPerPeer int
	// MaxConnsPerSource bounds a server's authenticated connections per source
	// (IPv4 address or IPv6 /64) and listen address, whatever keys they use
	// (default MaxConns/2). Beyond it the source's least recently authenticated
	// connection is closed if it is unused (nothing authenticated for 5 s), else
	// the least recently authenticated one of the peer holding the most there.
	MaxConnsPerSource int
	// LogInterval rate-limits the logs about failing peers and dials (default 1s):
	// at most one line per interval per Transport, with a count of those skipped.
	LogInterval time.Duration
}

// Server limits: what one unauthenticated host can hold of a server. The stream
// layer cannot authenticate anything; the engine can, and tells the server Conn
// (conn.Authenticator). Until then a connection is on probation: it must send the
// hello and a first frame within DefaultHelloTimeout and be authenticated within
// DefaultAuthTimeout, however many well-formed frames it sends, and one source may
// hold at most DefaultMaxUnauthPerSource such connections.
const (
	// DefaultMaxConns bounds a server's connections per listen address (file
	// descriptors, goroutines and buffers).
	DefaultMaxConns = 1024
	// DefaultMaxUnauthPerSource is the most unauthenticated connections one source
	// may hold at a time. A braid client opens one connection per path and server
	// address and authenticates it within a round trip or two; 16 leaves room for
	// several clients behind one NAT reconnecting at once (authenticated
	// connections do not count, so a NAT with more clients only staggers them),
	// while a single host cannot take more than 16 of the DefaultMaxConns slots,
	// nor, once the server is full, push out connections that authenticated.
	DefaultMaxUnauthPerSource = 16
	// DefaultMaxConnsPerPeer is the most authenticated connections one client key
	// may hold per listen address. A client needs one per path, server address
	// and subflow, and the engine keeps at most 64 paths per client
	// (tunnel.Tunables.MaxPathsPerPeer), so more would carry nothing; the cap
	// keeps a client, or a thief of its key, to 64 of the 1024 slots, and its
	// reconnects replace its own dead connections instead of waiting for
	// IdleTimeout.
	DefaultMaxConnsPerPeer = 64
	// SourceBits4 and SourceBits6 are the prefix lengths of one source for
	// MaxUnauthPerSource: an IPv4 address is one host (or one NAT), while an IPv6
	// host is given a whole /64 and can pick any address in it.
	SourceBits4 = 32
	SourceBits6 = 64
	// DefaultHelloTimeout: a client's hello and handshake initiation leave in its
	// first write, so they arrive within a round trip of the connection; 5 s
	// covers a slow path and a retransmitted segment or two.
	DefaultHelloTimeout = 5 * time.Second
	// DefaultAuthTimeout: a connection is authenticated by the first data packet
	// of a session, a round trip after the handshake (a few with a cookie
	// challenge, or a handshake retry after 1 s). 10 s allows for that on a slow
	// path; a client cut off dials again.
	DefaultAuthTimeout = 10 * time.Second
	// unauthReadBuffer is the read buffer of a server connection until it is
	// authenticated: the hello and a handshake initiation fit.
	unauthReadBuffer = 1 << 10
)

// DefaultConfig returns the defaults described on Config.
func DefaultConfig() Config {
	return Config{
		Kind:         TCP,
		DialTimeout:  5 * time.Second,
		BackoffMin:   100 * time.Millisecond,
		BackoffMax:   5 * time.Second,
		BackoffReset: 2 * time.Second,
		IdleRedial:   30 * time.Second,
		IdleTimeout:  30 * time.Second,
		HelloTimeout: DefaultHelloTimeout,
		AuthTimeout:  DefaultAuthTimeout,
		MaxPending:   64 << 10,
		NotSentLowat: 32 << 10,
		UserTimeout:  15 * time.Second,
		ReadBuffer:   32 << 10,
		MaxConns:     DefaultMaxConns,
		LogInterval:  time.Second,

		MaxUnauthPerSource: DefaultMaxUnauthPerSource,
		MaxConnsPerPeer:    DefaultMaxConnsPerPeer,
		// MaxConnsPerSource: 0 takes half of MaxConns, whatever that is set to.
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Kind == 0 {
		c.Kind = d.Kind
	}
	setD := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	setD(&c.DialTimeout, d.DialTimeout)
	setD(&c.BackoffMin, d.BackoffMin)
	setD(&c.BackoffMax, d.BackoffMax)
	setD(&c.BackoffReset, d.BackoffReset)
	setD(&c.IdleRedial, d.IdleRedial)
	setD(&c.IdleTimeout, d.IdleTimeout)
	setD(&c.HelloTimeout, d.HelloTimeout)
	setD(&c.AuthTimeout, d.AuthTimeout)
	setD(&c.LogInterval, d.LogInterval)
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = c.BackoffMin
	}
	if c.MaxPending <= 0 {
		c.MaxPending = d.MaxPending
	}
	c.MaxPending = max(c.MaxPending, 16<<10)
	if c.NotSentLowat == 0 {
		c.NotSentLowat = d.NotSentLowat
	}
	if c.UserTimeout == 0 {
		c.UserTimeout = d.UserTimeout
	}
	if c.ReadBuffer <= 0 {
		c.ReadBuffer = d.ReadBuffer
	}
	c.ReadBuffer = max(c.ReadBuffer, 4096)
	if c.MaxConns <= 0 {
		c.MaxConns = d.MaxConns
	}
	if c.MaxUnauthPerSource <= 0 {
		c.MaxUnauthPerSource = d.MaxUnauthPerSource
	}
	if c.MaxConnsPerPeer <= 0 {
		c.MaxConnsPerPeer = d.MaxConnsPerPeer
	}
	if c.MaxConnsPerSource <= 0 {
		// Half the slots: one host, with however many keys, leaves the other
		// half to everyone else.
		c.MaxConnsPerSource = max(c.MaxConns/2, 1)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}
