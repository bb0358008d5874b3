// Package balance steers braid's UDP datagrams to N braid servers with the
// kernel's nftables, statelessly, and keeps that steering and the routes
// towards the clients' inner addresses in step with the servers' health and
// sessions. docs/scale.md explains the design; this is the summary.
//
// Every datagram is steered by its payload, never by its addresses, so all
// paths of a multipath client reach the same server:
//
//   - data (type 4) by the top server_id_bits of the receiver index at bytes
//     4..8, the server id its server put there;
//   - initiations (type 1) by the same bits of the sender index at bytes
//     4..8, through a map with one entry per possible value, each naming a
//     live server. A client rekeying a live session copies its server's id
//     into those bits, so the rekey returns to that server; a fresh
//     handshake's bits are random, so fresh clients spread over the live
//     servers.
//
// A datagram is steered by setting a fwmark in a raw-priority prerouting
// chain that also marks it notrack (conntrack never pins a flow to a server),
// and a policy rule per server routes that mark to the server, which holds
// the service address (VIP) itself and answers the client directly.
//
// Install sets this up in a network namespace and returns a *Balancer; its
// Run loop health-checks the servers (rewriting the initiation map when one
// goes down or comes back) and polls their sessions to keep one route per
// client prefix via the server that holds the session; Close removes all of
// it.
package balance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/braid-vpn/braid/wire"
)

// Balancer is an installed balancer. Its methods are safe for concurrent use.
type Balancer struct {
	cfg    *Config
	log    *slog.Logger
	client *http.Client
	k      *kernel

	mu      sync.Mutex
	health  []health              // by index in cfg.Servers
	initMap []uint32              // sender bits value → server id
	routes  map[netip.Prefix]int  // installed client prefix → server index
	refused map[netip.Prefix]bool // prefixes whose route the kernel refused (warned)
	closed  bool
}

// Options tune Install; the zero value installs in the calling process's
// namespace.
type Options struct {
	// Netns is the path of the network namespace to install in, such as
	// /run/netns/NAME ("" = the caller's). Health checks and session polls
	// are dialled from inside it too, unless Client is set.
	Netns string
	// Log receives state changes (nil: slog.Default()).
	Log *slog.Logger
	// Client makes the health checks and session polls (nil: one that dials
	// from Netns, with no proxy).
	Client *http.Client
}

// ServerState is one server as the balancer sees it.
type ServerState struct {
	ID      uint32
	Address netip.Addr
	Live    bool
	// Prefixes is how many client prefixes are routed to it now.
	Prefixes int
	// LastError is why the last health check or session poll failed ("").
	LastError string
}

// State is a snapshot of the balancer.
type State struct {
	Servers []ServerState
	// InitMap[v] is the server id an initiation whose sender index has top
	// InitBits bits v is steered to; the top server_id_bits of v are the
	// server id a rekey names (InitBits: see Config.InitBits).
	InitMap  []uint32
	InitBits int
	// Routes maps each routed client prefix to the id of its server.
	Routes map[netip.Prefix]uint32
}

type health struct {
	live      bool
	fails     int
	rises     int
	lastError string
}

// Install sets up the nftables table, the fwmark rules and per-server routing
// tables described in the package comment, in the namespace opt.Netns. All
// servers start live. A table of the same name left by a balancer that did not
// shut down cleanly is replaced.
func Install(cfg *Config, opt Options) (*Balancer, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	b := &Balancer{cfg: cfg, log: opt.Log, client: opt.Client, routes: map[netip.Prefix]int{}, refused: map[netip.Prefix]bool{}}
	if b.log == nil {
		b.log = slog.Default()
	}
	b.health = make([]health, len(cfg.Servers))
	for i := range b.health {
		b.health[i].live = true
	}
	k, err := openKernel(cfg, opt.Netns)
	if err != nil {
		return nil, err
	}
	b.k = k
	if b.client == nil {
		b.client = k.httpClient()
	}
	b.initMap = b.buildInitMap()
	if err := k.install(b.initMap); err != nil {
		k.remove()
		k.close()
		return nil, err
	}
	return b, nil
}

// check rejects a Config built in code that Parse would have refused.
func (c *Config) check() error {
	if !c.VIP.IsValid() || c.Port == 0 || c.ServerIDBits < 1 || c.ServerIDBits > wire.MaxServerIDBits || len(c.Servers) == 0 {
		return errors.New("balance: config needs vip, port, server_id_bits (1..16) and servers (use Parse or Load)")
	}
	if c.NftTable == "" || c.HealthInterval <= 0 || c.HealthTimeout <= 0 || c.RoutePoll <= 0 || c.Failures < 1 || c.Rises < 1 || c.TableBase < 1 || c.RouteTable < 1 {
		return errors.New("balance: config lacks defaults (use Parse or Load, or File.Config)")
	}
	for _, s := range c.Servers {
		if s.ID >= 1<<c.ServerIDBits || !s.Address.IsValid() || s.Control == nil {
			return fmt.Errorf("balance: server %d: id, address and control URL must be valid", s.ID)
		}
	}
	return nil
}

