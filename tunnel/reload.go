package tunnel

import (
	"fmt"
	"slices"
	"time"

	"github.com/braid-vpn/braid/wire"
)

// addClient registers a server's client. Caller holds e.mu or owns e.
func (e *Engine) addClient(c ClientPeer) error {
	if _, dup := e.byKey[c.PublicKey]; dup {
		return fmt.Errorf("tunnel: client %s listed twice", c.PublicKey)
	}
	name := c.Name
	if name == "" {
		name = c.PublicKey.String()[:8]
	}
	p, err := e.newPeer(name, c.PublicKey, c.PSK, c.AllowedIPs, c.Params, false)
	if err != nil {
		return err
	}
	e.peers = append(e.peers, p)
	e.byKey[p.pub] = p
	return nil
}

// Reload applies a new configuration without dropping sessions (SIGHUP): a client
// opens sockets for new local paths and closes those of removed ones; a server adds,
// removes and updates clients. Keys, role, TUN and listen addresses do not change on
// reload.
func (e *Engine) Reload(cfg Config) error {
	now := time.Now()
	switch e.role {
	case Client:
		return e.reloadClient(cfg, now)
	default:
		return e.reloadServer(cfg)
	}
}

func (e *Engine) reloadClient(cfg Config, now time.Time) error {
	p := e.server
	e.mu.Lock()
	p.mu.Lock()
	// Weights follow the paths, so they reload with them (scheduler, reorder and
	// congestion settings do not).
	p.params.Weights = cfg.Params.Weights
	opened, err := e.syncClientPaths(cfg.LocalPaths, cfg.Subflows, cfg.Servers, now)
	e.cfg.LocalPaths, e.cfg.Subflows, e.cfg.Servers = cfg.LocalPaths, cfg.Subflows, cfg.Servers
	w := &writer{e: e}
	if p.cur != nil {
		// New paths make themselves known to the server (which challenges them).
		for _, ps := range p.paths {
			if ps != nil && slices.Contains(opened, ps.cs) {
				p.sendControl(w, ps, now, framePing, [wire.ChallengeLen]byte{})
			}
		}
	}
	p.mu.Unlock()
	e.mu.Unlock()
	w.flush()
	for _, cs := range opened {
		e.startReader(cs)
	}
	return err
}

func (e *Engine) reloadServer(cfg Config) error {
	var removed []*peer
	defer func() {
		now := time.Now()
		for _, p := range removed {
			p.mu.Lock()
			p.endSession(now, false)
			p.mu.Unlock()
		}
	}()
	e.mu.Lock()
	defer e.mu.Unlock()
	want := make(map[[32]byte]ClientPeer)
	for _, c := range cfg.Clients {
		want[c.PublicKey] = c
	}
	var kept []*peer
	for _, p := range e.peers {
		c, ok := want[p.pub]
		if !ok {
			removed = append(removed, p)
			delete(e.byKey, p.pub)
			e.log.Info("client removed", "peer", p.name)
			continue
		}
		p.mu.Lock()
		p.allowed = slices.Clone(c.AllowedIPs)
		p.psk = c.PSK
		if c.Name != "" {
			p.name = c.Name
		}
		if !paramsEqual(p.pinned, c.Params) {
			p.pinned = c.Params
			p.applyParams(p.params)
		}
		p.mu.Unlock()
		kept = append(kept, p)
		delete(want, c.PublicKey)
	}
	e.peers = kept
	for _, c := range cfg.Clients {
		if _, isNew := want[c.PublicKey]; isNew {
			if err := e.addClient(c); err != nil {
				return err
			}
			e.log.Info("client added", "peer", e.peers[len(e.peers)-1].name)
		}
	}
	e.allowed.Store(buildAllowedIPs(e.peers))
	e.cfg.Clients = cfg.Clients
	return nil
}

func paramsEqual(a, b Params) bool {
	return a.Scheduler == b.Scheduler && a.Reorder == b.Reorder && a.ReorderHold == b.ReorderHold &&
		a.Congestion == b.Congestion && slices.Equal(a.Weights, b.Weights)
}
