package conntest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/braid-vpn/braid/conn"
)

// Config tunes a Network. DefaultConfig documents the defaults.
type Config struct {
	// Seed seeds the per-link random generators (loss, duplication).
	Seed uint64
	// BatchSize is what Conn.BatchSize reports and the most datagrams one
	// ReadBatch returns.
	BatchSize int
	// RecvQueue is how many datagrams a Conn holds unread before dropping
	// new ones, like a full socket receive buffer.
	RecvQueue int
	// ManualClock makes time virtual: Now starts at Epoch and moves only in
	// Advance, which also delivers the datagrams that became due.
	ManualClock bool
}

// Epoch is the start of virtual time with Config.ManualClock.
var Epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// DefaultConfig: Seed 1 (reproducible unless a test asks otherwise),
// BatchSize 64, RecvQueue 4096 datagrams, real time.
func DefaultConfig() Config {
	return Config{Seed: 1, BatchSize: 64, RecvQueue: 4096}
}

// LinkOptions describe one direction between two addresses.
type LinkOptions struct {
	Delay     time.Duration // one-way propagation delay
	Loss      float64       // probability in [0,1] that a datagram is lost after serialization
	Down      bool          // drop everything, also datagrams already in flight when they arrive
	Rate      float64       // bit/s of the FIFO serializer; 0 = infinitely fast
	Queue     int           // bytes allowed to wait for the serializer (Rate > 0); 0 = unlimited
	Duplicate float64       // probability in [0,1] that a datagram arrives twice
}

// LinkStats count what happened on one link.
type LinkStats struct {
	Sent       uint64 // datagrams offered to the link
	Delivered  uint64 // datagrams handed to a receiving Conn (duplicates included)
	Lost       uint64 // random loss
	QueueDrops uint64 // tail drops at the serializer
	DownDrops  uint64 // dropped because the link was down (at send or at arrival)
	Duplicated uint64
	NoListener uint64 // arrived where no Conn listens
	RecvDrops  uint64 // receiving Conn's queue was full
}

// Network is a set of conns and the links between their addresses. All
// methods are safe for concurrent use.
type Network struct {
	cfg Config

	mu          sync.Mutex
	closed      bool
	now         time.Time // virtual time (ManualClock)
	seq         uint64
	defaultLink LinkOptions
	links       map[[2]netip.Addr]*link
	conns       map[bindKey]*Conn
	ifaces      map[string][]netip.Addr
	nextPort    uint16
	inflight    packetHeap
	pumping     bool
	wake        chan struct{}

	capture atomic.Pointer[func(from, to netip.AddrPort, payload []byte)]
	filter  atomic.Pointer[func(from, to netip.AddrPort, payload []byte) bool]
}

type link struct {
	opt      LinkOptions
	explicit bool
	rng      *rand.Rand
	busy     time.Time // when the serializer is done with what it accepted
	stats    LinkStats
}

// bindKey identifies a bound Conn: address (unspecified for wildcard), port,
// device ("" = none).
type bindKey struct {
	addr   netip.Addr
	port   uint16
	device string
}

type packet struct {
	from, to netip.AddrPort
	at       time.Time
	seq      uint64
	data     []byte
}

var packetPool = sync.Pool{New: func() any { return &packet{data: make([]byte, 0, 2048)} }}

func newPacket(from, to netip.AddrPort, payload []byte) *packet {
	p := packetPool.Get().(*packet)
	p.from, p.to = from, to
	p.data = append(p.data[:0], payload...)
	return p
}

func freePacket(p *packet) {
	if cap(p.data) > 1<<16 {
		return
	}
	packetPool.Put(p)
}

// NewNetwork returns a network with DefaultConfig.
func NewNetwork() *Network { return NewNetworkConfig(DefaultConfig()) }

