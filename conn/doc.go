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
// Both directions call recvmmsg and sendmmsg through the socket's
// syscall.RawConn with headers, addresses and control buffers preallocated per
// Conn. golang.org/x/net's ReadBatch would also batch, but it returns every
// source address as a freshly allocated *net.UDPAddr, two heap allocations per
// datagram on the hottest path of the tunnel. In steady state neither direction
// allocates; BenchmarkLoopback and TestZeroAllocs check that.
//
// Where the kernel has them (Linux 4.18 and later for GSO, 5.0 for GRO), the
// sockets use UDP segmentation and receive offload (offload_linux.go):
// WriteBatch hands a run of consecutive equal-sized datagrams to one endpoint
// (the last may be shorter; at most 64 and 64 KiB) to the kernel as one message
// with UDP_SEGMENT, the datagrams in separate iovecs, so nothing is copied; with
// UDP_GRO the kernel may deliver such a run as one message, which ReadBatch cuts
// back into datagrams (one copy, from a 2 MiB per-socket set of 64 KiB
// buffers). A kernel without UDP_SEGMENT, or a send the route's device refuses
// with EIO, turns GSO off for the socket and the datagrams go one per message;
// Options.NoOffload turns both off. Offload() reports the state and how much
// was coalesced; the engine logs it once and `braid status` shows it. GSO does
// not make bursts longer: a run holds only datagrams that one WriteBatch
// already sent back to back with sendmmsg.
//
// A dual-stack socket ("udp" on [::]) sees IPv4 peers as IPv4-mapped IPv6
// addresses; Endpoints always carry them unmapped (plain IPv4), so the engine
// can compare and hash addresses without caring which socket they came from.
//
// The subpackage conntest is an in-memory network with the same interface for
// engine tests.
package conn
