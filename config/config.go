// Package config reads braid's TOML configuration file.
//
// The file is strict: an unknown key, a value of the wrong type, a table that does
// not belong to the configured role, or a value out of range is an error, and every
// error is one line naming the file, the key and the problem. A VPN that silently
// ignores a misspelt "allowed_ips" is a VPN that routes traffic somewhere unexpected.
//
// The result is a set of plain structs with typed fields (netip, time.Duration,
// keys.Key) and every default already applied, so that the engine never has to
// know what an absent key means. Reloading (SIGHUP) is simply a second Load; the
// engine compares the old and new structs itself.
//
// Every key and its default is documented in docs/config.md.
package config

import (
	"log/slog"
	"net/netip"
	"time"

	"github.com/braid-vpn/braid/budget"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/noise"
	"github.com/braid-vpn/braid/reorder"
)

// Defaults and limits. They live in one block so that docs/config.md, the
// validation code and the tests all point at the same numbers.
const (
	// DefaultTunName is the TUN interface name when [tun] name is absent; the
	// default control socket is derived from it so that two instances with
	// different interfaces never share a socket.
	DefaultTunName = "braid0"

	// DefaultMTU leaves room under a 1500-byte path MTU for the outer IPv6
	// header (40), UDP (8) and braid's header and AEAD tag, with slack for
	// PPPoE and similar encapsulations on consumer links.
	DefaultMTU = 1380
	// MinMTU is the IPv4 minimum reassembly size; MaxMTU is a common jumbo frame.
	MinMTU = 576
	MaxMTU = 9000
	// MinMTUIPv6 applies when the tunnel carries IPv6: RFC 8200 requires links
	// to carry 1280-byte packets.
	MinMTUIPv6 = 1280

	// DefaultSubflowsPerPath opens one UDP socket per (path, server) pair.
	// More subflows use distinct source ports, which helps when a network
	// balances flows over several links by 5-tuple (ndiffports).
	DefaultSubflowsPerPath = 1
	MaxSubflowsPerPath     = 16

	// DefaultTransport carries the tunnel over UDP, one socket per path: the
	// multipath tunnel. "tcp" and "mptcp" exist for networks that block UDP and as
	// the TCP-in-TCP and TCP-in-MPTCP baselines; docs/transports.md.
	DefaultTransport = "udp"

	DefaultScheduler = "earliest-arrival"
	DefaultReorder   = "adaptive"
	// DefaultCongestion "auto" is the loss-tolerant rate model ("rate") when
	// recovery is on and "none" when it is off (docs/recovery.md).
	DefaultCongestion = "auto"
	// DefaultRecovery "auto" recovers path losses inside the tunnel: repair
	// packets at the measured loss rate, resends for the rest (docs/recovery.md).
	DefaultRecovery = "auto"

	// DefaultFixedReorderHold is how long reorder = "fixed" holds a gap open.
	DefaultFixedReorderHold = 50 * time.Millisecond
	// DefaultAdaptiveReorderHold caps the hold that reorder = "adaptive" may
	// choose. It is larger than the fixed default because the adaptive buffer
	// only waits as long as the measured path-delay skew demands, and paths
	// such as LTE next to fibre routinely differ by more than 100 ms.
	DefaultAdaptiveReorderHold = 200 * time.Millisecond
	MinReorderHold             = time.Millisecond
	MaxReorderHold             = reorder.MaxHold

	// MaxPriority is the highest path tier (client.priorities).
	MaxPriority = 7

	// DefaultHandshakeTimeout is the first retry of an unanswered handshake
	// initiation; later retries double it up to 8 s. Short, because the first
	// initiation of a client started before its server is routinely lost.
	DefaultHandshakeTimeout = time.Second
	MinHandshakeTimeout     = 100 * time.Millisecond
	MaxHandshakeTimeout     = time.Minute

	// DefaultHandshakeRate is the number of handshake initiations per second
	// the server answers from one source address before it stops doing
	// Diffie-Hellman work for it. 0 in the file disables the limit.
	DefaultHandshakeRate = noise.DefaultRatePerSecond
	MaxHandshakeRate     = 1_000_000
	// MaxListenSockets bounds server.listen_sockets.
	MaxListenSockets = 64

	// MaxServerIDBits is the most session-index bits a server id may take; 16
	// leaves 16 random bits, enough for 65536 sessions per server.
	MaxServerIDBits = 16

	// DefaultReplayWindow covers about 0.75 s of skew between paths at
	// 1 Gbit/s of 1380-byte packets; WireGuard's 8128 covers only ~90 ms.
	DefaultReplayWindow = noise.DefaultReplayWindow
	MinReplayWindow     = 1024
	MaxReplayWindow     = 1 << 24

	DefaultRekeyAfterTime  = noise.RekeyAfterTime
	DefaultRejectAfterTime = noise.RejectAfterTime
	MinRekeyAfterTime      = time.Second

	// DefaultRekeyAfterPackets: see noise.DefaultRekeyAfterMessages.
	DefaultRekeyAfterPackets = noise.DefaultRekeyAfterMessages
	MinRekeyAfterPackets     = 1 << 16
	// RejectAfterPackets bounds rekey_after_packets (it must be below 2^60,
	// WireGuard's REKEY_AFTER_MESSAGES). The keys themselves refuse to seal at
	// noise.RejectAfterMessages (2^64 − 2^32), far beyond it.
	RejectAfterPackets = int64(noise.RekeyAfterMessages)

	DefaultLogLevel = "info"
	// DefaultOffload: the kernel's segmentation offloads are used where the
	// kernel and devices have them (each falls back on its own when not).
	DefaultOffload = true
	// AutoCryptoWorkers: crypto_workers left unset, the engine's default
	// (tunnel.DefaultTunables). MaxCryptoWorkers bounds the key.
	AutoCryptoWorkers = -1
	MaxCryptoWorkers  = 256

	// DefaultSocketDir holds control sockets; it is created 0750 on start.
	DefaultSocketDir = "/run/braid"
	// MaxSocketPath is the longest unix socket path Linux accepts (sun_path
	// is 108 bytes including the terminating NUL).
	MaxSocketPath = 107
)