// NewNetworkConfig returns a network with cfg; zero fields take defaults.
func NewNetworkConfig(cfg Config) *Network {
	d := DefaultConfig()
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = d.BatchSize
	}
	if cfg.RecvQueue <= 0 {
		cfg.RecvQueue = d.RecvQueue
	}
	return &Network{
		cfg:      cfg,
		now:      Epoch,
		links:    make(map[[2]netip.Addr]*link),
		conns:    make(map[bindKey]*Conn),
		ifaces:   make(map[string][]netip.Addr),
		nextPort: 32768,
		wake:     make(chan struct{}, 1),
	}
}

// Now is the network's time: virtual with ManualClock, else time.Now.
func (n *Network) Now() time.Time {
	if !n.cfg.ManualClock {
		return time.Now()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.now
}

// Advance moves virtual time forward by d and delivers every datagram due by
// then, in arrival order. It panics without Config.ManualClock.
func (n *Network) Advance(d time.Duration) {
	if !n.cfg.ManualClock {
		panic("conntest: Advance needs Config.ManualClock")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.now = n.now.Add(d)
	for len(n.inflight) > 0 && !n.inflight[0].at.After(n.now) {
		n.deliverLocked(n.inflight.pop())
	}
}

// SetLink sets the options of the link from → to (one direction).
func (n *Network) SetLink(from, to netip.Addr, opt LinkOptions) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.linkLocked(from.Unmap(), to.Unmap())
	l.opt, l.explicit = opt, true
}

// Link returns the options in force for from → to.
func (n *Network) Link(from, to netip.Addr) LinkOptions {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.optLocked(n.linkLocked(from.Unmap(), to.Unmap()))
}

// SetDefaultLink sets the options of every link that SetLink never touched.
func (n *Network) SetDefaultLink(opt LinkOptions) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.defaultLink = opt
}

// Stats returns the counters of the link from → to.
func (n *Network) Stats(from, to netip.Addr) LinkStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.linkLocked(from.Unmap(), to.Unmap()).stats
}

// Capture registers fn to see every datagram a Conn of this network sends,
// before link emulation (also those the link then drops); nil removes it.
// fn runs on the sending goroutine; payload is only valid during the call.
// Injected datagrams are not captured.
func (n *Network) Capture(fn func(from, to netip.AddrPort, payload []byte)) {
	if fn == nil {
		n.capture.Store(nil)
		return
	}
	n.capture.Store(&fn)
}

// SetFilter registers fn to decide, for every datagram a Conn sends (after
// Capture), whether it enters the link at all; false drops it. nil removes
// the filter. Same calling rules as Capture.
func (n *Network) SetFilter(fn func(from, to netip.AddrPort, payload []byte) (keep bool)) {
	if fn == nil {
		n.filter.Store(nil)
		return
	}
	n.filter.Store(&fn)
}

// Inject delivers a forged datagram to whatever Conn listens at to, as if
// sent from from, immediately and bypassing links, Capture and SetFilter.
func (n *Network) Inject(from, to netip.AddrPort, payload []byte) {
	from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
	to = netip.AddrPortFrom(to.Addr().Unmap(), to.Port())
	p := newPacket(from, to, payload)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		freePacket(p)
		return
	}
	n.seq++
	p.seq = n.seq
	n.receiveLocked(p, nil)
}

// AddInterface declares a named interface owning addrs, for ListenOptions
// with Options.Device.
func (n *Network) AddInterface(name string, addrs ...netip.Addr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, a := range addrs {
		n.ifaces[name] = append(n.ifaces[name], a.Unmap())
	}
}

// Listen binds a Conn to addr (port 0 picks a free port; an unspecified
// address listens on every address, :: also for IPv4). It panics if the
// address is taken: in a test that is a bug in the test. See TryListen.
func (n *Network) Listen(addr netip.AddrPort) *Conn {
	c, err := n.TryListen(addr)
	if err != nil {
		panic(err)
	}
	return c
}

// TryListen is Listen returning an error instead of panicking.
func (n *Network) TryListen(addr netip.AddrPort) (*Conn, error) {
	return n.listen(addr, "")
}

