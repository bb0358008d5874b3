package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/bits"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/braid-vpn/braid/budget"
	"github.com/braid-vpn/braid/internal/tomlerr"
	"github.com/braid-vpn/braid/keys"
)

// Load reads, parses and validates the config file at path. Key files named
// in it are read too, relative to the file's directory.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fileError(path, err)
	}
	return Parse(path, data)
}

// Parse parses and validates data as the contents of the file at path. path
// names the file in errors and anchors relative key file and socket paths;
// the key files are read from disk.
func Parse(path string, data []byte) (*Config, error) {
	raw, err := decode(path, data)
	if err != nil {
		return nil, err
	}
	p := &parser{file: path, dir: filepath.Dir(path)}
	cfg := p.build(raw)
	if p.err != nil {
		return nil, p.err
	}
	cfg.Warnings = p.warnings
	return cfg, nil
}

// SocketPath returns the control socket a config file names, checking the
// file's syntax and keys but nothing else: `braid status -c FILE` must work
// for an operator who may read the config but not the private key file.
func SocketPath(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fileError(path, err)
	}
	raw, err := decode(path, data)
	if err != nil {
		return "", err
	}
	p := &parser{file: path, dir: filepath.Dir(path)}
	var cfg Config
	cfg.Tun.Name = p.tunName(raw.Tun.Name)
	p.control(&cfg, &raw.Control)
	if p.err != nil {
		return "", p.err
	}
	return cfg.Control.Socket, nil
}

func fileError(path string, err error) error {
	return tomlerr.FileError(path, err)
}

func decode(path string, data []byte) (*File, error) {
	var raw File
	if err := tomlerr.Decode(path, data, &raw); err != nil {
		return nil, err
	}
	return &raw, nil
}

// parser keeps the first validation error; later checks still run (cheaply)
// but cannot replace it, which keeps build a straight list of checks. It
// collects every warning, each key file's once.
type parser struct {
	file     string
	dir      string
	err      error
	warnings []string
	// warned holds the key files already warned about: a server-wide
	// preshared key file may also be named by clients.
	warned map[string]bool
}

func (p *parser) fail(key, format string, args ...any) {
	if p.err == nil {
		p.err = &Error{File: p.file, Key: key, Msg: fmt.Sprintf(format, args...)}
	}
}

func (p *parser) failErr(key string, err error) {
	if p.err == nil {
		p.err = &Error{File: p.file, Key: key, Msg: err.Error(), Err: err}
	}
}

// warn records a warning, rendered as an Error is: "file: key: problem".
func (p *parser) warn(key, format string, args ...any) {
	e := &Error{File: p.file, Key: key, Msg: fmt.Sprintf(format, args...)}
	p.warnings = append(p.warnings, e.Error())
}