// Name lists accepted by the config. They are plain strings here, not imported
// from the sched, reorder and cc packages, so that the config can be parsed and
// validated without linking the data path (and so that those packages can test
// that they implement every name listed here).
var (
	Transports  = []string{"udp", "tcp", "mptcp"}
	Schedulers  = []string{"roundrobin", "weighted", "minrtt", "rtt-aware", "earliest-arrival", "redundant"}
	Reorders    = []string{"off", "fixed", "adaptive"}
	Congestions = []string{"none", "reno", "cubic", "lia", "olia", "balia", "wvegas", "coupled", "ewtcp", "rate"}
	// CongestionChoices is what the congestion key accepts: "auto" or an
	// algorithm.
	CongestionChoices = append([]string{"auto"}, Congestions...)
	Recoveries        = []string{"auto", "retransmit", "fec", "off"}
	LogLevels         = []string{"debug", "info", "warn", "error"}
)

// Role says which side of the tunnel this process is.
type Role string

const (
	RoleClient Role = "client"
	RoleServer Role = "server"
)

// Config is a loaded, validated configuration with all defaults applied.
// Exactly one of Client and Server is non-nil, matching Role.
type Config struct {
	// Path is the file the config was read from, as given to Load or Parse.
	Path string
	Role Role

	// PrivateKeyFile is the resolved path of the key file (relative paths in
	// the file are relative to the config file's directory).
	PrivateKeyFile string
	PrivateKey     keys.Key
	// PublicKey is derived from PrivateKey, kept here because everything
	// that logs or reports identity needs it.
	PublicKey keys.Key

	// PresharedKeyFile is "" when not configured; PresharedKey is then zero,
	// which the Noise IKpsk2 handshake uses as "no extra secret" (as WireGuard).
	// On a server it is the default for clients without their own.
	PresharedKeyFile string
	PresharedKey     keys.Key

	LogLevel slog.Level
	// Offload uses the kernel's segmentation offloads on the data path
	// (DefaultOffload): UDP GSO and GRO on the path sockets, coalesced TUN
	// writes. Off, every datagram and every packet written to the TUN
	// crosses the kernel alone (for a device or driver that mishandles them,
	// or to compare); TUN reads still split the kernel's super-packets.
	Offload bool
	// CryptoWorkers is how many goroutines seal and open datagrams beside
	// those that handle them (0: none; AutoCryptoWorkers: the engine's
	// default).
	CryptoWorkers int

	Tun      Tun
	Client   *Client
	Server   *Server
	Security Security
	Control  Control

	// Warnings are problems that do not stop braid but that the operator
	// should fix: a key file other users may read, a metrics endpoint
	// reachable from the network. Each is one line naming the file, the key
	// and the problem, like an Error; braid up logs them at start and on
	// reload. nil when there are none.
	Warnings []string
}

// Tun describes the local TUN interface.
type Tun struct {
	Name string
	// Address holds interface addresses with their prefix length
	// (100.64.0.2/24): the address bits are kept, not masked.
	Address []netip.Prefix
	MTU     int
	// Routes are masked prefixes routed into the tunnel.
	Routes []netip.Prefix
}

