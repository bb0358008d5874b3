// Package tunnel is braid's engine: it joins the TUN device, the Noise sessions, the
// path sockets, the schedulers and the reorder buffers.
//
// The two directions live in their own files, as in Nebula: inside.go carries
// packets read from the TUN device out over the paths, outside.go carries datagrams
// read from the path sockets in to the TUN device. handshake.go sets sessions up,
// timers.go runs everything that happens on a clock (acks, probes, liveness, rekey,
// reorder timeouts), paths.go builds and validates the set of paths.
package tunnel

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/braid-vpn/braid/budget"
	"github.com/braid-vpn/braid/conn"
	"github.com/braid-vpn/braid/fanout"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/noise"
	"github.com/braid-vpn/braid/tundev"
	"github.com/braid-vpn/braid/wire"
)

// Role says which end of the tunnel an engine is.
type Role uint8

const (
	Client Role = iota
	Server
)

func (r Role) String() string {
	if r == Server {
		return "server"
	}
	return "client"
}

// Params say how a session runs. The client sends its Params to the server in the
// handshake, so one config file chooses the behaviour of both directions.
type Params struct {
	Scheduler string
	Weights   []float64 // by client path id, for "weighted"
	// Tiers are the priority tiers by client path id (a server learns them from
	// the client; a client takes its own from LocalPath.Priority).
	Tiers       []uint8
	Reorder     string
	ReorderHold time.Duration // 0 = default
	Congestion  string        // a cc name, or CongestionAuto ("" = auto)
	// Recovery is the loss-recovery mode (recovery.Names; "" = auto). It
	// applies to both directions.
	Recovery string
}

// CongestionAuto chooses the congestion controller from the recovery mode: the
// loss-tolerant rate model when recovery is on, none when it is off.
const CongestionAuto = "auto"

// ClientPeer is a server's entry for one client (cryptokey routing).
type ClientPeer struct {
	Name       string
	PublicKey  keys.Key
	PSK        keys.Key
	AllowedIPs []netip.Prefix
	// Params, when Scheduler is set, pin this client's downstream behaviour instead
	// of what the client asks for.
	Params Params
}

// LocalPath is one local way out: an interface, a local address, or neither (the
// routing table decides).
type LocalPath struct {
	Device string
	Addr   netip.Addr
	// Priority is the path's tier: traffic goes to the lowest tier that has a
	// usable path, in both directions (the client sends its tiers to the server).
	Priority int
	// Budget is the path's data allowance; zero: unmetered (budget.go).
	Budget budget.Limit
}

func (l LocalPath) String() string {
	switch {
	case l.Device != "":
		return l.Device
	case l.Addr.IsValid():
		return l.Addr.String()
	}
	return "default"
}

// Config is everything an engine needs. The cmd layer builds it from the config file;
// tests build it directly with in-memory devices.
type Config struct {
	Role       Role
	PrivateKey keys.Key
	TUN        tundev.Device
	// Listen opens a path socket; conn.Listen in production, an in-memory network
	// in tests.
	Listen func(conn.Options) (conn.Conn, error)
	Logger *slog.Logger
	// NoOffload turns the kernel's segmentation offloads off: UDP GSO/GRO on
	// the path sockets (conn.Options.NoOffload) and the room to coalesce TUN
	// writes (tundev.Stager).
	NoOffload bool

	// Client side.
	ServerPublicKey keys.Key
	// ServerAllowedIPs are the inner source prefixes accepted from the server: what
	// the client routes into the tunnel (its routes and its TUN subnet), as
	// WireGuard's allowed-IPs do. Empty accepts every source.
	ServerAllowedIPs []netip.Prefix
	PSK              keys.Key
	Servers          []netip.AddrPort
	LocalPaths       []LocalPath // empty: one unbound path; Device may be a pattern ("wwan*")
	// LinkEvents, when set, tells a client of interfaces that come, go or change
	// address (links.go); Interfaces lists the present ones (nil: the system's).
	LinkEvents <-chan LinkEvent
	Interfaces func() []string
	// BudgetState is the file where the paths' budget usage survives restarts;
	// "" keeps it in memory.
	BudgetState string
	Subflows    int // sockets per local path (distinct source ports)
	Params      Params

	// Server side.
	ListenAddrs   []netip.AddrPort
	Clients       []ClientPeer
	ServerID      uint32
	ServerIDBits  int
	HandshakeRate int // initiations per second per source address; 0 = unlimited

	Tunables Tunables
}

