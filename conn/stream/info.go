package stream

import (
	"net/netip"
	"time"

	"github.com/braid-vpn/braid/conn"
)

// Info describes the stream connection under one endpoint of a Conn, for status.
type Info struct {
	// Kind is what the connection runs: an MPTCP connection to a server without
	// MPTCP falls back to TCP.
	Kind      Kind
	Connected bool
	// Local and Remote are the connection's own addresses; for MPTCP those of the
	// first subflow.
	Local, Remote netip.AddrPort
	Since         time.Time // when it connected; zero while down
	Connects      uint64    // connections made to this endpoint (client)
	LastError     string    // why the previous connection or attempt ended
	// TxBytes and RxBytes count the stream bytes of the current connection (frames
	// with their length prefixes).
	TxBytes, RxBytes uint64
	// TCP is the kernel's view of a TCP connection (nil for MPTCP or when
	// unavailable); MPTCP that of an MPTCP connection and its subflows.
	TCP   *TCPInfo
	MPTCP *MPTCPInfo
}

// TCPInfo is the part of struct tcp_info that status shows.
type TCPInfo struct {
	RTT, RTTVar   time.Duration
	Cwnd          uint32 // segments
	MSS           uint32
	Retransmits   uint32 // segments retransmitted, total
	BytesSent     uint64
	BytesReceived uint64
	BytesAcked    uint64
	BytesRetrans  uint64
	DeliveryRate  uint64 // bytes per second
	NotSent       uint32 // bytes queued but not sent
}

// MPTCPInfo is struct mptcp_info plus, where MPTCP_FULL_INFO exists (Linux 6.5+),
// one entry per subflow.
type MPTCPInfo struct {
	// Subflows is the number of subflows besides the first (mptcpi_subflows);
	// SubflowsMax the limit (ip mptcp limits).
	Subflows, SubflowsMax int
	AddAddrAccepted       int
	Fallback              bool // the connection fell back to plain TCP
	Token                 uint32
	// Connection-level counters (Linux 6.6+; zero on older kernels).
	BytesSent, BytesReceived, BytesAcked, BytesRetrans uint64
	Retransmits                                        uint32
	// SubflowList is empty when the kernel lacks MPTCP_FULL_INFO.
	SubflowList []Subflow
}

// Subflow is one TCP subflow of an MPTCP connection.
type Subflow struct {
	ID            uint32
	Local, Remote netip.AddrPort
	TCP           TCPInfo
}

// InfoOf returns the state of the connection a stream Conn keeps for remote; ok is
// false for any other Conn (UDP) or an endpoint the Conn does not know.
func InfoOf(c conn.Conn, remote netip.AddrPort) (Info, bool) {
	var l *link
	var in Info
	switch s := c.(type) {
	case *clientConn:
		s.mu.Lock()
		rs := s.remotes[remote]
		s.mu.Unlock()
		if rs == nil {
			return Info{}, false
		}
		in.Kind = s.t.cfg.Kind
		in.Connects = rs.connects.Load()
		if p := rs.lastErr.Load(); p != nil {
			in.LastError = *p
		}
		l = rs.link.Load()
	case *serverConn:
		s.mu.Lock()
		l = s.links[remote]
		s.mu.Unlock()
		if l == nil {
			return Info{}, false
		}
		in.Connects = 1
	default:
		return Info{}, false
	}
	if l == nil || l.isDead() {
		return in, true
	}
	in.Kind = l.kind
	in.Connected = true
	in.Local, in.Remote = l.laddr, l.raddr
	in.Since = l.since
	in.TxBytes, in.RxBytes = l.txBytes.Load(), l.rxBytes.Load()
	kernelInfo(l, &in)
	return in, true
}
