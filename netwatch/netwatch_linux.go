package netwatch

import (
	"context"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Watch reports every change of a link's state or addresses until ctx ends. An
// interface is up when it is administratively and operationally up and has at
// least one address. Events may repeat; the engine reacts to the state, not the
// count. It watches the network namespace of the calling thread.
func Watch(ctx context.Context) (<-chan Event, error) {
	h, err := netlink.NewHandle() // bound to this thread's namespace, like the subscriptions
	if err != nil {
		return nil, fmt.Errorf("netwatch: netlink: %w", err)
	}
	links := make(chan netlink.LinkUpdate, 64)
	addrs := make(chan netlink.AddrUpdate, 64)
	done := make(chan struct{})
	if err := netlink.LinkSubscribe(links, done); err != nil {
		close(done)
		h.Close()
		return nil, fmt.Errorf("netwatch: subscribing to link changes: %w", err)
	}
	if err := netlink.AddrSubscribe(addrs, done); err != nil {
		close(done)
		h.Close()
		return nil, fmt.Errorf("netwatch: subscribing to address changes: %w", err)
	}
	out := make(chan Event, 64)
	go func() {
		defer close(out)
		defer close(done)
		defer h.Close()
		for {
			var name string
			var up bool
			select {
			case <-ctx.Done():
				return
			case u, ok := <-links:
				if !ok {
					return
				}
				name = u.Attrs().Name
				up = u.Attrs().Flags&net.FlagUp != 0 && u.Attrs().OperState != netlink.OperDown && hasAddr(h, u.Attrs().Index)
				if u.Header.Type == unix.RTM_DELLINK {
					up = false
				}
			case u, ok := <-addrs:
				if !ok {
					return
				}
				l, err := h.LinkByIndex(u.LinkIndex)
				if err != nil {
					continue // gone already; its RTM_DELLINK follows
				}
				name = l.Attrs().Name
				up = l.Attrs().Flags&net.FlagUp != 0 && hasAddr(h, u.LinkIndex)
			}
			select {
			case out <- Event{Device: name, Up: up}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// hasAddr reports whether the link has a usable (not link-local IPv6) address.
func hasAddr(h *netlink.Handle, index int) bool {
	l, err := h.LinkByIndex(index)
	if err != nil {
		return false
	}
	as, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return false
	}
	for _, a := range as {
		if a.IP != nil && !a.IP.IsLinkLocalUnicast() {
			return true
		}
	}
	return false
}
