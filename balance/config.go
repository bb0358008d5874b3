package balance

import (
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"time"

	"github.com/braid-vpn/braid/internal/tomlerr"
	"github.com/braid-vpn/braid/wire"
)

// Defaults of the balancer's tunables; docs/scale.md and docs/config.md
// quote them, and Parse is the only place that applies them.
const (
	// DefaultHealthInterval: a server is checked this often, so a dead one
	// leaves the initiation map within about DefaultFailures intervals
	// (1.5 s): before the clients of a server that stopped cleanly (they
	// handshake again at once) retry their first initiation (1 s), and well
	// before those of a killed one notice (5 s).
	DefaultHealthInterval = 500 * time.Millisecond
	// DefaultHealthTimeout bounds one check; a healthy server answers
	// /healthz in well under a millisecond on a LAN.
	DefaultHealthTimeout = 500 * time.Millisecond
	// DefaultFailures checks in a row fail before a server is taken out: one
	// lost TCP handshake must not move every new client away.
	DefaultFailures = 3
	// DefaultRises checks in a row succeed before it is put back, so a
	// flapping server does not attract fresh handshakes on every blip.
	DefaultRises = 2
	// DefaultRoutePoll: clients' inner routes follow their sessions this
	// often; a client that moved server is reachable again within it (and
	// the servers' 100 ms cache of the page). Each poll is one small GET per
	// server.
	DefaultRoutePoll = 500 * time.Millisecond
	// DefaultMarkBase + server id is the fwmark that steers to that server.
	DefaultMarkBase = 0x62720000
	// DefaultTableBase + server id is the routing table holding the route to
	// that server; DefaultRulePriority the priority of the fwmark rules.
	DefaultTableBase    = 7200
	DefaultRulePriority = 7200
	// DefaultRouteTable is where client inner routes go (main).
	DefaultRouteTable = 254
	// DefaultNftTable names the nftables table the balancer owns.
	DefaultNftTable = "braid_balance"
)

// InitSpreadBits is how many bits below the server id the init map also
// reads (at most up to wire.MaxServerIDBits in all, the top bits a rekey
// copies from its server's index; the rest of those are random per session).
// They split a dead server's own values over the live servers: its clients'
// rekeys, which name it, spread out instead of landing on one server.
const InitSpreadBits = 4

// InitBits is how many top bits of an initiation's sender index key the init
// map: server_id_bits plus InitSpreadBits, at most wire.MaxServerIDBits.
func (c *Config) InitBits() int { return min(c.ServerIDBits+InitSpreadBits, wire.MaxServerIDBits) }

// Config is a balancer's configuration (docs/config.md, "balancer").
type Config struct {
	// Path is the file it came from ("" when built in code).
	Path string
	// VIP and Port are the service address the clients dial; every server
	// holds VIP on a local interface and listens on VIP:Port.
	VIP  netip.Addr
	Port uint16
	// ServerIDBits is the servers' server_id_bits: the top bits of a session
	// index that name its server.
	ServerIDBits int
	Servers      []Server

	HealthInterval time.Duration
	HealthTimeout  time.Duration
	Failures       int
	Rises          int
	RoutePoll      time.Duration

	MarkBase     uint32
	TableBase    int
	RulePriority int
	RouteTable   int
	NftTable     string
}

// Server is one braid server behind the balancer.
type Server struct {
	// ID is its server_id.
	ID uint32
	// Address is where the balancer forwards its datagrams (a next hop on
	// the backend LAN).
	Address netip.Addr
	// Control is the base URL of its control HTTP server ([control]
	// metrics), where /healthz and /sessions are read.
	Control *url.URL
}

// File mirrors the balancer's TOML file key for key.
type File struct {
	VIP            string       `toml:"vip"`
	Port           int64        `toml:"port"`
	ServerIDBits   int64        `toml:"server_id_bits"`
	HealthInterval string       `toml:"health_interval,omitempty"`
	HealthTimeout  string       `toml:"health_timeout,omitempty"`
	Failures       int64        `toml:"failures,omitempty"`
	Rises          int64        `toml:"rises,omitempty"`
	RoutePoll      string       `toml:"route_poll,omitempty"`
	MarkBase       int64        `toml:"mark_base,omitempty"`
	TableBase      int64        `toml:"table_base,omitempty"`
	RulePriority   int64        `toml:"rule_priority,omitempty"`
	RouteTable     int64        `toml:"route_table,omitempty"`
	NftTable       string       `toml:"nft_table,omitempty"`
	Servers        []FileServer `toml:"servers"`
}

// FileServer is one [[servers]] entry.
type FileServer struct {
	ID      int64  `toml:"id"`
	Address string `toml:"address"`
	Control string `toml:"control"`
}

// Load reads and validates the balancer config at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, tomlerr.FileError(path, err)
	}
	return Parse(path, data)
}

// Parse validates data as the contents of the file at path (which names
// the file in errors). Every error names the file, the key and the problem.
func Parse(path string, data []byte) (*Config, error) {
	var f File
	if err := tomlerr.Decode(path, data, &f); err != nil {
		return nil, err
	}
	return f.Config(path)
}

