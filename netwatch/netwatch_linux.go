package netwatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Retry bounds: a subscription that failed for another reason than an overflow
// is made again after retryMin, doubling up to retryMax; one that lived at least
// retryReset starts the doubling over.
const (
	retryMin   = 100 * time.Millisecond
	retryMax   = 30 * time.Second
	retryReset = time.Minute
)

// Watch reports every change of a link's state or addresses until ctx ends. An
// interface is up when it is administratively and operationally up and has at
// least one address. Events may repeat; the engine reacts to the state, not the
// count. It watches the network namespace of the calling thread.
//
// The watch does not end by itself. When the kernel drops notifications
// because the socket's buffer overflowed (ENOBUFS, after an event storm), the
// watcher subscribes again at once and reports the state of every interface,
// since it no longer knows which changes it missed. Any other failure is logged
// and the subscription made again with backoff (100 ms doubling to 30 s), again
// followed by the state of every interface. log (nil: slog.Default()) says each
// time.
func Watch(ctx context.Context, log *slog.Logger) (<-chan Event, error) {
	if log == nil {
		log = slog.Default()
	}
	// Both bound to this thread's namespace: the handle's socket is made here,
	// and later subscriptions, made from another thread, name the namespace.
	ns, err := vnetns.Get()
	if err != nil {
		return nil, fmt.Errorf("netwatch: network namespace: %w", err)
	}
	h, err := netlink.NewHandle()
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("netwatch: netlink: %w", err)
	}
	w := &watcher{ns: ns, h: h, log: log, out: make(chan Event, 64)}
	sub, err := w.subscribe()
	if err != nil {
		h.Close()
		ns.Close()
		return nil, err
	}
	go w.run(ctx, sub)
	return w.out, nil
}

type watcher struct {
	ns  vnetns.NsHandle
	h   *netlink.Handle
	log *slog.Logger
	out chan Event
}

// subscription is one pair of netlink subscriptions (links, addresses). The
// library closes a channel when its socket fails to receive, after passing the
// error to the callback; err keeps the last one.
type subscription struct {
	links chan netlink.LinkUpdate
	addrs chan netlink.AddrUpdate
	done  chan struct{}
	since time.Time

	mu  sync.Mutex
	err error
}

// stop ends the subscription. The library's goroutines may be blocked sending to
// a full channel: reading both until the library closes them lets them end.
func (s *subscription) stop() {
	close(s.done)
	go func() {
		for range s.links {
		}
	}()
	go func() {
		for range s.addrs {
		}
	}()
}

func (s *subscription) lastErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		return errors.New("netlink subscription ended")
	}
	return s.err
}

func (w *watcher) subscribe() (*subscription, error) {
	s := &subscription{
		links: make(chan netlink.LinkUpdate, 64),
		addrs: make(chan netlink.AddrUpdate, 64),
		done:  make(chan struct{}),
		since: time.Now(),
	}
	// The library calls back with every error; only a failed receive ends a
	// subscription (and is the last one before its channel closes). The others
	// (a message it cannot parse, one not from the kernel) cost one event.
	onErr := func(err error) {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		w.log.Debug("netwatch: netlink", "err", err)
	}
	if err := netlink.LinkSubscribeWithOptions(s.links, s.done, netlink.LinkSubscribeOptions{
		Namespace: &w.ns, ErrorCallback: onErr,
	}); err != nil {
		close(s.done)
		return nil, fmt.Errorf("netwatch: subscribing to link changes: %w", err)
	}
	if err := netlink.AddrSubscribeWithOptions(s.addrs, s.done, netlink.AddrSubscribeOptions{
		Namespace: &w.ns, ErrorCallback: onErr,
	}); err != nil {
		close(s.done)
		go func() { // the link subscription's goroutine may be blocked on it
			for range s.links {
			}
		}()
		return nil, fmt.Errorf("netwatch: subscribing to address changes: %w", err)
	}
	return s, nil
}

// overflowed reports whether err is the kernel saying it dropped notifications.
// The library passes receive errors formatted with %v, so the errno survives
// only as text.
func overflowed(err error) bool {
	return errors.Is(err, unix.ENOBUFS) || strings.Contains(err.Error(), unix.ENOBUFS.Error())
}

func (w *watcher) run(ctx context.Context, sub *subscription) {
	defer close(w.out)
	defer w.ns.Close()
	defer w.h.Close()
	wait := retryMin
	var lastOverflow time.Time
	for {
		err := w.pump(ctx, sub)
		sub.stop()
		if err == nil {
			return // ctx ended
		}
		lived := time.Since(sub.since)
		if lived >= retryReset {
			wait = retryMin
		}
		var delay time.Duration
		if overflowed(err) {
			// Events were lost, the socket is fine: subscribe again at once.
			// (Another overflow within a second waits like a failure, so a
			// storm that goes on does not keep this loop busy.)
			if time.Since(lastOverflow) < time.Second {
				delay, wait = wait, min(2*wait, retryMax)
			}
			lastOverflow = time.Now()
			w.log.Warn("netwatch: interface events lost (netlink receive buffer overflowed); subscribing again and re-reading every interface", "err", err, "retry_in", delay)
		} else {
			delay, wait = wait, min(2*wait, retryMax)
			w.log.Warn("netwatch: interface events stopped; subscribing again", "err", err, "retry_in", delay)
		}
		for {
			if delay > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(delay):
				}
			}
			if sub, err = w.subscribe(); err == nil {
				break
			}
			delay, wait = wait, min(2*wait, retryMax)
			w.log.Warn("netwatch: subscribing again failed", "err", err, "retry_in", delay)
		}
		w.log.Info("netwatch: subscribed again; reporting every interface")
		if !w.resync(ctx) {
			sub.stop()
			return
		}
	}
}

// pump forwards events until ctx ends (nil) or a subscription fails (its error).
func (w *watcher) pump(ctx context.Context, sub *subscription) error {
	for {
		var name string
		var up bool
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-sub.links:
			if !ok {
				return sub.lastErr()
			}
			name = u.Attrs().Name
			up = w.linkUp(u.Link)
			if u.Header.Type == unix.RTM_DELLINK {
				up = false
			}
		case u, ok := <-sub.addrs:
			if !ok {
				return sub.lastErr()
			}
			l, err := w.h.LinkByIndex(u.LinkIndex)
			if err != nil {
				continue // gone already; its RTM_DELLINK follows
			}
			name = l.Attrs().Name
			up = l.Attrs().Flags&net.FlagUp != 0 && hasAddr(w.h, u.LinkIndex)
		}
		if !w.send(ctx, Event{Device: name, Up: up}) {
			return nil
		}
	}
}

// resync reports the state of every interface (after events may have been
// lost); false if ctx ended.
func (w *watcher) resync(ctx context.Context) bool {
	ls, err := w.h.LinkList()
	if err != nil {
		w.log.Warn("netwatch: listing interfaces", "err", err)
		return ctx.Err() == nil
	}
	for _, l := range ls {
		if !w.send(ctx, Event{Device: l.Attrs().Name, Up: w.linkUp(l)}) {
			return false
		}
	}
	return true
}

func (w *watcher) send(ctx context.Context, ev Event) bool {
	select {
	case w.out <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// linkUp: administratively and operationally up, with an address.
func (w *watcher) linkUp(l netlink.Link) bool {
	a := l.Attrs()
	return a.Flags&net.FlagUp != 0 && a.OperState != netlink.OperDown && hasAddr(w.h, a.Index)
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