// Close removes everything Install and Run installed: the nftables table,
// the fwmark rules, the per-server tables and the client routes. It is
// idempotent. A Run still going touches nothing after it, and returns when
// its context is done.
func (b *Balancer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	err := b.k.remove()
	b.k.close()
	return err
}

// SetLive marks the server with id up or down at once, as the health checker
// does after Failures or Rises checks, and rewrites the initiation map; the
// checks go on from there (a server marked down that answers comes back
// after Rises checks). Tests and lab scenarios use it to skip the waiting.
func (b *Balancer) SetLive(id uint32, live bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := b.index(id)
	if i < 0 {
		return fmt.Errorf("balance: no server with id %d", id)
	}
	b.health[i].live = live
	b.health[i].fails, b.health[i].rises = 0, 0
	return b.rewriteLocked()
}

func (b *Balancer) index(id uint32) int {
	for i, s := range b.cfg.Servers {
		if s.ID == id {
			return i
		}
	}
	return -1
}

// State returns a snapshot.
func (b *Balancer) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := State{InitMap: slices.Clone(b.initMap), InitBits: b.cfg.InitBits(), Routes: map[netip.Prefix]uint32{}}
	count := make([]int, len(b.cfg.Servers))
	for p, i := range b.routes {
		st.Routes[p] = b.cfg.Servers[i].ID
		count[i]++
	}
	for i, s := range b.cfg.Servers {
		h := b.health[i]
		st.Servers = append(st.Servers, ServerState{ID: s.ID, Address: s.Address, Live: h.live, Prefixes: count[i], LastError: h.lastError})
	}
	return st
}

// rewriteLocked recomputes the initiation map from the live set and writes
// the entries that differ from the installed map. After a failed write the
// installed map is unknown, so the next call writes every entry. Caller
// holds b.mu.
func (b *Balancer) rewriteLocked() error {
	if b.closed {
		return errors.New("balance: closed")
	}
	next := b.buildInitMap()
	if b.initMap != nil && slices.Equal(next, b.initMap) {
		return nil
	}
	if err := b.k.updateInitMap(b.initMap, next); err != nil {
		b.initMap = nil
		return fmt.Errorf("balance: writing the initiation map: %w", err)
	}
	b.initMap = next
	return nil
}

// buildInitMap assigns every value of the sender index's server-id bits to
// a live server: a value that is a live server's id to that server (a rekey
// goes home), every other value to the live server holding the fewest values
// so far, so that fresh handshakes, whose bits are random, spread evenly.
// Only the own-id entries must stay put while their server lives; the others
// matter only at the instant of a fresh handshake and are reassigned freely.
// With no server live the map is built as if all were: nothing better
// exists, and the first to come back is then found by rekeys at once.
// Caller holds b.mu (or owns b).
func (b *Balancer) buildInitMap() []uint32 {
	var live []uint32 // sorted: cfg.Servers is
	for i, s := range b.cfg.Servers {
		if b.health[i].live {
			live = append(live, s.ID)
		}
	}
	if len(live) == 0 {
		for _, s := range b.cfg.Servers {
			live = append(live, s.ID)
		}
	}
	bits, spread := b.cfg.ServerIDBits, b.cfg.InitBits()-b.cfg.ServerIDBits
	m := make([]uint32, 1<<(bits+spread))
	isLive := make(map[uint32]bool, len(live))
	load := make(map[uint32]int, len(live))
	for _, id := range live {
		isLive[id] = true
		load[id] = 1 << spread // its own values
	}
	for v := range m {
		if id := uint32(v) >> spread; isLive[id] {
			m[v] = id
			continue
		}
		best := live[0]
		for _, id := range live[1:] {
			if load[id] < load[best] {
				best = id
			}
		}
		m[v] = best
		load[best]++
	}
	return m
}

// Run health-checks every server each HealthInterval and polls their
// sessions each RoutePoll until ctx is done, and returns ctx's error. A
// failed kernel update is logged and retried at the next tick: the rules
// in place keep steering meanwhile.
func (b *Balancer) Run(ctx context.Context) error {
	hc := time.NewTicker(b.cfg.HealthInterval)
	defer hc.Stop()
	rp := time.NewTicker(b.cfg.RoutePoll)
	defer rp.Stop()
	b.pollRoutes(ctx)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-hc.C:
			if err := b.checkHealth(ctx); err != nil {
				b.log.Error("health", "err", err)
			}
		case <-rp.C:
			b.pollRoutes(ctx)
		}
	}
}