func (p *parser) build(raw *File) *Config {
	cfg := &Config{Path: p.file}

	switch raw.Role {
	case "":
		p.fail("role", `required ("client" or "server")`)
		return cfg
	case string(RoleClient), string(RoleServer):
		cfg.Role = Role(raw.Role)
	default:
		p.fail("role", `unknown role %q (valid: client, server)`, raw.Role)
		return cfg
	}

	// The tables of the other role are refused rather than ignored: a
	// server.clients list in a client's file means the operator edited the
	// wrong file, and ignoring it would hide that.
	if cfg.Role == RoleClient && raw.Server != nil {
		p.fail("server", `[server] table not allowed when role = "client"`)
	}
	if cfg.Role == RoleServer && raw.Client != nil {
		p.fail("client", `[client] table not allowed when role = "server"`)
	}

	if raw.PrivateKeyFile == "" {
		p.fail("private_key_file", "required (create one with: braid genkey > %s.key)", cfg.Role)
	} else {
		cfg.PrivateKeyFile = p.resolve(raw.PrivateKeyFile)
		cfg.PrivateKey = p.readKey("private_key_file", cfg.PrivateKeyFile)
		cfg.PublicKey = cfg.PrivateKey.Public()
	}
	if raw.PresharedKeyFile != "" {
		cfg.PresharedKeyFile = p.resolve(raw.PresharedKeyFile)
		cfg.PresharedKey = p.readKey("preshared_key_file", cfg.PresharedKeyFile)
	}

	level := orDefault(raw.LogLevel, DefaultLogLevel)
	switch level {
	case "debug":
		cfg.LogLevel = slog.LevelDebug
	case "info":
		cfg.LogLevel = slog.LevelInfo
	case "warn":
		cfg.LogLevel = slog.LevelWarn
	case "error":
		cfg.LogLevel = slog.LevelError
	default:
		p.fail("log_level", "unknown log level %q (valid: %s)", level, strings.Join(LogLevels, ", "))
	}

	cfg.Offload = DefaultOffload
	if raw.Offload != nil {
		cfg.Offload = *raw.Offload
	}
	cfg.CryptoWorkers = AutoCryptoWorkers
	if w := raw.CryptoWorkers; w != nil {
		if *w < 0 || *w > MaxCryptoWorkers {
			p.fail("crypto_workers", "%d out of range (0..%d; leave it out for the default)", *w, MaxCryptoWorkers)
		} else {
			cfg.CryptoWorkers = int(*w)
		}
	}

	p.tun(cfg, &raw.Tun)

	switch cfg.Role {
	case RoleClient:
		if raw.Client == nil {
			p.fail("client", `missing [client] table (required when role = "client")`)
		} else {
			cfg.Client = p.client(cfg, raw.Client)
		}
	case RoleServer:
		if raw.Server == nil {
			p.fail("server", `missing [server] table (required when role = "server")`)
		} else {
			cfg.Server = p.server(cfg, raw.Server)
		}
	}

	p.security(cfg, &raw.Security)
	p.control(cfg, &raw.Control)
	return cfg
}

func (p *parser) resolve(name string) string {
	if filepath.IsAbs(name) {
		return filepath.Clean(name)
	}
	return filepath.Join(p.dir, name)
}

func (p *parser) readKey(key, file string) keys.Key {
	k, err := keys.ReadFile(file)
	if err != nil {
		p.failErr(key, err)
		return keys.Key{}
	}
	if k.IsZero() {
		p.fail(key, "%s: key is all zeros", file)
	}
	p.checkKeyFileMode(key, file)
	return k
}

// checkKeyFileMode warns, as wg does, when a secret key file is accessible to
// users other than its owner. It is a warning, not an error: the key may
// already have leaked, and refusing to start would not undo that.
func (p *parser) checkKeyFileMode(key, file string) {
	if p.warned[file] {
		return
	}
	fi, err := os.Stat(file)
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	perm := fi.Mode().Perm()
	var who string
	switch g, o := perm&0o070 != 0, perm&0o007 != 0; {
	case g && o:
		who = "its group and all users"
	case g:
		who = "its group"
	case o:
		who = "all users"
	default:
		return
	}
	if p.warned == nil {
		p.warned = map[string]bool{}
	}
	p.warned[file] = true
	p.warn(key, "%s is accessible to %s (mode %04o); a secret key should be readable by its owner only: chmod 600 %s", file, who, perm, file)
}

func (p *parser) tunName(name string) string {
	name = orDefault(name, DefaultTunName)
	if err := checkIfName(name); err != nil {
		p.fail("tun.name", "%q %v", name, err)
	}
	return name
}

func (p *parser) tun(cfg *Config, raw *FileTun) {
	t := &cfg.Tun
	t.Name = p.tunName(raw.Name)

	if len(raw.Address) == 0 {
		p.fail("tun.address", `required (the tunnel's own inner addresses, e.g. ["100.64.0.2/24"])`)
	}
	hasV6 := false
	for i, s := range raw.Address {
		key := fmt.Sprintf("tun.address[%d]", i)
		pfx, ok := p.prefix(key, s)
		if !ok {
			continue
		}
		a := pfx.Addr()
		switch {
		case pfx.Bits() == 0:
			p.fail(key, "%q has prefix length 0", s)
		case a.IsUnspecified() || a.IsMulticast() || a.IsLoopback():
			p.fail(key, "%q is not a usable interface address", s)
		}
		if a.Is6() {
			hasV6 = true
		}
		for j, q := range t.Address {
			if q.Addr() == a {
				p.fail(key, "%s duplicates tun.address[%d]", a, j)
			}
		}
		t.Address = append(t.Address, pfx)
	}

	t.MTU = DefaultMTU
	if raw.MTU != nil {
		m := *raw.MTU
		switch {
		case m < MinMTU || m > MaxMTU:
			p.fail("tun.mtu", "%d out of range (%d..%d)", m, MinMTU, MaxMTU)
		case hasV6 && m < MinMTUIPv6:
			p.fail("tun.mtu", "%d is below %d, the IPv6 minimum, and tun.address has an IPv6 address", m, MinMTUIPv6)
		}
		t.MTU = int(m)
	}

	t.Routes = p.maskedPrefixes("tun.routes", raw.Routes)
}