// Engine is a running tunnel endpoint.
type Engine struct {
	cfg    Config
	tun    tundev.Device
	log    *slog.Logger
	role   Role
	public keys.Key
	mtu    int
	epoch  time.Time // origin of the µs clock sent in inner headers
	tn     Tunables

	responder *noise.Responder // server only
	cookies   *noise.CookieJar // server only
	hsq       chan hsJob       // server only: initiations for the handshake worker
	bootEpoch uint64           // server: random per start, sent in responses
	// validated holds the remote endpoints of the server's validated paths
	// (netip.AddrPort → struct{}), for the handshake worker (knownEndpoint).
	validated sync.Map

	// mu guards the engine's structure (peers, routing, sockets). Lock order: mu
	// before any peer's mu; idxMu is a leaf lock that may be taken under either.
	mu      sync.RWMutex
	peers   []*peer
	byKey   map[keys.Key]*peer
	allowed atomic.Pointer[allowedIPs]
	conns   []*connState
	server  *peer // client only: the one peer
	// waiting maps a client's local paths that have no socket yet (interface
	// absent or without address) to why (links.go).
	waiting map[string]string
	usage   map[string]budgetUsage // client: budget usage read from BudgetState
	usageW  usageWriter            // client: orders the writes of BudgetState

	idxMu   sync.RWMutex
	indices map[uint32]indexEntry // receiver session index → peer and keys
	// idxGen counts changes of indices (setIndex, dropIndex, under idxMu), so
	// that a reader goroutine may keep the entry it looked up last and use it
	// without the lock while the count stands (inbound.lookupIndex).
	idxGen atomic.Uint64

	counters counters
	pool     bufPool
	crypto   *fanout.Pool // seals and opens batches beside their goroutines (nil: on them)

	closing chan struct{}
	wg      sync.WaitGroup
	closeMu sync.Mutex
	closed  bool
}

// indexEntry resolves a receiver index to its peer and keypair. kp is nil for a
// client's pending initiation.
type indexEntry struct {
	peer *peer
	kp   *noise.Keypair
}

// connState is one local path socket.
type connState struct {
	c      conn.Conn
	idx    int
	local  LocalPath
	sub    int
	spec   socketSpec // client sockets
	closed bool
	// auth, when the socket has one, is told of every datagram that authenticated,
	// so a stream server keeps only connections that carry a session alive.
	auth conn.Authenticator
	out  outQueue // datagrams sealed for this socket, in order (send.go)
	// lead is the first socket of this one's listen address when several
	// share it (Tunables.ListenReaders); nil otherwise.
	lead *connState
}

// pathSock is the socket a path is known by (pathKey, migratePath): the first
// of a listen address's SO_REUSEPORT group, whose sockets are one address to
// the clients (the kernel may deliver a client's new address and port to any
// of them), else the socket itself.
func (cs *connState) pathSock() *connState {
	if cs.lead != nil {
		return cs.lead
	}
	return cs
}

