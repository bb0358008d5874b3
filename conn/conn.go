package conn

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
)

// Defaults for Options. They are variables so that tests and tools can tune
// them for a whole process.
var (
	// DefaultRecvBuf is the socket receive buffer in bytes when Options.RecvBuf
	// is 0. Bursts from several paths land on one socket at line rate while
	// the engine is busy decrypting; 4 MiB holds ~3000 full-size datagrams,
	// about 25 ms at 1 Gbit/s. As root the size is forced past
	// net.core.rmem_max (SO_RCVBUFFORCE); otherwise the kernel caps it there.
	DefaultRecvBuf = 4 << 20
	// DefaultSendBuf is the socket send buffer in bytes when Options.SendBuf is
	// 0; same reasoning as DefaultRecvBuf for bursts handed to sendmmsg.
	DefaultSendBuf = 4 << 20
	// DefaultBatchSize is the number of datagrams one ReadBatch/WriteBatch
	// moves at most when Options.BatchSize is 0. It matches the batch size of
	// the wireguard TUN device (conn.IdealBatchSize = 128) so one TUN read
	// fits one socket write.
	DefaultBatchSize = 128
)

// Endpoint is the address pair of one datagram.
type Endpoint struct {
	// Remote is the peer's address. IPv4 peers are always plain IPv4, also on
	// dual-stack sockets.
	Remote netip.AddrPort
	// Local, for sockets bound to a wildcard address, is the local address the
	// datagram arrived on; given to WriteBatch it selects the source address.
	// It is the zero Addr for sockets bound to a specific address.
	Local netip.Addr
}

// Conn is a batched UDP socket. ReadBatch may be called by one goroutine while
// others call WriteBatch; concurrent calls of the same method serialise.
type Conn interface {
	// ReadBatch blocks until at least one datagram is available and then
	// receives up to min(len(bufs), len(sizes), len(eps), BatchSize())
	// datagrams: datagram i into bufs[i], its length into sizes[i] and its
	// addresses into eps[i]. A datagram larger than its buffer is truncated.
	ReadBatch(bufs [][]byte, sizes []int, eps []Endpoint) (n int, err error)
	// WriteBatch sends bufs[i] to eps[i] for every i < len(bufs) (any number,
	// split into BatchSize chunks). A datagram the kernel refuses does not
	// stop the others; the first such error is returned.
	WriteBatch(bufs [][]byte, eps []Endpoint) error
	// LocalAddr is the bound address; for wildcard sockets its Addr is
	// unspecified (0.0.0.0 or ::).
	LocalAddr() netip.AddrPort
	// BatchSize is the most datagrams one call moves.
	BatchSize() int
	// Close releases the socket and unblocks ReadBatch with an error for which
	// errors.Is(err, net.ErrClosed) holds.
	Close() error
}

// Authenticator is implemented by a Conn that must learn which of its endpoints
// are genuine peers: the server Conn of the stream transports (conn/stream), which
// cannot authenticate anything itself and would otherwise keep any connection that
// sends well-formed frames. The engine type-asserts its Conns once and calls
// Authenticated(ep, peer) for a datagram that ReadBatch returned from ep when it
// has proven authentic (a data packet that opened under a session key), before or
// after handling it, naming the peer whose session key opened it. Calls are cheap
// (meant for every such datagram), safe concurrently with ReadBatch and
// WriteBatch, and ignore an endpoint the Conn no longer knows.
//
// The peer lets the Conn bound what one authenticated peer may hold: a client
// that holds a key is still not trusted with every connection slot.
type Authenticator interface {
	Authenticated(ep Endpoint, peer PeerID)
}

// PeerID names an authenticated peer: its static public key.
type PeerID [32]byte

// Options configures Listen.
type Options struct {
	// Device pins the socket to this interface with SO_BINDTODEVICE; "" = any.
	Device string
	// Addr is the local address and port to bind. The zero value binds the
	// wildcard address and an ephemeral port.
	Addr netip.AddrPort
	// Network is "udp4", "udp6" or "udp". If empty it is derived from Addr:
	// an IPv4 address gives "udp4", an IPv6 address "udp6", no address "udp".
	// "udp" with a wildcard address is a dual-stack socket on [::] that also
	// receives IPv4 (Go's net package makes it so, also for 0.0.0.0).
	Network string
	// RecvBuf and SendBuf are the socket buffer sizes in bytes; 0 selects
	// DefaultRecvBuf/DefaultSendBuf, a negative value keeps the system default.
	RecvBuf, SendBuf int
	// BatchSize is the most datagrams per ReadBatch/WriteBatch; 0 selects
	// DefaultBatchSize.
	BatchSize int
	// NoOffload turns UDP segmentation (GSO) and receive (GRO) offload off:
	// every datagram is its own message, as with a kernel that lacks them.
	NoOffload bool
	// ReusePort sets SO_REUSEPORT: several sockets bound to one address and
	// port (by the same user) share its traffic, the kernel keeping each
	// remote address and port on one of them, so each can have its reader.
	ReusePort bool
}

// Error is the error Listen returns: a one-line message for people, and the
// underlying cause (often a syscall.Errno such as syscall.EADDRINUSE,
// syscall.ENODEV or syscall.EPERM) for errors.Is.
type Error struct {
	Msg string
	Err error
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// ErrUnsupported is returned by Listen on systems other than Linux.
var ErrUnsupported = errors.New("conn: batched UDP sockets are implemented for Linux only")

// listenError turns a bind/setup failure into the one-line message the user
// sees. addr is what we tried to bind, e.g. "198.18.1.2:7000".
func listenError(addr string, err error) error {
	const network = "udp" // "udp4"/"udp6" in a message only distracts
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		msg := err.Error()
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Err != nil {
			msg = oe.Err.Error() // drop Go's own "listen udp4 …:" prefix
		}
		return &Error{Msg: "listen " + network + " " + addr + ": " + msg, Err: err}
	}
	switch errno {
	case syscall.EADDRINUSE:
		return &Error{Msg: "listen " + network + " " + addr + ": address already in use", Err: errno}
	case syscall.EADDRNOTAVAIL:
		return &Error{Msg: "listen " + network + " " + addr + ": address not available (not assigned to a local interface)", Err: errno}
	case syscall.EACCES:
		return &Error{Msg: "listen " + network + " " + addr + ": permission denied (ports below 1024 need CAP_NET_BIND_SERVICE)", Err: errno}
	}
	return &Error{Msg: "listen " + network + " " + addr + ": " + errno.Error(), Err: errno}
}

// deviceError explains a failed SO_BINDTODEVICE.
func deviceError(device string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENODEV:
			return &Error{Msg: `interface "` + device + `" not found`, Err: errno}
		case syscall.EPERM, syscall.EACCES:
			return &Error{Msg: `binding to interface "` + device + `" (SO_BINDTODEVICE) needs CAP_NET_RAW or CAP_NET_ADMIN`, Err: errno}
		}
	}
	return &Error{Msg: `binding to interface "` + device + `": ` + err.Error(), Err: err}
}