// prefix parses an address/bits prefix, keeping host bits.
func (p *parser) prefix(key, s string) (netip.Prefix, bool) {
	pfx, err := netip.ParsePrefix(s)
	if err != nil {
		if a, aerr := netip.ParseAddr(s); aerr == nil {
			p.fail(key, "%q is not a prefix (missing /bits; did you mean \"%s/%d\"?)", s, a, a.BitLen())
		} else {
			p.fail(key, "%q is not a prefix", s)
		}
		return netip.Prefix{}, false
	}
	if pfx.Addr().Is4In6() {
		p.fail(key, "%q is an IPv4-mapped IPv6 prefix; write the IPv4 prefix", s)
		return netip.Prefix{}, false
	}
	return pfx, true
}

// maskedPrefixes parses a list of network prefixes. Host bits are an error,
// not silently cleared: "100.64.0.2/24" in allowed_ips almost always means
// someone meant /32, and masking would grant the whole /24.
func (p *parser) maskedPrefixes(key string, list []string) []netip.Prefix {
	var out []netip.Prefix
	for i, s := range list {
		k := fmt.Sprintf("%s[%d]", key, i)
		pfx, ok := p.prefix(k, s)
		if !ok {
			continue
		}
		if m := pfx.Masked(); m != pfx {
			p.fail(k, "%q has host bits set (did you mean %q or \"%s/%d\"?)", s, m.String(), pfx.Addr(), pfx.Addr().BitLen())
			continue
		}
		out = append(out, pfx)
	}
	return out
}