// New builds an engine; Start runs it.
func New(cfg Config) (*Engine, error) {
	if cfg.TUN == nil {
		return nil, errors.New("tunnel: no TUN device")
	}
	if cfg.Listen == nil {
		cfg.Listen = conn.Listen
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Tunables.Tick == 0 {
		cfg.Tunables = DefaultTunables()
	}
	if cfg.Subflows <= 0 {
		cfg.Subflows = 1
	}
	if cfg.PrivateKey.IsZero() {
		return nil, errors.New("tunnel: no private key")
	}
	mtu, err := cfg.TUN.MTU()
	if err != nil {
		return nil, fmt.Errorf("tunnel: reading TUN MTU: %w", err)
	}
	e := &Engine{
		cfg:     cfg,
		tun:     cfg.TUN,
		log:     cfg.Logger,
		role:    cfg.Role,
		public:  cfg.PrivateKey.Public(),
		mtu:     mtu,
		epoch:   time.Now(),
		tn:      cfg.Tunables,
		byKey:   make(map[keys.Key]*peer),
		indices: make(map[uint32]indexEntry),
		closing: make(chan struct{}),
	}
	e.pool.init(bufSize(mtu))
	switch cfg.Role {
	case Client:
		if len(cfg.Servers) == 0 {
			return nil, errors.New("tunnel: client has no server addresses")
		}
		p, err := e.newPeer("server", cfg.ServerPublicKey, cfg.PSK, cfg.ServerAllowedIPs, cfg.Params, true)
		if err != nil {
			return nil, err
		}
		e.server = p
		e.loadUsage()
		e.peers = []*peer{p}
		e.byKey[p.pub] = p
		if len(cfg.ServerAllowedIPs) > 0 {
			e.allowed.Store(buildAllowedIPs(e.peers))
		}
	case Server:
		e.responder = noise.NewResponder(cfg.PrivateKey, noise.ResponderConfig{
			RatePerSecond:   cfg.HandshakeRate,
			Budget:          e.tn.HandshakeBudget,
			ReplayWindow:    cfg.Tunables.ReplayWindow,
			ResponsePayload: e.responsePayload,
		})
		e.cookies = noise.NewCookieJar(e.public)
		e.hsq = make(chan hsJob, max(e.tn.HandshakeQueue, 8))
		var b [8]byte
		for e.bootEpoch == 0 {
			rand.Read(b[:])
			e.bootEpoch = binary.BigEndian.Uint64(b[:])
		}
		for _, c := range cfg.Clients {
			if err := e.addClient(c); err != nil {
				return nil, err
			}
		}
		e.allowed.Store(buildAllowedIPs(e.peers))
	}
	if err := e.openConns(); err != nil {
		e.closeConns()
		return nil, err
	}
	e.crypto = fanout.New(e.tn.CryptoWorkers, e.tn.CryptoMinPart)
	return e, nil
}

// bufSize is the size of every packet buffer: room for the largest inner packet plus
// the headers in front, the tag behind and a piggybacked ack.
func bufSize(mtu int) int {
	n := wire.DataPrefixLen + mtu + wire.AckFrameLen + wire.TagLen + 64
	if n < 2048 {
		n = 2048
	}
	return n
}

// Start launches the engine's goroutines.
func (e *Engine) Start() {
	e.mu.RLock()
	conns := append([]*connState(nil), e.conns...)
	e.mu.RUnlock()
	for _, cs := range conns {
		e.startReader(cs)
	}
	if o := offloadStatus(conns); o != nil {
		e.log.Info("UDP offload", "gso", o.GSO, "gro", o.GRO)
	}
	e.wg.Add(2)
	go e.routineInside()
	go e.routineTimers()
	if e.role == Server {
		e.wg.Add(1)
		go e.routineHandshakes()
	}
	if e.role == Client && e.cfg.LinkEvents != nil {
		e.wg.Add(1)
		go e.routineLinks(e.cfg.LinkEvents)
	}
	if e.role == Client {
		e.server.mu.Lock()
		e.server.initiateLocked(time.Now(), true)
		e.server.mu.Unlock()
	}
}

func (e *Engine) startReader(cs *connState) {
	e.wg.Add(1)
	go e.routineOutside(cs)
}

// Close ends every session politely (CLOSE frames), stops the goroutines and closes
// the sockets and the TUN device.
func (e *Engine) Close() error {
	e.closeMu.Lock()
	if e.closed {
		e.closeMu.Unlock()
		return nil
	}
	e.closed = true
	e.closeMu.Unlock()

	e.sendCloseAll()
	if e.role == Client {
		e.server.mu.Lock()
		snap := e.server.usageSnapshot()
		e.server.mu.Unlock()
		e.writeUsage(snap) // outside the peer lock: the write fsyncs
	}
	close(e.closing)
	e.closeConns()
	err := e.tun.Close()
	e.wg.Wait()
	e.crypto.Close()
	return err
}

func (e *Engine) isClosing() bool {
	select {
	case <-e.closing:
		return true
	default:
		return false
	}
}

// now returns the engine clock in µs mod 2^32, the unit of inner-header timestamps.
func (e *Engine) nowUs(now time.Time) uint32 { return uint32(now.Sub(e.epoch) / time.Microsecond) }

// PublicKey returns the engine's public key.
func (e *Engine) PublicKey() keys.Key { return e.public }
