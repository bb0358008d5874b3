//go:build linux

package tundev

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/tun"
)

// tunPath is the clone device wireguard-go opens; a variable for tests.
var tunPath = "/dev/net/tun"

type device struct {
	dev    tun.Device
	nl     *netlink.Handle // in the namespace the device lives in
	index  int
	name   string
	routes []*netlink.Route // routes Create added, removed by Close

	// leftover records that the link outlived its file descriptor and Close
	// had to delete it (only expected for a persistent device).
	leftover bool

	once     sync.Once
	closed   atomic.Bool
	closeErr error
}

// Create makes a TUN interface, adds its addresses, brings it up and routes
// opt.Routes into it, in the calling thread's network namespace. On error
// nothing is left behind.
func Create(opt Options) (_ Device, err error) {
	name := opt.Name
	if name == "" {
		name = DefaultName
	}
	if len(name) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("tundev: interface name %q is longer than %d bytes", name, unix.IFNAMSIZ-1)
	}
	mtu := opt.MTU
	if mtu == 0 {
		mtu = DefaultMTU
	}
	if _, err := os.Stat(tunPath); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("tundev: %s does not exist: load the tun module (modprobe tun) or create it (mknod %s c 10 200)", tunPath, tunPath)
	}

	// The device, the netlink handle and the configuration must all land in
	// the same namespace: keep to one thread while creating them.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	nl, err := netlink.NewHandle()
	if err != nil {
		return nil, fmt.Errorf("tundev: netlink: %w", err)
	}
	dev, err := tun.CreateTUN(name, mtu)
	if err != nil {
		nl.Close()
		return nil, createError(name, err)
	}
	d := &device{dev: dev, nl: nl}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	if d.name, err = dev.Name(); err != nil {
		return nil, fmt.Errorf("tundev: name of new device: %w", err)
	}
	link, err := nl.LinkByName(d.name)
	if err != nil {
		return nil, fmt.Errorf("tundev: %s: %w", d.name, err)
	}
	d.index = link.Attrs().Index
	go drain(dev.Events())

	for _, p := range opt.Addresses {
		a := &netlink.Addr{IPNet: ipnet(p)}
		if p.Addr().Is6() {
			a.Flags = unix.IFA_F_NODAD
		}
		if err := nl.AddrAdd(link, a); err != nil {
			return nil, permError(fmt.Sprintf("adding address %v to %s", p, d.name), err)
		}
	}
	if err := nl.LinkSetUp(link); err != nil {
		return nil, permError("setting "+d.name+" up", err)
	}
	for _, p := range opt.Routes {
		r := &netlink.Route{LinkIndex: d.index, Dst: ipnet(p.Masked()), Scope: netlink.SCOPE_LINK}
		if err := nl.RouteAdd(r); err != nil {
			if errors.Is(err, unix.EEXIST) && d.routedHere(p.Masked()) {
				continue // e.g. the connected route of an address: not ours to remove
			}
			if errors.Is(err, unix.EEXIST) {
				return nil, fmt.Errorf("tundev: route %v already exists via another interface", p)
			}
			return nil, permError(fmt.Sprintf("adding route %v via %s", p, d.name), err)
		}
		d.routes = append(d.routes, r)
	}
	return d, nil
}

// drain consumes wireguard-go's link events (unused here) so its listener
// goroutines never block; the channel closes with the device.
func drain(ev <-chan tun.Event) {
	for range ev {
	}
}

// routedHere reports whether a route to dst already goes through the device.
func (d *device) routedHere(dst netip.Prefix) bool {
	family := netlink.FAMILY_V4
	if dst.Addr().Is6() {
		family = netlink.FAMILY_V6
	}
	rs, err := d.nl.RouteListFiltered(family, &netlink.Route{LinkIndex: d.index}, netlink.RT_FILTER_OIF)
	if err != nil {
		return false
	}
	for _, r := range rs {
		if r.Dst != nil && r.Dst.String() == dst.String() {
			return true
		}
	}
	return false
}

func ipnet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func createError(name string, err error) error {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("tundev: creating TUN device %q needs root or CAP_NET_ADMIN", name)
	case errors.Is(err, unix.EBUSY):
		return fmt.Errorf("tundev: TUN device %q already exists and is in use", name)
	case errors.Is(err, unix.EINVAL):
		return fmt.Errorf("tundev: cannot create TUN device %q: an interface of another type has that name", name)
	}
	return fmt.Errorf("tundev: creating TUN device %q: %w", name, err)
}

func permError(what string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("tundev: %s needs root or CAP_NET_ADMIN", what)
	}
	return fmt.Errorf("tundev: %s: %w", what, err)
}

// errClosed is what Read and Write return after Close: wireguard-go may
// instead report the shutdown of its netlink listener, and the engine needs
// to tell a closed device from a failing one.
var errClosed = fmt.Errorf("tundev: %w", os.ErrClosed)

func (d *device) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	n, err := d.dev.Read(bufs, sizes, offset)
	if err != nil && d.closed.Load() {
		return n, errClosed
	}
	return n, err
}

func (d *device) Write(bufs [][]byte, offset int) (int, error) {
	n, err := d.dev.Write(bufs, offset)
	if err != nil && d.closed.Load() {
		return n, errClosed
	}
	return n, err
}

func (d *device) BatchSize() int { return d.dev.BatchSize() }

func (d *device) Name() (string, error) { return d.name, nil }

// MTU asks netlink rather than wireguard-go, whose ioctl socket would look in
// the namespace of whatever thread runs it.
func (d *device) MTU() (int, error) {
	l, err := d.nl.LinkByIndex(d.index)
	if err != nil {
		return 0, fmt.Errorf("tundev: %s: %w", d.name, err)
	}
	return l.Attrs().MTU, nil
}

// Close removes the routes Create added, closes the device (which removes a
// non-persistent TUN interface) and makes sure the interface is gone.
func (d *device) Close() error {
	d.once.Do(func() {
		d.closed.Store(true)
		var errs []error
		for _, r := range d.routes {
			if err := d.nl.RouteDel(r); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("tundev: deleting route %v: %w", r.Dst, err))
			}
		}
		if err := d.dev.Close(); err != nil {
			errs = append(errs, fmt.Errorf("tundev: closing %s: %w", d.name, err))
		}
		if d.index != 0 {
			if l, err := d.nl.LinkByIndex(d.index); err == nil && l.Attrs().Name == d.name {
				// Still there (a persistent device we attached to).
				d.leftover = true
				if err := d.nl.LinkDel(l); err != nil {
					errs = append(errs, fmt.Errorf("tundev: deleting %s: %w", d.name, err))
				}
			}
		}
		d.nl.Close()
		d.closeErr = errors.Join(errs...)
	})
	return d.closeErr
}
