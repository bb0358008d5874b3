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
