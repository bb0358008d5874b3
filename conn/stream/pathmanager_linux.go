//go:build linux

package stream

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"
)

// PMPath is a client's local path as the config names it: an interface, a local
// address, or both.
type PMPath struct {
	Device string
	Addr   netip.Addr
}

// PlannedEndpoint is an endpoint braid wants; AutoPort asks Apply to pick a free
// port (the extra subflows of subflows_per_path > 1 are joined to such ports).
type PlannedEndpoint struct {
	Endpoint
	AutoPort bool
	// Path names the config path it stands for, for logs.
	Path string
}

// ClientPlan works out what the kernel's path manager needs so that one MPTCP
// connection from this client uses every path:
//
//   - per path, an endpoint "ADDR dev IF subflow fullmesh": the kernel opens a
//     subflow from the path's address, bound to its interface, to the server
//     address the connection was opened to and to every address the server
//     announces (fullmesh), so with a server announcing its addresses the subflows
//     are the full mesh paths × server addresses;
//   - per path, subflowsPerPath−1 endpoints "ADDR port P dev IF signal": the client
//     announces its address once more with another port, and the server opens an
//     extra subflow to it. The in-kernel path manager never opens two subflows
//     between the same pair of addresses itself; this is how braid gets
//     ndiffports-like extra subflows from it (the server must accept announcements,
//     which a braid server sets up: ServerPlan);
//   - limits: subflows = paths×servers−1 + paths×(subflowsPerPath−1) and
//     add_addr_accepted = servers, each at most 8 (the kernel's ceiling) and never
//     below what is set already.
//
// A path whose interface has no address of a family the servers use is skipped
// with a warning (it can get no subflow); so is one whose interface is missing.
func ClientPlan(paths []PMPath, servers []netip.AddrPort, subflowsPerPath int) ([]PlannedEndpoint, Limits, []string) {
	var warn []string
	var want4, want6 bool
	for _, s := range servers {
		if s.Addr().Unmap().Is4() {
			want4 = true
		} else {
			want6 = true
		}
	}
	subflowsPerPath = max(subflowsPerPath, 1)
	var eps []PlannedEndpoint
	used := 0
	for _, p := range paths {
		name := p.Device
		if name == "" {
			name = p.Addr.String()
		}
		addrs, ifindex, err := pathAddrs(p, want4, want6)
		if err != nil {
			warn = append(warn, fmt.Sprintf("path %s: %v; no MPTCP subflow from it", name, err))
			continue
		}
		if len(addrs) == 0 {
			warn = append(warn, fmt.Sprintf("path %s: no address of the servers' family; no MPTCP subflow from it", name))
			continue
		}
		used++
		for _, a := range addrs {
			eps = append(eps, PlannedEndpoint{Endpoint: Endpoint{Addr: a, Ifindex: ifindex, Flags: FlagSubflow | FlagFullmesh}, Path: name})
			for k := 1; k < subflowsPerPath; k++ {
				eps = append(eps, PlannedEndpoint{Endpoint: Endpoint{Addr: a, Ifindex: ifindex, Flags: FlagSignal}, AutoPort: true, Path: name})
			}
		}
	}
	extra := max(used*len(servers)-1, 0) + used*(subflowsPerPath-1)
	lim := Limits{Subflows: uint32(min(extra, mptcpPMAddrMaxLimit)), AddAddrAccepted: uint32(min(len(servers), mptcpPMAddrMaxLimit))}
	if used*len(servers)+used*(subflowsPerPath-1) > mptcpPMAddrMaxLimit+1 {
		warn = append(warn, fmt.Sprintf("%d subflows wanted, but the kernel allows at most %d per MPTCP connection", used*len(servers)+used*(subflowsPerPath-1), mptcpPMAddrMaxLimit+1))
	}
	return eps, lim, warn
}

// ServerPlan announces the server's specific listen addresses ("ADDR dev IF
// signal") so that clients open subflows to each, and raises both limits to the
// kernel's ceiling so that clients may add subflows and announce extra ports. A
// wildcard listen address announces nothing: clients then reach only the address
// they dialled (the operator may add signal endpoints). Announcements carry no port,
// which means "the port of the connection", so only listen addresses with the first
// one's port are announced.
func ServerPlan(listen []netip.AddrPort) ([]PlannedEndpoint, Limits, []string) {
	var warn []string
	var eps []PlannedEndpoint
	for _, l := range listen {
		a := l.Addr().Unmap()
		if !a.IsValid() || a.IsUnspecified() {
			continue
		}
		if l.Port() != listen[0].Port() {
			warn = append(warn, fmt.Sprintf("listen %s: not announced to MPTCP clients (announcements use the port of %s)", l, listen[0]))
			continue
		}
		_, ifindex, err := pathAddrs(PMPath{Addr: a}, true, true)
		if err != nil {
			warn = append(warn, fmt.Sprintf("listen %s: %v", l, err))
		}
		eps = append(eps, PlannedEndpoint{Endpoint: Endpoint{Addr: a, Ifindex: ifindex, Flags: FlagSignal}, Path: l.String()})
	}
	return eps, Limits{Subflows: mptcpPMAddrMaxLimit, AddAddrAccepted: mptcpPMAddrMaxLimit}, warn
}

