// Package stream carries braid's datagrams over TCP or kernel MPTCP connections, for
// transport = "tcp" and "mptcp": a fallback where UDP is blocked, and the TCP-in-TCP
// and TCP-in-MPTCP tunnels the lab compares braid's multipath UDP with.
//
// The engine knows only conn.Conn, a batched datagram socket, so this package turns
// streams into one: each datagram travels as a frame (a 2-byte length, then the
// datagram; docs/protocol.md, "Stream transports") and the engine runs unchanged,
// with the same handshake, AEAD, acks and probes as over UDP.
//
// A client Conn (Transport.Client) stands for one local path. It keeps one stream
// connection per remote endpoint it is asked to write to, dialled from the path's
// device or address, and dials again by itself, with exponential backoff, when the
// connection fails. Datagrams written while a connection is being dialled wait in
// its send queue; while it is down between attempts they are dropped and counted.
// The engine's probes and handshake retries bring the session back, as they would
// after a UDP outage, and a server that lost the session (a restart) is handshaken
// with afresh.
//
// A server Conn (Transport.Server) listens on one address and accepts connections.
// Frames arriving on a connection carry the connection's remote address as
// Endpoint.Remote, so for the engine every connection is one client path (a client
// that reconnects arrives from a new port and is challenged like a new UDP source).
// A write to an endpoint with no connection is dropped.
//
// A peer that does not send braid's hello, sends a frame whose length or message
// type braid never sends, or ends the stream in the middle of a frame is
// disconnected, logged (rate-limited) and counted; every other connection carries on.
//
// Well-formed frames are easy to forge, so a server does not trust them to keep a
// connection: only the engine can authenticate a datagram, and it says so through
// conn.Authenticator, which the server Conn implements (Authenticated(ep), called
// for each datagram from ep that opened under a session key). Until the first such
// call a connection is on probation, and unauthenticated hosts are held to these
// limits (Config, with the defaults in DefaultConfig):
//
//   - HelloTimeout (5 s): the hello and one complete frame must arrive this soon
//     after the connection opens (a read deadline), or it is closed.
//   - AuthTimeout (10 s): a connection not authenticated this long after it
//     opened is closed, whatever it sends.
//   - IdleTimeout (30 s): an authenticated connection is closed when nothing on it
//     was authenticated for this long; frames alone do not refresh it.
//   - MaxUnauthPerSource (16): at most this many unauthenticated connections per
//     source, an IPv4 address or an IPv6 /64; more are closed on accept.
//     Authenticated connections do not count, so many clients behind one NAT are
//     not locked out.
//   - MaxConns (1024): at the bound a new connection takes the place of an
//     unauthenticated one, the oldest of the source holding the most of them;
//     a new connection never evicts an authenticated one, and when all are, it
//     is closed on accept.
//
// A key is no licence to hold every slot either. Authenticated(ep, peer) names the
// peer whose keys opened the datagram, and authenticated connections are capped
// per peer and per source; the cap is applied when a connection authenticates,
// by closing one of the same peer's or source's, never another client's:
//
//   - MaxConnsPerPeer (64, the engine's MaxPathsPerPeer): a peer's connection
//     beyond it replaces that peer's least recently authenticated one, which is
//     a dead one left by a reconnect when there is one.
//   - MaxConnsPerSource (MaxConns/2): beyond it the source's least recently
//     authenticated connection goes if it is unused (nothing authenticated for
//     5 s), else the least recently authenticated of the peer holding the most
//     there.
//
// A connection on probation costs little memory: its read buffer starts at 1 KiB
// (grown only as far as a frame needs) and takes ReadBuffer when it is
// authenticated, and its send queue is allocated at the first write to it. One
// host can therefore hold at most 16 slots for at most 10 s each, and a
// flood from many hosts cannot push out clients that authenticated. Each event is
// counted (stream_rejects, stream_evictions, stream_cap_evictions,
// stream_hello_timeouts, stream_auth_timeouts, stream_idle_closed).
//
// Costs are kept per batch, not per datagram: ReadBatch copies every complete frame
// one read(2) brought in, and WriteBatch appends frames to a per-connection queue
// that a writer goroutine hands to the kernel in one write(2). Neither direction
// allocates in steady state (BenchmarkLoopback, TestZeroAllocs).
//
// The send queue is bounded on purpose: MaxPending bytes in user space plus
// NotSentLowat bytes not yet sent by the kernel (TCP_NOTSENT_LOWAT). A stream never
// loses data, so a tunnel over one must drop somewhere for the inner TCP to see
// congestion; dropping at a short queue keeps the delay the engine measures, and the
// inner flows suffer, close to what the outer connection can carry.
//
// For MPTCP the tunnel uses one connection whose subflows the kernel spreads over
// the paths; PathManager configures the kernel's in-kernel path manager for that
// (endpoints and limits over generic netlink, as `ip mptcp` does). Status for either
// kind comes from TCP_INFO, MPTCP_INFO and MPTCP_FULL_INFO (InfoOf).
package stream