func (p *parser) client(cfg *Config, raw *FileClient) *Client {
	c := &Client{}

	if raw.ServerPublicKey == "" {
		p.fail("client.server_public_key", "required (the server's public key: braid pubkey < server.key)")
	} else if k, err := keys.Parse(raw.ServerPublicKey); err != nil {
		p.failErr("client.server_public_key", err)
	} else if err := k.CheckPublic(); err != nil {
		p.failErr("client.server_public_key", err)
	} else {
		c.ServerPublicKey = k
		if k == cfg.PublicKey && !k.IsZero() {
			p.fail("client.server_public_key", "is this client's own public key (private_key_file and the server must differ)")
		}
	}

	if len(raw.Servers) == 0 {
		p.fail("client.servers", `required (at least one "ip:port" of the server)`)
	}
	var has4, has6 bool
	for i, s := range raw.Servers {
		key := fmt.Sprintf("client.servers[%d]", i)
		ap, ok := p.addrPort(key, s)
		if !ok {
			continue
		}
		if ap.Addr().IsUnspecified() || ap.Addr().IsMulticast() {
			p.fail(key, "%q is not a unicast address", s)
		}
		if j := slices.Index(c.Servers, ap); j >= 0 {
			p.fail(key, "%s duplicates client.servers[%d]", ap, j)
		}
		if ap.Addr().Is4() {
			has4 = true
		} else {
			has6 = true
		}
		c.Servers = append(c.Servers, ap)
	}

	for i, s := range raw.Paths {
		key := fmt.Sprintf("client.paths[%d]", i)
		var path Path
		if a, err := netip.ParseAddr(s); err == nil {
			a = a.Unmap()
			switch {
			case a.IsUnspecified() || a.IsMulticast():
				p.fail(key, "%q is not a usable local address", s)
			case a.Is4() && !has4 && has6:
				p.fail(key, "%s is IPv4 but every server in client.servers is IPv6", a)
			case a.Is6() && !has6 && has4:
				p.fail(key, "%s is IPv6 but every server in client.servers is IPv4", a)
			}
			path.Addr = a
		} else if err := checkIfName(s); err != nil {
			p.fail(key, "%q is neither an IP address nor an interface name: %v", s, err)
		} else {
			path.Interface = s
		}
		if j := slices.Index(c.Paths, path); j >= 0 {
			p.fail(key, "%q duplicates client.paths[%d]", s, j)
		}
		c.Paths = append(c.Paths, path)
	}

	c.SubflowsPerPath = DefaultSubflowsPerPath
	if raw.SubflowsPerPath != nil {
		n := *raw.SubflowsPerPath
		if n < 1 || n > MaxSubflowsPerPath {
			p.fail("client.subflows_per_path", "%d out of range (1..%d)", n, MaxSubflowsPerPath)
		}
		c.SubflowsPerPath = int(n)
	}

	c.Transport, c.TCPCongestion = p.transport("client", raw.Transport, raw.TCPCongestion)
	c.Scheduler = p.oneOf("client.scheduler", "scheduler", raw.Scheduler, DefaultScheduler, Schedulers)
	c.Reorder = p.oneOf("client.reorder", "reorder mode", raw.Reorder, DefaultReorder, Reorders)
	c.Congestion = p.oneOf("client.congestion", "congestion controller", raw.Congestion, DefaultCongestion, CongestionChoices)
	c.Recovery = p.oneOf("client.recovery", "recovery mode", raw.Recovery, DefaultRecovery, Recoveries)

	p.weights(c, raw.Weights)
	p.priorities(c, raw.Priorities)
	p.budgets(c, raw.Budgets)
	if raw.BudgetState != "" {
		c.BudgetState = p.resolve(raw.BudgetState)
	}

	switch c.Reorder {
	case "off":
		if raw.ReorderHold != "" {
			p.fail("client.reorder_hold", `set, but reorder = "off" holds nothing (remove it or choose "fixed" or "adaptive")`)
		}
	case "fixed":
		c.ReorderHold = p.duration("client.reorder_hold", raw.ReorderHold, DefaultFixedReorderHold, MinReorderHold, MaxReorderHold, false)
	case "adaptive":
		c.ReorderHold = p.duration("client.reorder_hold", raw.ReorderHold, DefaultAdaptiveReorderHold, MinReorderHold, MaxReorderHold, false)
	}

	c.HandshakeTimeout = p.duration("client.handshake_timeout", raw.HandshakeTimeout, DefaultHandshakeTimeout, MinHandshakeTimeout, MaxHandshakeTimeout, false)
	return c
}

// budgets reads client.budgets: one data allowance per entry of client.paths
// ("" for none).
func (p *parser) budgets(c *Client, bs []string) {
	const key = "client.budgets"
	if len(bs) == 0 {
		return
	}
	if len(bs) != len(c.Paths) {
		p.fail(key, "%d %s for %d %s (one per entry of paths, in the same order; \"\" for none)",
			len(bs), tomlerr.Plural(len(bs), "budget", "budgets"), len(c.Paths), tomlerr.Plural(len(c.Paths), "path", "paths"))
		return
	}
	for i, s := range bs {
		if s == "" {
			continue
		}
		l, err := budget.Parse(s)
		if err != nil {
			p.fail(fmt.Sprintf("%s[%d]", key, i), "%q: %v", s, err)
			return
		}
		c.Paths[i].Budget = l
	}
}

// priorities reads client.priorities: one tier per entry of client.paths.
func (p *parser) priorities(c *Client, prio []int64) {
	const key = "client.priorities"
	if len(prio) == 0 {
		return
	}
	if c.Transport == "mptcp" {
		p.fail(key, `set, but transport = "mptcp" runs the tunnel as one path (the kernel spreads its subflows)`)
		return
	}
	if len(prio) != len(c.Paths) {
		p.fail(key, "%d %s for %d %s (one per entry of paths, in the same order)",
			len(prio), tomlerr.Plural(len(prio), "priority", "priorities"), len(c.Paths), tomlerr.Plural(len(c.Paths), "path", "paths"))
		return
	}
	for i, v := range prio {
		if v < 0 || v > MaxPriority {
			p.fail(fmt.Sprintf("%s[%d]", key, i), "%d out of range (0..%d; 0 is the first tier)", v, MaxPriority)
			return
		}
		c.Paths[i].Priority = int(v)
	}
}