// pathAddrs resolves a path to its addresses and interface index: the global
// unicast addresses of its interface (the first of each wanted family), or the
// given address and the interface that holds it.
func pathAddrs(p PMPath, want4, want6 bool) ([]netip.Addr, int, error) {
	if p.Device != "" {
		ifi, err := net.InterfaceByName(p.Device)
		if err != nil {
			return nil, 0, fmt.Errorf("interface %q not found", p.Device)
		}
		if p.Addr.IsValid() {
			return []netip.Addr{p.Addr}, ifi.Index, nil
		}
		as, err := ifi.Addrs()
		if err != nil {
			return nil, 0, err
		}
		var out []netip.Addr
		var got4, got6 bool
		for _, x := range as {
			ipn, ok := x.(*net.IPNet)
			if !ok {
				continue
			}
			a, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			a = a.Unmap()
			if !a.IsGlobalUnicast() {
				continue
			}
			if a.Is4() && want4 && !got4 {
				out, got4 = append(out, a), true
			}
			if a.Is6() && want6 && !got6 {
				out, got6 = append(out, a), true
			}
		}
		return out, ifi.Index, nil
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, 0, err
	}
	for _, ifi := range ifs {
		as, _ := ifi.Addrs()
		for _, x := range as {
			if ipn, ok := x.(*net.IPNet); ok {
				if a, ok := netip.AddrFromSlice(ipn.IP); ok && a.Unmap() == p.Addr {
					return []netip.Addr{p.Addr}, ifi.Index, nil
				}
			}
		}
	}
	return nil, 0, fmt.Errorf("address %s is not assigned to any interface", p.Addr)
}

// PathManager owns what braid configured in the kernel's in-kernel MPTCP path
// manager (per network namespace), so that a reload changes only that and
// shutdown removes it. Endpoints that exist already (configured by the operator or
// another program) are left alone and never removed.
type PathManager struct {
	mu    sync.Mutex
	c     *pmClient
	log   *slog.Logger
	owned []PlannedEndpoint // with the kernel's ids and chosen ports
	// deferred are the announced extra ports (AutoPort), added only by Announce.
	deferred  []PlannedEndpoint
	announced bool // Announce ran: deferred endpoints are (to be) in place

	limitsSet  bool
	prevLimits Limits // before braid first raised them
	ourLimits  Limits // what braid set
}

// NewPathManager connects to the kernel's MPTCP path manager.
func NewPathManager(log *slog.Logger) (*PathManager, error) {
	c, err := newPMClient()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	return &PathManager{c: c, log: log}, nil
}

func sameEndpoint(have PlannedEndpoint, want PlannedEndpoint) bool {
	if have.Addr != want.Addr || have.Ifindex != want.Ifindex || have.Flags != want.Flags {
		return false
	}
	return want.AutoPort && have.AutoPort || !want.AutoPort && have.Port == want.Port
}

// Apply makes braid's endpoints match want (removing those no longer wanted, adding
// the missing ones) and raises the limits to at least lim. Partial failures are
// reported in the error; what could be applied is applied.
//
// The announced extra ports of subflows_per_path > 1 are kept back until Announce:
// the server opens those subflows, and a server whose kernel receives the
// announcement before its braid has accepted the connection fails to (Linux 6.18
// counts MPJoinSynTxCreatSkErr and never retries), so they are announced only once
// the server has spoken on the connection.
func (pm *PathManager) Apply(want []PlannedEndpoint, lim Limits) error {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	var now, deferred []PlannedEndpoint
	for _, w := range want {
		if w.AutoPort {
			deferred = append(deferred, w)
		} else {
			now = append(now, w)
		}
	}
	err := pm.applyLocked(now, lim)
	if !slices.EqualFunc(deferred, pm.deferred, func(a, b PlannedEndpoint) bool { return sameEndpoint(a, b) }) {
		pm.deferred = deferred
		if pm.announced {
			err = errors.Join(err, pm.announceLocked())
		}
	}
	return err
}

// Announce (re)adds the deferred endpoints, so the kernel announces them on the
// connections that exist now. Call it when a connection is up and the server has
// answered on it (stream.Config.OnEstablished), again after every reconnection.
func (pm *PathManager) Announce() error {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	pm.announced = true
	return pm.announceLocked()
}

func (pm *PathManager) announceLocked() error {
	var errs []error
	var kept []PlannedEndpoint
	for _, o := range pm.owned {
		if !o.AutoPort {
			kept = append(kept, o)
			continue
		}
		if err := pm.c.del(o.Endpoint); err != nil && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("removing MPTCP endpoint %s: %w", o.Endpoint, err))
		}
	}
	pm.owned = kept
	for _, w := range pm.deferred {
		e, err := pm.add(w)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pm.owned = append(pm.owned, PlannedEndpoint{Endpoint: e, AutoPort: true, Path: w.Path})
		pm.log.Debug("mptcp endpoint announced", "endpoint", e.String(), "path", w.Path)
	}
	return errors.Join(errs...)
}