// Config validates f; path names the file in errors.
func (f *File) Config(path string) (*Config, error) {
	p := checker{file: path}
	c := &Config{Path: path}
	if a, err := netip.ParseAddr(f.VIP); err != nil {
		p.fail("vip", "%q is not an IP address", f.VIP)
	} else if a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() {
		p.fail("vip", "%v cannot be a service address", a)
	} else {
		c.VIP = a.Unmap()
	}
	if f.Port < 1 || f.Port > 65535 {
		p.fail("port", "%d out of range (1..65535)", f.Port)
	}
	c.Port = uint16(f.Port)
	if f.ServerIDBits < 1 || f.ServerIDBits > wire.MaxServerIDBits {
		p.fail("server_id_bits", "%d out of range (1..%d); it must equal the servers' server_id_bits", f.ServerIDBits, wire.MaxServerIDBits)
	} else {
		c.ServerIDBits = int(f.ServerIDBits)
	}
	c.HealthInterval = p.duration("health_interval", f.HealthInterval, DefaultHealthInterval)
	// Unset, the timeout shrinks with a short interval: checks never overlap.
	c.HealthTimeout = p.duration("health_timeout", f.HealthTimeout, min(DefaultHealthTimeout, c.HealthInterval))
	c.RoutePoll = p.duration("route_poll", f.RoutePoll, DefaultRoutePoll)
	if c.HealthTimeout > c.HealthInterval && c.HealthInterval > 0 {
		p.fail("health_timeout", "%v is longer than health_interval %v", c.HealthTimeout, c.HealthInterval)
	}
	c.Failures = p.count("failures", f.Failures, DefaultFailures)
	c.Rises = p.count("rises", f.Rises, DefaultRises)
	c.MarkBase = uint32(p.ranged("mark_base", f.MarkBase, DefaultMarkBase, 1, 1<<32-1<<wire.MaxServerIDBits))
	c.TableBase = int(p.ranged("table_base", f.TableBase, DefaultTableBase, 1, 1<<31-1<<wire.MaxServerIDBits))
	c.RulePriority = int(p.ranged("rule_priority", f.RulePriority, DefaultRulePriority, 1, 32765))
	c.RouteTable = int(p.ranged("route_table", f.RouteTable, DefaultRouteTable, 1, 1<<31-1))
	c.NftTable = f.NftTable
	if c.NftTable == "" {
		c.NftTable = DefaultNftTable
	} else if len(c.NftTable) > 255 {
		p.fail("nft_table", "name longer than 255 bytes")
	}
	if len(f.Servers) == 0 {
		p.fail("servers", "no [[servers]]: the balancer needs at least one")
	}
	seen := map[uint32]int{}
	for i, fs := range f.Servers {
		key := func(k string) string { return fmt.Sprintf("servers[%d].%s", i, k) }
		var s Server
		if c.ServerIDBits > 0 && (fs.ID < 0 || fs.ID >= 1<<c.ServerIDBits) {
			p.fail(key("id"), "%d does not fit in server_id_bits = %d (0..%d)", fs.ID, c.ServerIDBits, 1<<c.ServerIDBits-1)
		}
		s.ID = uint32(fs.ID)
		if j, dup := seen[s.ID]; dup {
			p.fail(key("id"), "%d is also servers[%d]'s id", fs.ID, j)
		}
		seen[s.ID] = i
		if a, err := netip.ParseAddr(fs.Address); err != nil {
			p.fail(key("address"), "%q is not an IP address", fs.Address)
		} else if a = a.Unmap(); a.Is4() != c.VIP.Is4() && c.VIP.IsValid() {
			p.fail(key("address"), "%v is not of the vip's family (%v)", a, c.VIP)
		} else {
			s.Address = a
		}
		u, err := url.Parse(fs.Control)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.fail(key("control"), "%q is not an http:// or https:// URL (the server's [control] metrics address)", fs.Control)
		}
		s.Control = u
		c.Servers = append(c.Servers, s)
	}
	slices.SortFunc(c.Servers, func(a, b Server) int { return int(a.ID) - int(b.ID) })
	if p.err != nil {
		return nil, p.err
	}
	return c, nil
}

// checker keeps the first validation error, as config's parser does.
type checker struct {
	file string
	err  error
}

func (p *checker) fail(key, format string, args ...any) {
	if p.err == nil {
		p.err = &tomlerr.Error{File: p.file, Key: key, Msg: fmt.Sprintf(format, args...)}
	}
}

func (p *checker) duration(key, s string, def time.Duration) time.Duration {
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		p.fail(key, "%q is not a positive duration (like 1s or 500ms)", s)
		return def
	}
	return d
}

func (p *checker) count(key string, v, def int64) int {
	return int(p.ranged(key, v, def, 1, 1000))
}

// ranged returns v, or def when v is 0 (unset), failing outside lo..hi.
func (p *checker) ranged(key string, v, def, lo, hi int64) int64 {
	if v == 0 {
		return def
	}
	if v < lo || v > hi {
		p.fail(key, "%d out of range (%d..%d)", v, lo, hi)
		return def
	}
	return v
}
