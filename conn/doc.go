// Package conn provides braid's path sockets: UDP sockets that move datagrams in
// batches so that a multipath tunnel pays one system call per batch rather than
// per packet.
//
// One Conn exists per local path. A path is pinned to its interface with
// SO_BINDTODEVICE (Options.Device) and/or a local address (Options.Addr), so the
// kernel cannot silently move a path's traffic to another uplink when routes
// change; that would defeat per-path measurement.
//
// Sockets bound to a wildcard address learn, for every datagram, the local
// address it arrived on (IP_PKTINFO / IPV6_PKTINFO) and report it in
// Endpoint.Local. Passing the same Endpoint back to WriteBatch makes the reply
// leave from that address: a multi-homed server must answer each client path
// from the address that path reached, or the client's NAT and its path
// bookkeeping see a different 4-tuple.
//
// Receiving uses recvmmsg through the socket's syscall.RawConn with headers,
// address and control buffers preallocated per Conn. golang.org/x/net's
// ReadBatch would also batch, but it returns every source address as a freshly
// allocated *net.UDPAddr, two heap allocations per datagram on the hottest path
// of the tunnel. Sending uses golang.org/x/net/ipv4 (or ipv6) PacketConn.WriteBatch
// (sendmmsg) with preallocated Messages and addresses, which does not allocate.
// In steady state neither direction allocates; BenchmarkLoopback and
// TestZeroAllocs check that.
//
// A dual-stack socket ("udp" on [::]) sees IPv4 peers as IPv4-mapped IPv6
// addresses; Endpoints always carry them unmapped (plain IPv4), so the engine
// can compare and hash addresses without caring which socket they came from.
//
// The subpackage conntest is an in-memory network with the same interface for
// engine tests.
package conn