func (pm *PathManager) applyLocked(want []PlannedEndpoint, lim Limits) error {
	var errs []error
	// Remove what is no longer wanted (the deferred endpoints are Announce's).
	remaining := slices.Clone(want)
	var kept []PlannedEndpoint
	for _, o := range pm.owned {
		if o.AutoPort {
			kept = append(kept, o)
			continue
		}
		i := slices.IndexFunc(remaining, func(w PlannedEndpoint) bool { return sameEndpoint(o, w) })
		if i >= 0 {
			kept = append(kept, o)
			remaining = slices.Delete(remaining, i, i+1)
			continue
		}
		if err := pm.c.del(o.Endpoint); err != nil && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("removing MPTCP endpoint %s: %w", o.Endpoint, err))
			kept = append(kept, o)
			continue
		}
		pm.log.Info("mptcp endpoint removed", "endpoint", o.Endpoint.String(), "path", o.Path)
	}
	pm.owned = kept
	existing, err := pm.c.endpoints()
	if err != nil {
		return fmt.Errorf("reading MPTCP endpoints: %w", err)
	}
	for _, w := range remaining {
		if !w.AutoPort {
			if i := slices.IndexFunc(existing, func(e Endpoint) bool { return e.Addr == w.Addr && e.Port == w.Port }); i >= 0 {
				pm.log.Info("mptcp endpoint exists already; left as configured", "endpoint", existing[i].String(), "wanted", w.Endpoint.String(), "path", w.Path)
				continue
			}
		}
		e, err := pm.add(w)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pm.owned = append(pm.owned, PlannedEndpoint{Endpoint: e, AutoPort: w.AutoPort, Path: w.Path})
		pm.log.Info("mptcp endpoint added", "endpoint", e.String(), "path", w.Path)
	}
	if err := pm.raiseLimits(lim); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// add adds one endpoint and returns it with the id (and port) the kernel has.
func (pm *PathManager) add(w PlannedEndpoint) (Endpoint, error) {
	e := w.Endpoint
	tries := 1
	if w.AutoPort {
		tries = 20
	}
	var err error
	for i := 0; i < tries; i++ {
		if w.AutoPort {
			// The kernel opens a listener on the port; pick one outside the usual
			// ephemeral range (32768-60999) so it rarely collides.
			e.Port = uint16(61000 + rand.IntN(4000))
		}
		if err = pm.c.add(e); err == nil {
			break
		}
		if !w.AutoPort || !errors.Is(err, syscall.EADDRINUSE) && !errors.Is(err, syscall.EEXIST) {
			break
		}
	}
	if err != nil {
		return e, fmt.Errorf("adding MPTCP endpoint %s: %w", e, err)
	}
	list, lerr := pm.c.endpoints()
	if lerr != nil {
		return e, fmt.Errorf("reading MPTCP endpoints: %w", lerr)
	}
	for _, x := range list {
		if x.Addr == e.Addr && x.Port == e.Port {
			return x, nil
		}
	}
	return e, fmt.Errorf("MPTCP endpoint %s vanished after it was added", e)
}

func (pm *PathManager) raiseLimits(lim Limits) error {
	cur, err := pm.c.limits()
	if err != nil {
		return fmt.Errorf("reading MPTCP limits: %w", err)
	}
	want := Limits{Subflows: max(cur.Subflows, lim.Subflows), AddAddrAccepted: max(cur.AddAddrAccepted, lim.AddAddrAccepted)}
	if want == cur {
		return nil
	}
	if err := pm.c.setLimits(want); err != nil {
		return fmt.Errorf("setting MPTCP limits subflows %d add_addr_accepted %d: %w", want.Subflows, want.AddAddrAccepted, err)
	}
	if !pm.limitsSet {
		pm.prevLimits = cur
		pm.limitsSet = true
	}
	pm.ourLimits = want
	pm.log.Info("mptcp limits set", "subflows", want.Subflows, "add_addr_accepted", want.AddAddrAccepted, "were", fmt.Sprintf("subflows %d add_addr_accepted %d", cur.Subflows, cur.AddAddrAccepted))
	return nil
}

// Owned returns the endpoints braid added, as the kernel has them.
func (pm *PathManager) Owned() []Endpoint {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	out := make([]Endpoint, len(pm.owned))
	for i, o := range pm.owned {
		out[i] = o.Endpoint
	}
	return out
}

// Close removes braid's endpoints and puts the limits back as they were, unless
// someone changed them since.
func (pm *PathManager) Close() error {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	var errs []error
	for _, o := range pm.owned {
		if err := pm.c.del(o.Endpoint); err != nil && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("removing MPTCP endpoint %s: %w", o.Endpoint, err))
		}
	}
	pm.owned = nil
	if pm.limitsSet {
		if cur, err := pm.c.limits(); err == nil && cur == pm.ourLimits {
			if err := pm.c.setLimits(pm.prevLimits); err != nil {
				errs = append(errs, fmt.Errorf("restoring MPTCP limits: %w", err))
			}
		}
		pm.limitsSet = false
	}
	return errors.Join(errs...)
}
