//go:build linux

package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// RunDir is where named namespaces are bind-mounted; `ip netns` uses the
// same directory.
const RunDir = "/run/netns"

// Namespace is a named network namespace created by New.
type Namespace struct {
	name string
	path string

	mu     sync.Mutex
	fd     vnetns.NsHandle
	nl     *netlink.Handle
	closed bool
}

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$`)

// New creates the namespace "prefix-PID-XXXXXX" (random hex) with its
// loopback up.
func New(prefix string) (*Namespace, error) {
	if !prefixRE.MatchString(prefix) {
		return nil, fmt.Errorf("netns: invalid prefix %q (letters, digits, '_', '.', '-'; at most 32)", prefix)
	}
	if err := prepareRunDir(); err != nil {
		return nil, permError("preparing "+RunDir, err)
	}
	for tries := 0; ; tries++ {
		name := fmt.Sprintf("%s-%d-%06x", prefix, os.Getpid(), rand.Uint32()&0xffffff)
		ns, err := create(name)
		if errors.Is(err, os.ErrExist) && tries < 10 {
			continue
		}
		return ns, err
	}
}

// create makes a named namespace the way `ip netns add` does: a new network
// namespace on a locked thread, bind-mounted to RunDir/name.
func create(name string) (_ *Namespace, err error) {
	path := filepath.Join(RunDir, name)
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return nil, fmt.Errorf("netns: creating %s: %w", path, err)
	}
	f.Close()
	defer func() {
		if err != nil {
			unix.Unmount(path, unix.MNT_DETACH)
			os.Remove(path)
		}
	}()

	runtime.LockOSThread()
	orig, err := vnetns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("netns: reading current namespace: %w", err)
	}
	defer orig.Close()
	err = func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return permError("creating network namespace "+name, err)
		}
		self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		if err := unix.Mount(self, path, "none", unix.MS_BIND, ""); err != nil {
			return permError("mounting "+path, err)
		}
		return nil
	}()
	if rerr := vnetns.Set(orig); rerr != nil {
		// The thread is stuck in the wrong namespace: keep it locked so the
		// runtime retires it when this goroutine ends.
		return nil, errors.Join(err, fmt.Errorf("netns: returning to the original namespace: %w", rerr))
	}
	runtime.UnlockOSThread()
	if err != nil {
		return nil, err
	}

	fd, err := vnetns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("netns: opening %s: %w", path, err)
	}
	nl, err := netlink.NewHandleAt(fd)
	if err != nil {
		fd.Close()
		return nil, fmt.Errorf("netns: netlink in %s: %w", name, err)
	}
	ns := &Namespace{name: name, path: path, fd: fd, nl: nl}
	if err := ns.SetUp("lo"); err != nil {
		nl.Close()
		fd.Close()
		return nil, err
	}
	return ns, nil
}

// prepareRunDir makes RunDir a shared mount point, as iproute2 does, so that
// unmounting a name propagates into mount namespaces created meanwhile (for
// example by `ip netns exec`) and the namespace can really go away.
func prepareRunDir() error {
	if err := os.MkdirAll(RunDir, 0o755); err != nil {
		return err
	}
	made := false
	for {
		err := unix.Mount("", RunDir, "none", unix.MS_SHARED|unix.MS_REC, "")
		if err == nil {
			return nil
		}
		if err != unix.EINVAL || made {
			return err
		}
		// Not a mount point yet: bind it onto itself, then retry.
		if err := unix.Mount(RunDir, RunDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return err
		}
		made = true
	}
}

func permError(what string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("netns: %s: %w (needs root or CAP_SYS_ADMIN)", what, err)
	}
	return fmt.Errorf("netns: %s: %w", what, err)
}

// Name is the namespace's name, as `ip netns` lists it.
func (ns *Namespace) Name() string { return ns.name }

// Path is the bind mount that keeps the namespace alive (RunDir/Name).
func (ns *Namespace) Path() string { return ns.path }

// String returns the name.
func (ns *Namespace) String() string { return ns.name }

// Netlink returns the handle bound to the namespace, for configuration this
// package does not wrap. It is invalid after Close.
func (ns *Namespace) Netlink() *netlink.Handle { return ns.nl }

// Handle returns the namespace file descriptor (valid until Close), e.g.
// for netlink.NsFd when moving links in.
func (ns *Namespace) Handle() vnetns.NsHandle { return ns.fd }

var errClosed = errors.New("netns: namespace closed")

func (ns *Namespace) handle() (*netlink.Handle, error) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.closed {
		return nil, fmt.Errorf("%w: %s", errClosed, ns.name)
	}
	return ns.nl, nil
}

// Do runs fn on the calling goroutine's OS thread switched into the
// namespace, then switches back. Goroutines that fn starts run outside.
func (ns *Namespace) Do(fn func() error) error {
	ns.mu.Lock()
	closed, fd := ns.closed, ns.fd
	ns.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: %s", errClosed, ns.name)
	}
	runtime.LockOSThread()
	orig, err := vnetns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: reading current namespace: %w", err)
	}
	defer orig.Close()
	if err := vnetns.Set(fd); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: entering %s: %w", ns.name, err)
	}
	restored := false
	defer func() {
		if !restored {
			// fn panicked: still try to leave, else retire the thread.
			if vnetns.Set(orig) == nil {
				runtime.UnlockOSThread()
			}
		}
	}()
	ferr := fn()
	restored = true
	if err := vnetns.Set(orig); err != nil {
		return errors.Join(ferr, fmt.Errorf("netns: leaving %s: %w", ns.name, err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// Run returns a command that runs name with args inside the namespace via
// `ip netns exec`, which also gives the child a /sys of the namespace. The
// caller starts and waits for it; Close kills it if it is still running.
func (ns *Namespace) Run(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.name, name}, args...)...)
}

// Exec runs name with args inside the namespace (see Run) and returns its
// combined output; a failure's error includes the output.
func (ns *Namespace) Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := ns.Run(ctx, name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("netns %s: %s %s: %w: %s", ns.name, name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// Start starts cmd inside the namespace without iproute2: the child is forked
// from a thread that Do moved into the namespace and inherits it. /sys is
// the caller's.
func (ns *Namespace) Start(cmd *exec.Cmd) error {
	return ns.Do(cmd.Start)
}

func (ns *Namespace) link(name string) (*netlink.Handle, netlink.Link, error) {
	h, err := ns.handle()
	if err != nil {
		return nil, nil, err
	}
	l, err := h.LinkByName(name)
	if err != nil {
		return nil, nil, fmt.Errorf("netns %s: link %q: %w", ns.name, name, err)
	}
	return h, l, nil
}

// SetUp brings a link up.
func (ns *Namespace) SetUp(link string) error {
	h, l, err := ns.link(link)
	if err != nil {
		return err
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("netns %s: set %s up: %w", ns.name, link, err)
	}
	return nil
}

// SetDown takes a link down (see the package doc on what that flushes).
func (ns *Namespace) SetDown(link string) error {
	h, l, err := ns.link(link)
	if err != nil {
		return err
	}
	if err := h.LinkSetDown(l); err != nil {
		return fmt.Errorf("netns %s: set %s down: %w", ns.name, link, err)
	}
	return nil
}

// SetMTU sets a link's MTU.
func (ns *Namespace) SetMTU(link string, mtu int) error {
	h, l, err := ns.link(link)
	if err != nil {
		return err
	}
	if err := h.LinkSetMTU(l, mtu); err != nil {
		return fmt.Errorf("netns %s: set %s mtu %d: %w", ns.name, link, mtu, err)
	}
	return nil
}

func ipnet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// AddAddr adds an address (with its prefix length) to a link. IPv6 addresses
// skip duplicate address detection, so they are usable at once.
func (ns *Namespace) AddAddr(link string, p netip.Prefix) error {
	h, l, err := ns.link(link)
	if err != nil {
		return err
	}
	a := &netlink.Addr{IPNet: ipnet(p)}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	if err := h.AddrAdd(l, a); err != nil {
		return fmt.Errorf("netns %s: add address %v to %s: %w", ns.name, p, link, err)
	}
	return nil
}

// DelAddr removes an address from a link.
func (ns *Namespace) DelAddr(link string, p netip.Prefix) error {
	h, l, err := ns.link(link)
	if err != nil {
		return err
	}
	if err := h.AddrDel(l, &netlink.Addr{IPNet: ipnet(p)}); err != nil {
		return fmt.Errorf("netns %s: remove address %v from %s: %w", ns.name, p, link, err)
	}
	return nil
}

// Route is a route for AddRoute/DelRoute.
type Route struct {
	Dst    netip.Prefix // destination; 0.0.0.0/0 or ::/0 for a default route
	Via    netip.Addr   // gateway; zero for an on-link route
	Dev    string       // output link; may be empty when Via is set
	Src    netip.Addr   // preferred source address; optional
	Table  int          // routing table; 0 = main
	Metric int
}

func (ns *Namespace) nlRoute(r Route) (*netlink.Handle, *netlink.Route, error) {
	h, err := ns.handle()
	if err != nil {
		return nil, nil, err
	}
	nr := &netlink.Route{Dst: ipnet(r.Dst.Masked()), Table: r.Table, Priority: r.Metric}
	if r.Via.IsValid() {
		nr.Gw = r.Via.AsSlice()
	} else {
		nr.Scope = netlink.SCOPE_LINK
	}
	if r.Src.IsValid() {
		nr.Src = r.Src.AsSlice()
	}
	if r.Dev != "" {
		_, l, err := ns.link(r.Dev)
		if err != nil {
			return nil, nil, err
		}
		nr.LinkIndex = l.Attrs().Index
	}
	return h, nr, nil
}

// AddRoute adds a route.
func (ns *Namespace) AddRoute(r Route) error {
	h, nr, err := ns.nlRoute(r)
	if err != nil {
		return err
	}
	if err := h.RouteAdd(nr); err != nil {
		return fmt.Errorf("netns %s: add route %v: %w", ns.name, r.Dst, err)
	}
	return nil
}

// DelRoute deletes a route added with AddRoute.
func (ns *Namespace) DelRoute(r Route) error {
	h, nr, err := ns.nlRoute(r)
	if err != nil {
		return err
	}
	if err := h.RouteDel(nr); err != nil {
		return fmt.Errorf("netns %s: delete route %v: %w", ns.name, r.Dst, err)
	}
	return nil
}

// Rule is a policy routing rule: traffic from Src (or to Dst) uses Table.
// Source-based rules are how one host keeps one route per uplink.
type Rule struct {
	Src, Dst netip.Prefix // zero = any
	Table    int
	Priority int // 0 = let the kernel choose
}

// AddRule adds a policy routing rule.
func (ns *Namespace) AddRule(r Rule) error {
	h, err := ns.handle()
	if err != nil {
		return err
	}
	nr := netlink.NewRule()
	nr.Table = r.Table
	if r.Priority > 0 {
		nr.Priority = r.Priority
	}
	nr.Family = unix.AF_INET
	if r.Src.IsValid() {
		nr.Src = ipnet(r.Src.Masked())
		if r.Src.Addr().Is6() {
			nr.Family = unix.AF_INET6
		}
	}
	if r.Dst.IsValid() {
		nr.Dst = ipnet(r.Dst.Masked())
		if r.Dst.Addr().Is6() {
			nr.Family = unix.AF_INET6
		}
	}
	if err := h.RuleAdd(nr); err != nil {
		return fmt.Errorf("netns %s: add rule from %v to %v table %d: %w", ns.name, r.Src, r.Dst, r.Table, err)
	}
	return nil
}

func sysctlPath(key string) string {
	if !strings.Contains(key, "/") {
		key = strings.ReplaceAll(key, ".", "/")
	}
	return filepath.Join("/proc/sys", filepath.Clean("/"+key))
}

// Sysctl reads a sysctl inside the namespace. key is dotted
// ("net.ipv4.ip_forward") or a path below /proc/sys (needed when a link name
// contains dots: "net/ipv4/conf/eth0.7/rp_filter").
func (ns *Namespace) Sysctl(key string) (string, error) {
	var v []byte
	err := ns.Do(func() error {
		var err error
		v, err = os.ReadFile(sysctlPath(key))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("netns %s: sysctl %s: %w", ns.name, key, err)
	}
	return strings.TrimSpace(string(v)), nil
}

// SetSysctl writes a sysctl inside the namespace (/proc/sys/net is per
// namespace; most other sysctls are global and should not be set here).
func (ns *Namespace) SetSysctl(key, value string) error {
	err := ns.Do(func() error {
		return os.WriteFile(sysctlPath(key), []byte(value), 0o644)
	})
	if err != nil {
		return fmt.Errorf("netns %s: sysctl %s=%s: %w", ns.name, key, value, err)
	}
	return nil
}

// TBF shapes a link's egress with a token bucket filter, the way
// `tc qdisc replace dev X root tbf rate … burst … latency …` does.
type TBF struct {
	// Rate in bit/s (required).
	Rate uint64
	// Burst is the bucket size in bytes; 0 = 2 ms at Rate, at least two
	// full frames (the bucket must hold a frame or nothing passes).
	Burst uint32
	// Latency bounds the time a packet may wait; the queue limit becomes
	// Rate·Latency + Burst bytes. 0 = DefaultTBFLatency. Ignored if Limit > 0.
	Latency time.Duration
	// Limit is the queue size in bytes; overrides Latency.
	Limit uint32
}

// DefaultTBFLatency is TBF.Latency when unset: 50 ms, a modest access-link
// buffer.
const DefaultTBFLatency = 50 * time.Millisecond

// Shape replaces the link's root qdisc with tbf. It uses netlink and falls
// back to the tc command if netlink fails.
func (ns *Namespace) Shape(link string, t TBF) error {
	if t.Rate == 0 {
		return fmt.Errorf("netns %s: shape %s: rate 0", ns.name, link)
	}
	h, l, err := ns.link(link)
	if err != nil {
		return err
	}
	bytesPerSec := t.Rate / 8
	burst := t.Burst
	if burst == 0 {
		burst = uint32(bytesPerSec / 500)
		if min := uint32(2 * (l.Attrs().MTU + 14)); burst < min {
			burst = min
		}
	}
	limit := t.Limit
	if limit == 0 {
		lat := t.Latency
		if lat <= 0 {
			lat = DefaultTBFLatency
		}
		limit = uint32(float64(bytesPerSec)*lat.Seconds()) + burst
	}
	q := &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
		Rate:       bytesPerSec,
		Limit:      limit,
		Buffer:     netlink.Xmittime(bytesPerSec, burst),
	}
	nlErr := h.QdiscReplace(q)
	if nlErr == nil {
		return nil
	}
	_, tcErr := ns.Exec(context.Background(), "tc", "qdisc", "replace", "dev", link, "root", "handle", "1:", "tbf",
		"rate", strconv.FormatUint(t.Rate, 10)+"bit", "burst", strconv.FormatUint(uint64(burst), 10), "limit", strconv.FormatUint(uint64(limit), 10))
	if tcErr == nil {
		return nil
	}
	return fmt.Errorf("netns %s: shape %s: netlink: %v; tc: %w", ns.name, link, nlErr, tcErr)
}

// Unshape removes the root qdisc set by Shape (the link gets its default
// back). A link without one is not an error.
func (ns *Namespace) Unshape(link string) error {
	h, l, err := ns.link(link)
	if err != nil {
		return err
	}
	qs, err := h.QdiscList(l)
	if err != nil {
		return fmt.Errorf("netns %s: list qdiscs of %s: %w", ns.name, link, err)
	}
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_ROOT && q.Type() == "tbf" {
			if err := h.QdiscDel(q); err != nil {
				return fmt.Errorf("netns %s: remove tbf from %s: %w", ns.name, link, err)
			}
		}
	}
	return nil
}

// VethEnd describes one end of a veth pair for AddVeth.
type VethEnd struct {
	NS    *Namespace
	Name  string         // interface name, at most 15 bytes
	Addrs []netip.Prefix // addresses with prefix length
	MTU   int            // 0 = kernel default (1500)
}

// AddVeth creates a veth pair joining a.NS and b.NS (they may be the same),
// adds the addresses and brings both ends up. It goes away with either
// namespace.
func AddVeth(a, b VethEnd) error {
	for _, e := range []VethEnd{a, b} {
		if e.NS == nil || e.Name == "" || len(e.Name) > unix.IFNAMSIZ-1 {
			return fmt.Errorf("netns: veth end %q: need a namespace and a name of 1..15 bytes", e.Name)
		}
	}
	ha, err := a.NS.handle()
	if err != nil {
		return err
	}
	if _, err := b.NS.handle(); err != nil {
		return err
	}
	v := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: a.Name, MTU: a.MTU},
		PeerName:      b.Name,
		PeerNamespace: netlink.NsFd(int(b.NS.fd)),
		PeerMTU:       uint32(b.MTU),
	}
	if err := ha.LinkAdd(v); err != nil {
		return fmt.Errorf("netns: veth %s/%s — %s/%s: %w", a.NS.name, a.Name, b.NS.name, b.Name, err)
	}
	err = func() error {
		for _, e := range []VethEnd{a, b} {
			for _, p := range e.Addrs {
				if err := e.NS.AddAddr(e.Name, p); err != nil {
					return err
				}
			}
			if err := e.NS.SetUp(e.Name); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		if l, lerr := ha.LinkByName(a.Name); lerr == nil {
			ha.LinkDel(l) // takes the peer with it
		}
		return err
	}
	return nil
}

// Pids lists the processes whose network namespace is this one (not
// counting threads of this process that Do moved in).
func (ns *Namespace) Pids() ([]int, error) {
	return pidsIn(ns.path)
}

func pidsIn(nsPath string) ([]int, error) {
	var want unix.Stat_t
	if err := unix.Stat(nsPath, &want); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		var st unix.Stat_t
		if unix.Stat("/proc/"+e.Name()+"/ns/net", &st) != nil {
			continue // gone, or a kernel thread
		}
		if st.Dev == want.Dev && st.Ino == want.Ino {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// killIn sends SIGKILL to every process inside and waits up to a second for
// them to leave, so the namespace can die with the name.
func killIn(nsPath string) {
	for i := 0; i < 100; i++ {
		pids, err := pidsIn(nsPath)
		if err != nil || len(pids) == 0 {
			return
		}
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Close kills processes still inside, releases the handles and removes the
// name. The kernel destroys the namespace and its links once nothing refers
// to it any more. Close is idempotent.
func (ns *Namespace) Close() error {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.closed {
		return nil
	}
	ns.closed = true
	killIn(ns.path)
	ns.nl.Close()
	ns.fd.Close()
	return remove(ns.path)
}

func remove(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return fmt.Errorf("netns: unmounting %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("netns: removing %s: %w", path, err)
	}
	return nil
}

// Cleanup removes stale namespaces made by New with this prefix: names
// "prefix-PID-XXXXXX" whose creating process PID no longer exists. Processes
// left inside them are killed first. Namespaces of live processes, other
// prefixes and names in any other form are not touched. It returns the names
// removed.
func Cleanup(prefix string) ([]string, error) {
	if !prefixRE.MatchString(prefix) {
		return nil, fmt.Errorf("netns: invalid prefix %q", prefix)
	}
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `-([0-9]+)-[0-9a-f]{6}$`)
	ents, err := os.ReadDir(RunDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		m := re.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil || pid == os.Getpid() || alive(pid) {
			continue
		}
		path := filepath.Join(RunDir, e.Name())
		killIn(path)
		if err := remove(path); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