// Client is the [client] table.
type Client struct {
	ServerPublicKey keys.Key
	// Servers are every address of the server; each path connects to each.
	Servers []netip.AddrPort
	// Paths are the local ends to send from. Empty means one path chosen by
	// the routing table.
	Paths []Path
	// SubflowsPerPath is the number of UDP sockets (source ports) per
	// (path, server) pair.
	SubflowsPerPath int
	Scheduler       string
	// Weights has one entry per subflow, in path-major order (see
	// SubflowCount), when Scheduler is "weighted"; nil otherwise. When the
	// file leaves it empty every weight is 1.
	Weights []float64
	Reorder string
	// ReorderHold is the fixed hold for reorder = "fixed", the upper bound of
	// the hold for "adaptive", and 0 for "off".
	ReorderHold time.Duration
	Congestion  string
	// Recovery is the loss-recovery mode (Recoveries).
	Recovery         string
	HandshakeTimeout time.Duration
	// BudgetState is the file where the paths' budget usage survives restarts
	// (client.budget_state); "" keeps it in memory only.
	BudgetState string
	// Transport is "udp", "tcp" or "mptcp"; the server must use the same (an
	// "mptcp" server also serves "tcp" clients).
	Transport string
	// TCPCongestion is the congestion control of the tunnel's own TCP/MPTCP
	// sockets; "" is the system default. Only with transport tcp or mptcp.
	TCPCongestion string
}

// SubflowCount is the number of (path, server, subflow) slots, which is also
// the length of Weights for the weighted scheduler. Slot i belongs to path
// i / (len(Servers)*SubflowsPerPath), server (i / SubflowsPerPath) % len(Servers)
// and subflow i % SubflowsPerPath.
func (c *Client) SubflowCount() int {
	paths := len(c.Paths)
	if paths == 0 {
		paths = 1
	}
	return paths * len(c.Servers) * c.SubflowsPerPath
}

// Path is one local end of the client: an interface name or a local address.
// Exactly one of Interface and Addr is set.
type Path struct {
	Interface string
	Addr      netip.Addr
	// Priority is the path's tier (client.priorities): traffic uses the
	// lowest tier that has a usable path; 0 = first.
	Priority int
	// Budget is the path's data allowance (client.budgets); zero: unmetered.
	Budget budget.Limit
}

// String returns the path as written in the config file.
func (p Path) String() string {
	if p.Interface != "" {
		return p.Interface
	}
	return p.Addr.String()
}

// Server is the [server] table.
type Server struct {
	Listen []netip.AddrPort
	// ServerID is placed in the top ServerIDBits bits of every receiver
	// session index this server allocates, so a stateless UDP load balancer
	// in front of several servers can send every path of a session (which
	// arrive from different source addresses) to the same server, as QUIC-LB
	// does with connection IDs. With ServerIDBits = 0 the whole index is random.
	ServerID     uint32
	ServerIDBits int
	// HandshakeRate is initiations per second answered per source address;
	// 0 means unlimited.
	HandshakeRate int
	// ListenSockets is how many sockets share each listen address
	// (SO_REUSEPORT), each with its reader; 0: the engine's default
	// (tunnel.DefaultListenReaders).
	ListenSockets int
	// Transport and TCPCongestion: as in Client.
	Transport     string
	TCPCongestion string
	Clients       []Peer
}

// Peer is one [[server.clients]] entry.
type Peer struct {
	// Name is an optional label for logs and status; "" when absent.
	Name      string
	PublicKey keys.Key
	// AllowedIPs are masked prefixes; no two peers' prefixes overlap.
	AllowedIPs []netip.Prefix
	// PresharedKeyFile is this client's own psk file, or the server-wide
	// one when the entry has none; PresharedKey is the effective key.
	PresharedKeyFile string
	PresharedKey     keys.Key
}

// Label is the name used for the peer in logs and status: its Name, or its
// public key when it has none.
func (p *Peer) Label() string {
	if p.Name != "" {
		return p.Name
	}
	return p.PublicKey.String()
}

// Security is the [security] table.
type Security struct {
	// ReplayWindow is in packets, a power of two (values in the file are
	// rounded up).
	ReplayWindow      int
	RekeyAfterTime    time.Duration
	RekeyAfterPackets uint64
	RejectAfterTime   time.Duration
}

// Control is the [control] table.
type Control struct {
	// Socket is the control socket path, resolved against the config
	// file's directory when relative.
	Socket string
	// Metrics is the host:port of the Prometheus endpoint, "" when off.
	Metrics string
	// Console is the host:port of the status page (package console), ""
	// when off. ConsoleToken, when set, is required of every request;
	// ConsoleCert and ConsoleKey (resolved like the other files) serve it
	// over TLS. Off loopback the parser requires all three.
	Console      string
	ConsoleToken string
	ConsoleCert  string
	ConsoleKey   string
}