func (p *parser) weights(c *Client, w []float64) {
	const key = "client.weights"
	if c.Transport == "mptcp" && len(w) > 0 {
		p.fail(key, `set, but transport = "mptcp" runs the tunnel as one path (the kernel spreads its subflows)`)
		return
	}
	if c.Scheduler != "weighted" {
		if len(w) > 0 {
			p.fail(key, "set, but only scheduler = \"weighted\" uses weights (scheduler is %q)", c.Scheduler)
		}
		return
	}
	n := c.SubflowCount()
	if len(w) == 0 {
		c.Weights = make([]float64, n)
		for i := range c.Weights {
			c.Weights[i] = 1
		}
		return
	}
	if n > 0 && len(w) != n {
		paths := len(c.Paths)
		if paths == 0 {
			paths = 1
		}
		p.fail(key, "%d %s for %d subflows (%d %s × %d %s × %d per path; order: path, then server, then subflow)",
			len(w), tomlerr.Plural(len(w), "weight", "weights"), n,
			paths, tomlerr.Plural(paths, "path", "paths"), len(c.Servers), tomlerr.Plural(len(c.Servers), "server", "servers"), c.SubflowsPerPath)
		return
	}
	sum := 0.0
	for i, v := range w {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			p.fail(fmt.Sprintf("%s[%d]", key, i), "%v is not a finite number ≥ 0", v)
			return
		}
		sum += v
	}
	if sum == 0 {
		p.fail(key, "all weights are 0; at least one subflow must carry traffic")
		return
	}
	c.Weights = slices.Clone(w)
}

func (p *parser) server(cfg *Config, raw *FileServer) *Server {
	s := &Server{}

	if len(raw.Listen) == 0 {
		p.fail("server.listen", `required (e.g. ["0.0.0.0:7000"])`)
	}
	for i, l := range raw.Listen {
		key := fmt.Sprintf("server.listen[%d]", i)
		ap, ok := p.addrPort(key, l)
		if !ok {
			continue
		}
		if ap.Addr().IsMulticast() {
			p.fail(key, "%q is a multicast address", l)
		}
		if j := slices.Index(s.Listen, ap); j >= 0 {
			p.fail(key, "%s duplicates server.listen[%d]", ap, j)
		}
		s.Listen = append(s.Listen, ap)
	}

	if raw.ServerIDBits < 0 || raw.ServerIDBits > MaxServerIDBits {
		p.fail("server.server_id_bits", "%d out of range (0..%d)", raw.ServerIDBits, MaxServerIDBits)
	} else {
		s.ServerIDBits = int(raw.ServerIDBits)
		limit := int64(1)<<s.ServerIDBits - 1
		if raw.ServerID < 0 || raw.ServerID > limit {
			if s.ServerIDBits == 0 {
				p.fail("server.server_id", "%d needs server_id_bits > 0 (with 0 bits the only id is 0)", raw.ServerID)
			} else {
				p.fail("server.server_id", "%d does not fit in server_id_bits = %d (0..%d)", raw.ServerID, s.ServerIDBits, limit)
			}
		} else {
			s.ServerID = uint32(raw.ServerID)
		}
	}

	s.HandshakeRate = DefaultHandshakeRate
	if raw.HandshakeRate != nil {
		r := *raw.HandshakeRate
		if r < 0 || r > MaxHandshakeRate {
			p.fail("server.handshake_rate", "%d out of range (0..%d; 0 = unlimited)", r, MaxHandshakeRate)
		}
		s.HandshakeRate = int(r)
	}

	s.Transport, s.TCPCongestion = p.transport("server", raw.Transport, raw.TCPCongestion)
	if n := raw.ListenSockets; n != 0 {
		switch {
		case n < 1 || n > MaxListenSockets:
			p.fail("server.listen_sockets", "%d out of range (1..%d)", n, MaxListenSockets)
		case n > 1 && s.Transport != "udp":
			p.fail("server.listen_sockets", `%d, but transport = %q accepts connections on one listener (it applies to "udp")`, n, s.Transport)
		default:
			s.ListenSockets = int(n)
		}
	}
	p.peers(cfg, s, raw.Clients)
	return s
}