// ListenOptions is a stand-in for conn.Listen: it honours Options.Addr and
// Options.Device (an interface declared with AddInterface; a wildcard socket
// pinned to it receives on that interface's addresses and sends from the
// first of them matching the destination's family). Other fields are ignored.
func (n *Network) ListenOptions(opt conn.Options) (conn.Conn, error) {
	c, err := n.listen(opt.Addr, opt.Device)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (n *Network) listen(addr netip.AddrPort, device string) (*Conn, error) {
	a := addr.Addr().Unmap()
	if !a.IsValid() {
		a = netip.IPv6Unspecified()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("conntest: listen %v: %w", addr, net.ErrClosed)
	}
	if device != "" {
		if _, ok := n.ifaces[device]; !ok {
			return nil, &conn.Error{Msg: fmt.Sprintf("interface %q not found", device)}
		}
	}
	port := addr.Port()
	if port == 0 {
		for i := 0; ; i++ {
			if i == 65536 {
				return nil, fmt.Errorf("conntest: listen %v: no free port", addr)
			}
			p := n.nextPort
			n.nextPort++
			if n.nextPort == 0 {
				n.nextPort = 32768
			}
			if p != 0 && n.conns[bindKey{a, p, device}] == nil {
				port = p
				break
			}
		}
	}
	k := bindKey{a, port, device}
	if n.conns[k] != nil {
		return nil, &conn.Error{Msg: fmt.Sprintf("listen udp %v: address already in use", netip.AddrPortFrom(a, port))}
	}
	c := &Conn{
		net:    n,
		key:    k,
		local:  netip.AddrPortFrom(a, port),
		queue:  make([]*packet, n.cfg.RecvQueue),
		notify: make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	n.conns[k] = c
	return c, nil
}

// Close closes every Conn and discards datagrams in flight.
func (n *Network) Close() error {
	n.mu.Lock()
	n.closed = true
	conns := make([]*Conn, 0, len(n.conns))
	for _, c := range n.conns {
		conns = append(conns, c)
	}
	for _, p := range n.inflight {
		freePacket(p)
	}
	n.inflight = n.inflight[:0]
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
	for _, c := range conns {
		c.Close()
	}
	return nil
}

func (n *Network) optLocked(l *link) LinkOptions {
	if l.explicit {
		return l.opt
	}
	return n.defaultLink
}

func (n *Network) linkLocked(from, to netip.Addr) *link {
	k := [2]netip.Addr{from, to}
	l := n.links[k]
	if l == nil {
		// The stream of a link depends on the seed and its addresses only,
		// not on the order in which links were first used.
		b1, _ := from.MarshalBinary()
		b2, _ := to.MarshalBinary()
		s2 := fnv64(append(append(b1, '>'), b2...))
		l = &link{rng: rand.New(rand.NewPCG(n.cfg.Seed, s2))}
		n.links[k] = l
	}
	return l
}

// fnv64 is FNV-1a: stable across processes, unlike maphash.
func fnv64(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

func headerLen(a netip.Addr) int {
	if a.Is4() {
		return 28
	}
	return 48
}

// sendLocked runs one datagram through the link model.
func (n *Network) sendLocked(p *packet, now time.Time) {
	l := n.linkLocked(p.from.Addr(), p.to.Addr())
	opt := n.optLocked(l)
	l.stats.Sent++
	if opt.Down {
		l.stats.DownDrops++
		freePacket(p)
		return
	}
	at := now
	if opt.Rate > 0 {
		size := len(p.data) + headerLen(p.to.Addr())
		start := now
		if l.busy.After(start) {
			start = l.busy
		}
		if opt.Queue > 0 {
			backlog := float64(start.Sub(now)) / float64(time.Second) * opt.Rate / 8
			if backlog+float64(size) > float64(opt.Queue) {
				l.stats.QueueDrops++
				freePacket(p)
				return
			}
		}
		l.busy = start.Add(time.Duration(float64(size) * 8 / opt.Rate * float64(time.Second)))
		at = l.busy
	}
	if opt.Loss > 0 && l.rng.Float64() < opt.Loss {
		l.stats.Lost++
		freePacket(p)
		return
	}
	at = at.Add(opt.Delay)
	var dup *packet
	if opt.Duplicate > 0 && l.rng.Float64() < opt.Duplicate {
		l.stats.Duplicated++
		dup = newPacket(p.from, p.to, p.data)
	}
	for _, q := range []*packet{p, dup} {
		if q == nil {
			continue
		}
		n.seq++
		q.seq, q.at = n.seq, at
		if !at.After(now) && (len(n.inflight) == 0 || n.inflight[0].at.After(now)) {
			n.receiveLocked(q, l)
			continue
		}
		n.inflight.push(q)
		if !n.cfg.ManualClock {
			if !n.pumping {
				n.pumping = true
				go n.pump()
			} else if n.inflight[0] == q {
				select {
				case n.wake <- struct{}{}:
				default:
				}
			}
		}
	}
}

// deliverLocked hands a datagram whose arrival time has come to its link's
// far end, unless the link went down meanwhile.
func (n *Network) deliverLocked(p *packet) {
	l := n.linkLocked(p.from.Addr(), p.to.Addr())
	if n.optLocked(l).Down {
		l.stats.DownDrops++
		freePacket(p)
		return
	}
	n.receiveLocked(p, l)
}

// receiveLocked finds the Conn listening at p.to: an exact binding first,
// then a wildcard pinned to an interface owning the address, then a plain
// wildcard (0.0.0.0 takes IPv4 only, :: both families).
func (n *Network) receiveLocked(p *packet, l *link) {
	dst := p.to.Addr()
	c := n.conns[bindKey{dst, p.to.Port(), ""}]
	if c == nil {
		for k, cc := range n.conns {
			if k.device == "" || k.port != p.to.Port() || !(k.addr == dst || k.addr.IsUnspecified() && familyOK(k.addr, dst)) {
				continue
			}
			for _, a := range n.ifaces[k.device] {
				if a == dst {
					c = cc
				}
			}
		}
	}
	if c == nil && dst.Is4() {
		c = n.conns[bindKey{netip.IPv4Unspecified(), p.to.Port(), ""}]
	}
	if c == nil {
		c = n.conns[bindKey{netip.IPv6Unspecified(), p.to.Port(), ""}]
	}
	if c == nil {
		if l != nil {
			l.stats.NoListener++
		}
		freePacket(p)
		return
	}
	if c.enqueue(p) {
		if l != nil {
			l.stats.Delivered++
		}
		return
	}
	if l != nil {
		l.stats.RecvDrops++
	}
	freePacket(p)
}

func familyOK(wild, dst netip.Addr) bool { return wild.Is6() || dst.Is4() }

// pump delivers datagrams on real time while any are in flight.
func (n *Network) pump() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		n.mu.Lock()
		if n.closed || len(n.inflight) == 0 {
			n.pumping = false
			n.mu.Unlock()
			return
		}
		now := time.Now()
		if !n.inflight[0].at.After(now) {
			for len(n.inflight) > 0 && !n.inflight[0].at.After(now) {
				n.deliverLocked(n.inflight.pop())
			}
			n.mu.Unlock()
			continue
		}
		wait := n.inflight[0].at.Sub(now)
		n.mu.Unlock()
		t.Reset(wait)
		select {
		case <-t.C:
		case <-n.wake:
		}
	}
}

// packetHeap is a min-heap by (at, seq): arrival order, FIFO among equals.
type packetHeap []*packet

func (h packetHeap) less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}

func (h *packetHeap) push(p *packet) {
	*h = append(*h, p)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s.less(i, parent) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

func (h *packetHeap) pop() *packet {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s[last] = nil
	s = s[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && s.less(l, m) {
			m = l
		}
		if r < len(s) && s.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// errClosed is returned by a closed Conn.
var errClosed = fmt.Errorf("conntest: %w", net.ErrClosed)
