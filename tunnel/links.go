package tunnel

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/braid-vpn/braid/path"
	"github.com/braid-vpn/braid/wire"
)

// A client's interfaces come and go (a USB modem plugged in, Wi-Fi joining a
// network). The engine follows them through Config.LinkEvents (netlink on Linux,
// package netwatch):
//
//   - a configured interface that does not exist yet, or has no address, is a
//     path "waiting", not an error; when it appears its sockets open and its paths
//     start at once;
//   - when it goes down or loses its last address its paths leave at once (no
//     wait for the liveness timer) and the client tells the server with a
//     PATH_GONE frame on a path that still works, so the server stops sending
//     there too;
//   - interfaces may be given as patterns ("wwan*", "wl*") matched against the
//     interfaces present at each change.

// LinkEvent says an interface changed.
type LinkEvent struct {
	Device string
	// Up: the interface is up and has an address; false: it went down or lost
	// its last address.
	Up bool
}

// linkSettle is how long the engine waits after an event for the ones that
// usually follow it (link up, then addresses) before it reopens sockets.
const linkSettle = 50 * time.Millisecond

// routineLinks follows interface events (client).
func (e *Engine) routineLinks(events <-chan LinkEvent) {
	defer e.wg.Done()
	var settle <-chan time.Time
	for {
		select {
		case <-e.closing:
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if !ev.Up {
				e.linkGone(ev.Device, time.Now())
			}
			if settle == nil {
				settle = time.After(linkSettle)
			}
		case <-settle:
			settle = nil
			e.resyncPaths(time.Now())
		}
	}
}

// linkGone takes the paths over device out of service at once and tells the
// server which of its paths to stop using.
func (e *Engine) linkGone(device string, now time.Time) {
	p := e.server
	e.mu.RLock()
	defer e.mu.RUnlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	w := &writer{e: e}
	defer w.flush()
	var gone []uint16
	for _, ps := range p.paths {
		if ps == nil || ps.cs.local.Device != device || ps.sender.State() == path.Down {
			continue
		}
		ps.sender.ForceDown()
		gone = append(gone, ps.id)
		e.log.Info("path state", "peer", p.name, "path", ps.id, "local", device, "remote", ps.ep.Remote.String(), "state", "down", "reason", "interface down or without address")
	}
	if len(gone) == 0 || p.cur == nil {
		return
	}
	for _, ps := range p.paths {
		if ps != nil && ps.validated && ps.sender.Usable() {
			p.sendPathGone(w, ps, gone, now)
			return
		}
	}
}

// sendPathGone sends PATH_GONE frames for ids on ps.
func (p *peer) sendPathGone(w *writer, ps *pathState, ids []uint16, now time.Time) {
	pb := p.e.pool.get()
	b := pb.b[innerStart:innerStart]
	for _, id := range ids {
		b = wire.AppendPathGone(b, id)
	}
	p.sealAndQueue(w, ps, pb, len(b), true, now)
}

// peerPathGone takes our paths for the peer's path id out of service (server).
func (p *peer) peerPathGone(id uint16, now time.Time) {
	for _, ps := range p.paths {
		if ps != nil && ps.peerID == int(id) && ps.sender.State() != path.Down {
			ps.sender.ForceDown()
			p.logClient(now, slog.LevelInfo, "path state", "path", ps.id, "remote", ps.ep.Remote.String(), "state", "down", "reason", "the client's interface left")
		}
	}
}

// resyncPaths makes the client's sockets and paths match its configuration and
// the interfaces present now (patterns expanded, waiting paths retried).
func (e *Engine) resyncPaths(now time.Time) {
	e.mu.RLock()
	cfg := Config{LocalPaths: e.cfg.LocalPaths, Subflows: e.cfg.Subflows, Servers: e.cfg.Servers, Params: Params{Weights: e.server.params.Weights}}
	e.mu.RUnlock()
	if err := e.reloadClient(cfg, now); err != nil {
		e.log.Debug("paths after an interface change", "err", err)
	}
}

// isPattern reports whether a configured interface name is a pattern.
func isPattern(dev string) bool { return strings.ContainsAny(dev, "*?[") }

// expandLocals replaces interface patterns by the present interfaces that match
// them (keeping each pattern's priority), in interface order.
func (e *Engine) expandLocals(locals []LocalPath) []LocalPath {
	var out []LocalPath
	var names []string
	for _, l := range locals {
		if !isPattern(l.Device) {
			out = append(out, l)
			continue
		}
		if names == nil {
			names = e.interfaceNames()
		}
		matched := false
		for _, n := range names {
			if ok, _ := filepath.Match(l.Device, n); ok && !containsDevice(out, n) {
				m := l
				m.Device = n
				out = append(out, m)
				matched = true
			}
		}
		if !matched {
			e.setWaiting(l.Device, "no interface matches")
		}
	}
	return out
}

func containsDevice(ls []LocalPath, dev string) bool {
	for _, l := range ls {
		if l.Device == dev {
			return true
		}
	}
	return false
}

// interfaceNames lists the interfaces present (Config.Interfaces, or the system's).
func (e *Engine) interfaceNames() []string {
	if e.cfg.Interfaces != nil {
		return e.cfg.Interfaces()
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return []string{}
	}
	names := make([]string, 0, len(ifs))
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	return names
}

// setWaiting records a local path that has no socket yet. Caller holds e.mu (and
// the server peer's mu) or owns e.
func (e *Engine) setWaiting(local, why string) {
	if e.waiting == nil {
		e.waiting = make(map[string]string)
	}
	e.waiting[local] = why
}

// waitingError reports whether a socket error means the local path is not there
// yet (no such interface, address not assigned), as opposed to a real failure
// such as missing privileges.
func waitingError(err error) bool {
	if errors.Is(err, os.ErrPermission) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "not found") || strings.Contains(msg, "address not available") ||
		strings.Contains(msg, "no such device") || strings.Contains(msg, "network is down")
}