// transport checks [client] or [server] transport and tcp_congestion.
func (p *parser) transport(table, transport, cc string) (string, string) {
	t := p.oneOf(table+".transport", "transport", transport, DefaultTransport, Transports)
	if cc == "" {
		return t, ""
	}
	key := table + ".tcp_congestion"
	switch {
	case t == "udp":
		p.fail(key, `set, but transport = "udp" opens no TCP sockets (it applies to "tcp" and "mptcp")`)
	case !ccNameRE.MatchString(cc):
		p.fail(key, "%q is not a congestion control name (lower-case letters, digits and '_', at most 15; see /proc/sys/net/ipv4/tcp_available_congestion_control)", cc)
	}
	return t, cc
}

// ccNameRE matches the kernel's congestion control names (TCP_CA_NAME_MAX is 16
// bytes with the NUL).
var ccNameRE = regexp.MustCompile(`^[a-z0-9_]{1,15}$`)

// prefixRef remembers where an allowed_ips entry came from, for error text.
type prefixRef struct {
	pfx    netip.Prefix
	client int
	index  int
}

func (r prefixRef) key() string {
	return fmt.Sprintf("server.clients[%d].allowed_ips[%d]", r.client, r.index)
}

func (p *parser) peers(cfg *Config, s *Server, raw []FilePeer) {
	var all []prefixRef
	for i, rc := range raw {
		base := fmt.Sprintf("server.clients[%d]", i)
		peer := Peer{Name: rc.Name, PresharedKeyFile: cfg.PresharedKeyFile, PresharedKey: cfg.PresharedKey}

		if rc.PublicKey == "" {
			p.fail(base+".public_key", "required")
		} else if k, err := keys.Parse(rc.PublicKey); err != nil {
			p.failErr(base+".public_key", err)
		} else if err := k.CheckPublic(); err != nil {
			p.failErr(base+".public_key", err)
		} else {
			peer.PublicKey = k
			if k == cfg.PublicKey {
				p.fail(base+".public_key", "is this server's own public key")
			}
			for j := range s.Clients {
				if s.Clients[j].PublicKey == k {
					p.fail(base+".public_key", "duplicates server.clients[%d].public_key", j)
				}
			}
		}

		if rc.Name != "" {
			for j := range s.Clients {
				if s.Clients[j].Name == rc.Name {
					p.fail(base+".name", "%q duplicates server.clients[%d].name", rc.Name, j)
				}
			}
		}

		if len(rc.AllowedIPs) == 0 {
			p.fail(base+".allowed_ips", `required (the client's inner addresses, e.g. ["100.64.0.2/32"])`)
		}
		peer.AllowedIPs = p.maskedPrefixes(base+".allowed_ips", rc.AllowedIPs)
		for j, pfx := range peer.AllowedIPs {
			all = append(all, prefixRef{pfx: pfx, client: i, index: j})
			for _, own := range cfg.Tun.Address {
				if pfx.Contains(own.Addr()) {
					p.fail(fmt.Sprintf("%s.allowed_ips[%d]", base, j), "%s contains this server's own tunnel address %s", pfx, own.Addr())
				}
			}
		}

		if rc.PresharedKeyFile != "" {
			peer.PresharedKeyFile = p.resolve(rc.PresharedKeyFile)
			peer.PresharedKey = p.readKey(base+".preshared_key_file", peer.PresharedKeyFile)
		}
		s.Clients = append(s.Clients, peer)
	}
	p.overlaps(all)
}

// overlaps reports the first pair of allowed_ips entries that overlap, in
// O(n log n) so a server with thousands of clients loads quickly. Two
// prefixes overlap only if one contains the other; after sorting by start
// address (shorter prefix first on ties), the entries seen so far are
// disjoint, so only the previous entry can contain the next one.
func (p *parser) overlaps(all []prefixRef) {
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b prefixRef) int {
		if c := a.pfx.Addr().Compare(b.pfx.Addr()); c != 0 {
			return c
		}
		return a.pfx.Bits() - b.pfx.Bits()
	})
	for i := 1; i < len(sorted); i++ {
		a, b := sorted[i-1], sorted[i]
		if !a.pfx.Overlaps(b.pfx) {
			continue
		}
		// Name the entry that comes later in the file as the culprit.
		if a.client > b.client || (a.client == b.client && a.index > b.index) {
			a, b = b, a
		}
		p.fail(b.key(), "%s overlaps %s (%s)", b.pfx, a.key(), a.pfx)
		return
	}
}

func (p *parser) security(cfg *Config, raw *FileSecurity) {
	s := &cfg.Security

	s.ReplayWindow = DefaultReplayWindow
	if raw.ReplayWindow != nil {
		w := *raw.ReplayWindow
		if w < MinReplayWindow || w > MaxReplayWindow {
			p.fail("security.replay_window", "%d out of range (%d..%d packets)", w, MinReplayWindow, MaxReplayWindow)
		} else {
			// Round up to a power of two: the window is a ring of 64-bit
			// words indexed by masking.
			s.ReplayWindow = 1 << bits.Len64(uint64(w-1))
		}
	}

	s.RekeyAfterTime = p.duration("security.rekey_after_time", raw.RekeyAfterTime, DefaultRekeyAfterTime, MinRekeyAfterTime, 24*time.Hour, false)
	s.RejectAfterTime = p.duration("security.reject_after_time", raw.RejectAfterTime, DefaultRejectAfterTime, MinRekeyAfterTime, 48*time.Hour, false)
	if p.err == nil && s.RejectAfterTime <= s.RekeyAfterTime {
		p.fail("security.reject_after_time", "%v must be longer than rekey_after_time (%v), or sessions die before they rekey", s.RejectAfterTime, s.RekeyAfterTime)
	}

	s.RekeyAfterPackets = DefaultRekeyAfterPackets
	if raw.RekeyAfterPackets != nil {
		n := *raw.RekeyAfterPackets
		if n < MinRekeyAfterPackets || n >= RejectAfterPackets {
			p.fail("security.rekey_after_packets", "%d out of range (%d..%d)", n, MinRekeyAfterPackets, uint64(RejectAfterPackets-1))
		} else {
			s.RekeyAfterPackets = uint64(n)
		}
	}
}

func (p *parser) control(cfg *Config, raw *FileControl) {
	c := &cfg.Control
	if raw.Socket == "" {
		c.Socket = filepath.Join(DefaultSocketDir, cfg.Tun.Name+".sock")
	} else {
		c.Socket = p.resolve(raw.Socket)
	}
	if len(c.Socket) > MaxSocketPath {
		p.fail("control.socket", "%q is %d bytes; unix socket paths are limited to %d", c.Socket, len(c.Socket), MaxSocketPath)
	}

	if raw.Metrics != "" {
		if addr, host, ok := p.listenAddr("control.metrics", raw.Metrics); ok {
			if where := exposure(host); where != "" {
				p.warn("control.metrics", "%q %s; the metrics endpoint has no authentication and its labels show every peer's public key and endpoint addresses (bind it to 127.0.0.1 or [::1], or firewall the port)", raw.Metrics, where)
			}
			c.Metrics = addr
		} else {
			c.Metrics = raw.Metrics
		}
	}
	p.console(c, raw)
}

// minConsoleToken is the shortest control.console_token taken (braid keygen
// prints 44 characters; `openssl rand -hex 16` 32).
const minConsoleToken = 16

// console checks the console's keys: off loopback it needs a token and TLS,
// so that the status of every peer is neither open to whoever reaches the
// port nor sent in the clear.
func (p *parser) console(c *Control, raw *FileControl) {
	if raw.Console == "" {
		for _, k := range []struct{ key, v string }{{"control.console_token", raw.ConsoleToken}, {"control.console_cert", raw.ConsoleCert}, {"control.console_key", raw.ConsoleKey}} {
			if k.v != "" {
				p.fail(k.key, "set without control.console (the console's address)")
			}
		}
		return
	}
	addr, host, ok := p.listenAddr("control.console", raw.Console)
	if !ok {
		return
	}
	c.Console, c.ConsoleToken = addr, raw.ConsoleToken
	if t := raw.ConsoleToken; t != "" && len(t) < minConsoleToken {
		p.fail("control.console_token", "%d characters; want at least %d (e.g. `openssl rand -hex 16`)", len(t), minConsoleToken)
	}
	switch {
	case raw.ConsoleCert != "" && raw.ConsoleKey == "":
		p.fail("control.console_key", "required with control.console_cert (the certificate's private key, PEM)")
	case raw.ConsoleKey != "" && raw.ConsoleCert == "":
		p.fail("control.console_cert", "required with control.console_key (the certificate chain, PEM)")
	case raw.ConsoleCert != "":
		c.ConsoleCert, c.ConsoleKey = p.resolve(raw.ConsoleCert), p.resolve(raw.ConsoleKey)
		if _, err := tls.LoadX509KeyPair(c.ConsoleCert, c.ConsoleKey); err != nil {
			p.fail("control.console_cert", "%s with %s: %v", c.ConsoleCert, c.ConsoleKey, err)
		}
	}
	if where := exposure(host); where != "" {
		const why = "; a console off loopback shows every peer's keys and addresses, so it needs control.console_token and TLS (control.console_cert, control.console_key)"
		if raw.ConsoleToken == "" {
			p.fail("control.console_token", "required: control.console %q %s%s", raw.Console, where, why)
		} else if raw.ConsoleCert == "" {
			p.fail("control.console_cert", "required: control.console %q %s%s", raw.Console, where, why)
		}
	}
}

// listenAddr checks a listener's "host:port" and returns it with a bare
// ":port" made loopback (all interfaces are asked for by name: 0.0.0.0 or
// [::]), and its host.
func (p *parser) listenAddr(key, s string) (addr, host string, ok bool) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		p.fail(key, "%q is not host:port", s)
		return "", "", false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		p.fail(key, "%q: port must be a number in 1..65535", s)
		return "", "", false
	}
	if host == "" {
		return net.JoinHostPort("127.0.0.1", port), host, true
	}
	return s, host, true
}

// exposure says how a listener on host can be reached from other machines:
// "" for loopback only, else a phrase for a warning. Host names other than
// localhost are not resolved (as nowhere else in the file) and so cannot be
// known to be loopback.
func exposure(host string) string {
	if strings.EqualFold(host, "localhost") {
		return ""
	}
	if host == "" {
		return "" // a bare :port is bound to 127.0.0.1
	}
	a, err := netip.ParseAddr(host)
	switch {
	case err != nil:
		return "names a host, not a loopback address"
	case a.Unmap().IsLoopback():
		return ""
	case a.IsUnspecified():
		return "listens on all interfaces"
	}
	return "is not a loopback address"
}

func (p *parser) addrPort(key, s string) (netip.AddrPort, bool) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		p.fail(key, "%q is not ip:port (host names are not resolved; write IPv6 as [addr]:port)", s)
		return netip.AddrPort{}, false
	}
	if ap.Port() == 0 {
		p.fail(key, "%q has port 0", s)
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), true
}

func (p *parser) oneOf(key, what, v, def string, valid []string) string {
	v = orDefault(v, def)
	if !slices.Contains(valid, v) {
		p.fail(key, "unknown %s %q (valid: %s)", what, v, strings.Join(valid, ", "))
	}
	return v
}

// duration parses a Go duration string; "" yields def. With zeroOK, an
// explicit 0 is accepted (meaning "off") besides the [lo, hi] range.
func (p *parser) duration(key, s string, def, lo, hi time.Duration, zeroOK bool) time.Duration {
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		p.fail(key, "%q is not a duration (e.g. \"500ms\", \"30s\", \"2m\")", s)
		return def
	}
	if d == 0 && zeroOK {
		return 0
	}
	if d < lo || d > hi {
		extra := ""
		if zeroOK {
			extra = ", or 0 for off"
		}
		p.fail(key, "%v out of range (%v..%v%s)", d, lo, hi, extra)
	}
	return d
}

// checkIfName applies the kernel's rules for interface names.
func checkIfName(name string) error {
	switch {
	case name == "":
		return errors.New("is empty")
	case len(name) > 15:
		return fmt.Errorf("is %d bytes; interface names have at most 15", len(name))
	case name == "." || name == "..":
		return errors.New("is not a valid interface name")
	case strings.ContainsAny(name, "/:% \t\n"):
		return errors.New("contains a character not allowed in interface names")
	}
	return nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
