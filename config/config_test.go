package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io/fs"
	"log/slog"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/keys"
)

// Public keys used in the documents below; any 32 bytes will do.
const (
	serverPub = "9yIxvnVAdtAILItyxaJ0S+mbVqtzLjwV9xTQl3xLbVI="
	peerPubA  = "TX8FyT5HoJcZnjetmgzf6/Ni/oqiQ4fTS490UHWj5U0="
	peerPubB  = "S71ZiSkuwhHtetnKPKU6Bsfc9yR8YjXV+0KGQayPnio="
	peerPubC  = "TWW3Y9lB6+qJfnXNaXwGtwnCJ0vugE4oaC0QEqYyUD0="
)

// Low-order points of Curve25519 (see keys.IsLowOrder): the all-zero key, a
// point of order 8, and the point 1 with the ignored top bit set.
const (
	zeroPub      = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	order8Pub    = "4Ot6fDtBuK4WVuP68Z/EatoJjeucMrH9hmIFFl9JuAA="
	order1TopPub = "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAIA="
	lowOrderMsg  = "bad key: low-order point (X25519 with it gives the all-zero secret for any private key, so it is no one's public key)"
)

// writeKey writes a fresh key file and returns the key.
func writeKey(t *testing.T, path string) keys.Key {
	t.Helper()
	k, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(k.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

func mustParse(t *testing.T, path string, doc string) *Config {
	t.Helper()
	cfg, err := Parse(path, []byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return cfg
}

func TestExampleClient(t *testing.T) {
	data, err := os.ReadFile("../examples/client.toml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	priv := writeKey(t, filepath.Join(dir, "client.key"))
	cfg := mustParse(t, filepath.Join(dir, "client.toml"), string(data))

	if cfg.Role != RoleClient || cfg.Server != nil || cfg.Client == nil {
		t.Fatalf("role %q, server %v, client %v", cfg.Role, cfg.Server, cfg.Client)
	}
	if cfg.PrivateKeyFile != filepath.Join(dir, "client.key") {
		t.Errorf("PrivateKeyFile = %q", cfg.PrivateKeyFile)
	}
	if cfg.PrivateKey != priv || cfg.PublicKey != priv.Public() {
		t.Errorf("keys not loaded from the key file")
	}
	if cfg.LogLevel != slog.LevelInfo {
		t.Errorf("LogLevel = %v", cfg.LogLevel)
	}
	wantAddr := []netip.Prefix{netip.MustParsePrefix("100.64.0.2/24"), netip.MustParsePrefix("fd00:b5a1::2/64")}
	if cfg.Tun.Name != "braid0" || cfg.Tun.MTU != 1380 || !slices.Equal(cfg.Tun.Address, wantAddr) {
		t.Errorf("Tun = %+v", cfg.Tun)
	}
	if !slices.Equal(cfg.Tun.Routes, []netip.Prefix{netip.MustParsePrefix("100.64.0.0/10")}) {
		t.Errorf("Routes = %v", cfg.Tun.Routes)
	}
	c := cfg.Client
	if c.ServerPublicKey.String() != serverPub {
		t.Errorf("ServerPublicKey = %v", c.ServerPublicKey)
	}
	wantServers := []netip.AddrPort{netip.MustParseAddrPort("198.18.1.2:7000"), netip.MustParseAddrPort("198.18.2.2:7000")}
	if !slices.Equal(c.Servers, wantServers) {
		t.Errorf("Servers = %v", c.Servers)
	}
	wantPaths := []Path{{Interface: "eth1"}, {Addr: netip.MustParseAddr("198.18.2.1")}}
	if !slices.Equal(c.Paths, wantPaths) {
		t.Errorf("Paths = %v", c.Paths)
	}
	if c.SubflowsPerPath != 1 || c.Scheduler != "earliest-arrival" || c.Reorder != "adaptive" || c.Congestion != "auto" || c.Recovery != "auto" {
		t.Errorf("Client = %+v", c)
	}
	if c.ReorderHold != 150*time.Millisecond || c.HandshakeTimeout != 5*time.Second {
		t.Errorf("durations: hold %v handshake %v", c.ReorderHold, c.HandshakeTimeout)
	}
	if c.Weights != nil {
		t.Errorf("Weights = %v for a non-weighted scheduler", c.Weights)
	}
	if c.SubflowCount() != 4 {
		t.Errorf("SubflowCount = %d, want 2 paths × 2 servers × 1 = 4", c.SubflowCount())
	}
	if cfg.Control.Socket != "/run/braid/braid0.sock" || cfg.Control.Metrics != "127.0.0.1:9273" {
		t.Errorf("Control = %+v", cfg.Control)
	}
	if cfg.Security.ReplayWindow != 65536 {
		t.Errorf("ReplayWindow = %d", cfg.Security.ReplayWindow)
	}
}

func TestExampleServer(t *testing.T) {
	data, err := os.ReadFile("../examples/server.toml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	priv := writeKey(t, filepath.Join(dir, "server.key"))
	psk := writeKey(t, filepath.Join(dir, "branch-office.psk"))
	cfg := mustParse(t, filepath.Join(dir, "server.toml"), string(data))

	if cfg.Role != RoleServer || cfg.Client != nil || cfg.Server == nil {
		t.Fatalf("role %q, client %v, server %v", cfg.Role, cfg.Client, cfg.Server)
	}
	if cfg.PrivateKey != priv {
		t.Errorf("private key not loaded")
	}
	s := cfg.Server
	wantListen := []netip.AddrPort{netip.MustParseAddrPort("198.18.1.2:7000"), netip.MustParseAddrPort("198.18.2.2:7000")}
	if !slices.Equal(s.Listen, wantListen) {
		t.Errorf("Listen = %v", s.Listen)
	}
	if s.ServerID != 3 || s.ServerIDBits != 4 || s.HandshakeRate != 20 {
		t.Errorf("Server = %+v", s)
	}
	if len(s.Clients) != 2 {
		t.Fatalf("%d clients", len(s.Clients))
	}
	a, b := s.Clients[0], s.Clients[1]
	if a.Name != "laptop" || a.PublicKey.String() != peerPubA || !a.PresharedKey.IsZero() || a.PresharedKeyFile != "" {
		t.Errorf("client 0 = %+v", a)
	}
	wantA := []netip.Prefix{netip.MustParsePrefix("100.64.0.2/32"), netip.MustParsePrefix("fd00:b5a1::2/128")}
	if !slices.Equal(a.AllowedIPs, wantA) {
		t.Errorf("client 0 AllowedIPs = %v", a.AllowedIPs)
	}
	if b.Label() != "branch-office" || b.PublicKey.String() != peerPubB || b.PresharedKey != psk ||
		b.PresharedKeyFile != filepath.Join(dir, "branch-office.psk") {
		t.Errorf("client 1 = %+v", b)
	}
	if cfg.Control.Socket != "/run/braid/braid0.sock" {
		t.Errorf("Socket = %q", cfg.Control.Socket)
	}
	if cfg.Security.RekeyAfterTime != 120*time.Second || cfg.Security.RejectAfterTime != 180*time.Second {
		t.Errorf("Security = %+v", cfg.Security)
	}
}

// keyDir holds client.key, server.key and a.psk for the error tests, which
// name them by absolute path so the config itself can be called "client.toml".
func keyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeKey(t, filepath.Join(dir, "client.key"))
	writeKey(t, filepath.Join(dir, "server.key"))
	writeKey(t, filepath.Join(dir, "a.psk"))
	writeCert(t, filepath.Join(dir, "console.crt"), filepath.Join(dir, "console.key"))
	return dir
}

// writeCert writes a self-signed certificate and its key, PEM, for the
// console's TLS keys.
func writeCert(t *testing.T, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "braid console"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func minimalClient(dir string) string {
	return `role = "client"
private_key_file = "` + dir + `/client.key"

[tun]
address = ["100.64.0.2/24"]

[client]
server_public_key = "` + serverPub + `"
servers = ["198.18.1.2:7000"]
`
}

func minimalServer(dir string) string {
	return `role = "server"
private_key_file = "` + dir + `/server.key"

[tun]
address = ["100.64.0.1/24"]

[server]
listen = ["0.0.0.0:7000"]

[[server.clients]]
public_key = "` + peerPubA + `"
allowed_ips = ["100.64.0.2/32"]
`
}

func TestDefaults(t *testing.T) {
	dir := keyDir(t)
	cfg := mustParse(t, "client.toml", minimalClient(dir))
	c := cfg.Client
	checks := []struct {
		name      string
		got, want any
	}{
		{"log level", cfg.LogLevel, slog.LevelInfo},
		{"offload", cfg.Offload, true},
		{"crypto workers", cfg.CryptoWorkers, AutoCryptoWorkers},
		{"tun name", cfg.Tun.Name, "braid0"},
		{"mtu", cfg.Tun.MTU, 1380},
		{"routes", len(cfg.Tun.Routes), 0},
		{"paths", len(c.Paths), 0},
		{"subflows", c.SubflowsPerPath, 1},
		{"scheduler", c.Scheduler, "earliest-arrival"},
		{"reorder", c.Reorder, "adaptive"},
		{"reorder hold (adaptive cap)", c.ReorderHold, 200 * time.Millisecond},
		{"congestion", c.Congestion, "auto"},
		{"recovery", c.Recovery, "auto"},
		{"handshake timeout", c.HandshakeTimeout, time.Second},
		{"subflow count", c.SubflowCount(), 1},
		{"replay window", cfg.Security.ReplayWindow, 65536},
		{"rekey after time", cfg.Security.RekeyAfterTime, 120 * time.Second},
		{"reject after time", cfg.Security.RejectAfterTime, 180 * time.Second},
		{"rekey after packets", cfg.Security.RekeyAfterPackets, uint64(1) << 32},
		{"socket", cfg.Control.Socket, "/run/braid/braid0.sock"},
		{"metrics", cfg.Control.Metrics, ""},
		{"psk", cfg.PresharedKey.IsZero(), true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}

	srv := mustParse(t, "server.toml", minimalServer(dir))
	if s := srv.Server; s.ServerID != 0 || s.ServerIDBits != 0 || s.HandshakeRate != 20 {
		t.Errorf("server defaults = %+v", s)
	}

	// The socket follows the interface name; the fixed reorder mode has its own hold.
	doc := strings.Replace(minimalClient(dir), "[tun]\n", "[tun]\nname = \"wan7\"\n", 1)
	doc += "reorder = \"fixed\"\nscheduler = \"weighted\"\nsubflows_per_path = 3\n"
	cfg = mustParse(t, "client.toml", doc)
	if cfg.Control.Socket != "/run/braid/wan7.sock" {
		t.Errorf("socket = %q, want /run/braid/wan7.sock", cfg.Control.Socket)
	}
	if cfg.Client.ReorderHold != 50*time.Millisecond {
		t.Errorf("fixed hold = %v, want 50ms", cfg.Client.ReorderHold)
	}
	// weighted with no weights: equal weights, one per subflow (1 path × 1 server × 3).
	if !slices.Equal(cfg.Client.Weights, []float64{1, 1, 1}) {
		t.Errorf("weights = %v, want [1 1 1]", cfg.Client.Weights)
	}
}

func TestRelativePaths(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	priv := writeKey(t, filepath.Join(dir, "keys", "server.key"))
	psk := writeKey(t, filepath.Join(dir, "global.psk"))
	own := writeKey(t, filepath.Join(dir, "keys", "b.psk"))
	doc := `role = "server"
private_key_file = "keys/server.key"
preshared_key_file = "global.psk"
[tun]
address = ["100.64.0.1/24"]
[server]
listen = ["[::]:7000"]
[[server.clients]]
public_key = "` + peerPubA + `"
allowed_ips = ["100.64.0.2/32"]
[[server.clients]]
public_key = "` + peerPubB + `"
allowed_ips = ["100.64.0.3/32"]
preshared_key_file = "keys/b.psk"
[control]
socket = "run/ctl.sock"
`
	path := filepath.Join(dir, "server.toml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	// Load from another working directory must not matter.
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PrivateKeyFile != filepath.Join(dir, "keys", "server.key") || cfg.PrivateKey != priv {
		t.Errorf("private key file %q", cfg.PrivateKeyFile)
	}
	if cfg.PresharedKeyFile != filepath.Join(dir, "global.psk") || cfg.PresharedKey != psk {
		t.Errorf("psk file %q", cfg.PresharedKeyFile)
	}
	a, b := cfg.Server.Clients[0], cfg.Server.Clients[1]
	if a.PresharedKey != psk || a.PresharedKeyFile != filepath.Join(dir, "global.psk") {
		t.Errorf("client without own psk should inherit the global one: %+v", a)
	}
	if b.PresharedKey != own || b.PresharedKeyFile != filepath.Join(dir, "keys", "b.psk") {
		t.Errorf("client with own psk: %+v", b)
	}
	if cfg.Control.Socket != filepath.Join(dir, "run", "ctl.sock") {
		t.Errorf("socket %q", cfg.Control.Socket)
	}
	if !slices.Equal(cfg.Server.Listen, []netip.AddrPort{netip.MustParseAddrPort("[::]:7000")}) {
		t.Errorf("listen %v", cfg.Server.Listen)
	}

	got, err := SocketPath(path)
	if err != nil || got != filepath.Join(dir, "run", "ctl.sock") {
		t.Errorf("SocketPath = %q, %v", got, err)
	}
}

func TestSocketPathWithoutKeys(t *testing.T) {
	// An operator may read the config but not the key file; status still works.
	dir := t.TempDir()
	path := filepath.Join(dir, "c.toml")
	doc := "role = \"client\"\nprivate_key_file = \"/nonexistent/k\"\n[tun]\nname = \"wan1\"\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := SocketPath(path)
	if err != nil || got != "/run/braid/wan1.sock" {
		t.Errorf("SocketPath = %q, %v", got, err)
	}
	if _, err := Load(path); err == nil {
		t.Errorf("Load succeeded without a key file")
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.toml")
	_, err := Load(path)
	if err == nil || err.Error() != path+": no such file or directory" {
		t.Fatalf("err = %v", err)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error does not wrap fs.ErrNotExist")
	}
}

// edit replaces old by new in doc, failing the test if old is absent so a
// case cannot silently test the unmodified document.
func edit(t *testing.T, doc, old, new string) string {
	t.Helper()
	if !strings.Contains(doc, old) {
		t.Fatalf("%q not in document", old)
	}
	return strings.Replace(doc, old, new, 1)
}

func TestErrors(t *testing.T) {
	dir := keyDir(t)
	cl := minimalClient(dir)
	sv := minimalServer(dir)
	validSched := "(valid: roundrobin, weighted, minrtt, rtt-aware, earliest-arrival, redundant)"

	cases := []struct {
		name string
		file string
		doc  string
		want string
	}{
		// Decoding: go-toml errors rewritten as file: line N: key: problem.
		{"unknown top-level key", "x.toml", edit(t, cl, "role =", "rol = 1\nrole ="),
			`x.toml: line 1: unknown key "rol" (did you mean "role"?)`},
		{"unknown nested key", "x.toml", cl + "shceduler = \"minrtt\"\n",
			`x.toml: line 10: unknown key "client.shceduler" (did you mean "scheduler"?)`},
		{"unknown key without suggestion", "x.toml", cl + "colour = \"blue\"\n",
			`x.toml: line 10: unknown key "client.colour"`},
		{"several unknown keys", "x.toml", cl + "foo = 1\nbar = 2\n",
			`x.toml: line 10: unknown key "client.foo" (and 1 more unknown key)`},
		{"unknown table", "x.toml", cl + "[metrics]\naddr = \"x\"\n",
			`x.toml: line 10: unknown table "metrics"`},
		{"unknown key in array of tables", "server.toml", sv + "alowed_ips = []\n",
			`server.toml: line 13: unknown key "server.clients.alowed_ips" (did you mean "allowed_ips"?)`},
		{"wrong type integer", "client.toml", edit(t, cl, "[tun]\n", "[tun]\nmtu = \"big\"\n"),
			`client.toml: line 5: tun.mtu: expected an integer, found a string`},
		{"wrong type array", "client.toml", edit(t, cl, `servers = ["198.18.1.2:7000"]`, `servers = "198.18.1.2:7000"`),
			`client.toml: line 9: client.servers: expected an array of strings, found a string`},
		{"wrong array element", "client.toml", edit(t, cl, `servers = ["198.18.1.2:7000"]`, `servers = [7000]`),
			`client.toml: line 9: client.servers: expected an array of strings, found an array containing an integer`},
		{"table expected", "client.toml", edit(t, cl, "[tun]\naddress = [\"100.64.0.2/24\"]\n", "tun = 5\n"),
			`client.toml: line 4: tun: expected a table, found an integer`},
		{"syntax error", "client.toml", edit(t, cl, `role = "client"`, `role = `),
			`client.toml: line 1: unexpected character U+000A at start of value`},
		{"duplicate key", "client.toml", edit(t, cl, `role = "client"`, "role = \"client\"\nrole = \"server\""),
			`client.toml: line 2: role: key role is already defined`},

		// Roles and required keys.
		{"no role", "client.toml", edit(t, cl, `role = "client"`, ``),
			`client.toml: role: required ("client" or "server")`},
		{"bad role", "client.toml", edit(t, cl, `role = "client"`, `role = "peer"`),
			`client.toml: role: unknown role "peer" (valid: client, server)`},
		{"server table in client", "client.toml", cl + "[server]\nlisten = [\"0.0.0.0:1\"]\n",
			`client.toml: server: [server] table not allowed when role = "client"`},
		{"client table in server", "server.toml", sv + "[client]\nscheduler = \"minrtt\"\n",
			`server.toml: client: [client] table not allowed when role = "server"`},
		{"missing client table", "client.toml", cl[:strings.Index(cl, "[client]")],
			`client.toml: client: missing [client] table (required when role = "client")`},
		{"missing server table", "server.toml", sv[:strings.Index(sv, "[server]")],
			`server.toml: server: missing [server] table (required when role = "server")`},
		{"no private key file", "client.toml", edit(t, cl, `private_key_file = "`+dir+`/client.key"`, ``),
			`client.toml: private_key_file: required (create one with: braid genkey > client.key)`},
		{"missing key file", "client.toml", edit(t, cl, dir+"/client.key", dir+"/nope.key"),
			`client.toml: private_key_file: open ` + dir + `/nope.key: no such file or directory`},
		{"bad key file", "client.toml", edit(t, cl, dir+"/client.key", dir+"/notakey"),
			`client.toml: private_key_file: ` + dir + `/notakey: bad key: not base64`},
		{"no address", "client.toml", edit(t, cl, `address = ["100.64.0.2/24"]`, ``),
			`client.toml: tun.address: required (the tunnel's own inner addresses, e.g. ["100.64.0.2/24"])`},
		{"no servers", "client.toml", edit(t, cl, `servers = ["198.18.1.2:7000"]`, ``),
			`client.toml: client.servers: required (at least one "ip:port" of the server)`},
		{"no server key", "client.toml", edit(t, cl, `server_public_key = "`+serverPub+`"`, ``),
			`client.toml: client.server_public_key: required (the server's public key: braid pubkey < server.key)`},
		{"no listen", "server.toml", edit(t, sv, `listen = ["0.0.0.0:7000"]`, ``),
			`server.toml: server.listen: required (e.g. ["0.0.0.0:7000"])`},
		{"no allowed ips", "server.toml", edit(t, sv, `allowed_ips = ["100.64.0.2/32"]`, ``),
			`server.toml: server.clients[0].allowed_ips: required (the client's inner addresses, e.g. ["100.64.0.2/32"])`},

		// Names from fixed lists.
		{"unknown scheduler", "client.toml", cl + "scheduler = \"fastest\"\n",
			`client.toml: client.scheduler: unknown scheduler "fastest" ` + validSched},
		{"unknown reorder", "client.toml", cl + "reorder = \"magic\"\n",
			`client.toml: client.reorder: unknown reorder mode "magic" (valid: off, fixed, adaptive)`},
		{"unknown congestion", "client.toml", cl + "congestion = \"bbr\"\n",
			`client.toml: client.congestion: unknown congestion controller "bbr" (valid: auto, none, reno, cubic, lia, olia, balia, wvegas, coupled, ewtcp, rate)`},
		{"unknown recovery", "client.toml", cl + "recovery = \"FEC\"\n",
			`client.toml: client.recovery: unknown recovery mode "FEC" (valid: auto, retransmit, fec, off)`},
		{"congestion is case sensitive", "client.toml", cl + "congestion = \"LIA\"\n",
			`client.toml: client.congestion: unknown congestion controller "LIA" (valid: auto, none, reno, cubic, lia, olia, balia, wvegas, coupled, ewtcp, rate)`},
		{"unknown log level", "client.toml", edit(t, cl, "[tun]", "log_level = \"verbose\"\n[tun]"),
			`client.toml: log_level: unknown log level "verbose" (valid: debug, info, warn, error)`},

		// Addresses and prefixes.
		{"bad allowed ip", "server.toml", sv + "[[server.clients]]\npublic_key = \"" + peerPubB + "\"\nallowed_ips = [\"100.64.0.300/32\"]\n",
			`server.toml: server.clients[1].allowed_ips[0]: "100.64.0.300/32" is not a prefix`},
		{"address without bits", "client.toml", edit(t, cl, `"100.64.0.2/24"`, `"100.64.0.2"`),
			`client.toml: tun.address[0]: "100.64.0.2" is not a prefix (missing /bits; did you mean "100.64.0.2/32"?)`},
		{"route with host bits", "client.toml", edit(t, cl, "[client]", "routes = [\"10.0.0.0/8\", \"10.1.2.3/16\"]\n[client]"),
			`client.toml: tun.routes[1]: "10.1.2.3/16" has host bits set (did you mean "10.1.0.0/16" or "10.1.2.3/32"?)`},
		{"server hostname", "client.toml", edit(t, cl, `"198.18.1.2:7000"`, `"vpn.example.com:7000"`),
			`client.toml: client.servers[0]: "vpn.example.com:7000" is not ip:port (host names are not resolved; write IPv6 as [addr]:port)`},
		{"server port 0", "client.toml", edit(t, cl, `"198.18.1.2:7000"`, `"198.18.1.2:0"`),
			`client.toml: client.servers[0]: "198.18.1.2:0" has port 0`},
		{"duplicate server", "client.toml", edit(t, cl, `"198.18.1.2:7000"`, `"198.18.1.2:7000", "198.18.1.2:7000"`),
			`client.toml: client.servers[1]: 198.18.1.2:7000 duplicates client.servers[0]`},
		{"bad path", "client.toml", cl + "paths = [\"eth0\", \"a very long interface name\"]\n",
			`client.toml: client.paths[1]: "a very long interface name" is neither an IP address nor an interface name: is 26 bytes; interface names have at most 15`},
		{"path family mismatch", "client.toml", cl + "paths = [\"fd00::5\"]\n",
			`client.toml: client.paths[0]: fd00::5 is IPv6 but every server in client.servers is IPv4`},
		{"duplicate path", "client.toml", cl + "paths = [\"eth0\", \"eth0\"]\n",
			`client.toml: client.paths[1]: "eth0" duplicates client.paths[0]`},
		{"bad tun name", "client.toml", edit(t, cl, "[tun]\n", "[tun]\nname = \"br/0\"\n"),
			`client.toml: tun.name: "br/0" contains a character not allowed in interface names`},

		// Ranges.
		{"mtu too small", "client.toml", edit(t, cl, "[tun]\n", "[tun]\nmtu = 500\n"),
			`client.toml: tun.mtu: 500 out of range (576..9000)`},
		{"mtu too small for v6", "client.toml", edit(t, cl, "[tun]\n", "[tun]\nmtu = 1200\n") + "",
			``}, // IPv4-only: 1200 is fine; checked below with IPv6
		{"mtu v6", "client.toml", edit(t, edit(t, cl, "[tun]\n", "[tun]\nmtu = 1200\n"), `"100.64.0.2/24"`, `"100.64.0.2/24", "fd00::2/64"`),
			`client.toml: tun.mtu: 1200 is below 1280, the IPv6 minimum, and tun.address has an IPv6 address`},
		{"listen sockets", "server.toml", edit(t, sv, "listen = [\"0.0.0.0:7000\"]\n", "listen = [\"0.0.0.0:7000\"]\nlisten_sockets = 65\n"),
			`server.toml: server.listen_sockets: 65 out of range (1..64)`},
		{"listen sockets over tcp", "server.toml", edit(t, sv, "listen = [\"0.0.0.0:7000\"]\n", "listen = [\"0.0.0.0:7000\"]\nlisten_sockets = 2\ntransport = \"tcp\"\n"),
			`server.toml: server.listen_sockets: 2, but transport = "tcp" accepts connections on one listener (it applies to "udp")`},
		{"crypto workers", "client.toml", edit(t, cl, "[tun]\n", "crypto_workers = -2\n[tun]\n"),
			`client.toml: crypto_workers: -2 out of range (0..256; leave it out for the default)`},
		{"subflows", "client.toml", cl + "subflows_per_path = 0\n",
			`client.toml: client.subflows_per_path: 0 out of range (1..16)`},
		{"bad duration", "client.toml", cl + "handshake_timeout = \"25\"\n",
			`client.toml: client.handshake_timeout: "25" is not a duration (e.g. "500ms", "30s", "2m")`},
		{"negative duration", "client.toml", cl + "handshake_timeout = \"-1s\"\n",
			`client.toml: client.handshake_timeout: -1s out of range (100ms..1m0s)`},
		{"removed keepalive", "client.toml", cl + "keepalive = \"10s\"\n",
			`client.toml: line 10: unknown key "client.keepalive"`},
		{"hold with reorder off", "client.toml", cl + "reorder = \"off\"\nreorder_hold = \"10ms\"\n",
			`client.toml: client.reorder_hold: set, but reorder = "off" holds nothing (remove it or choose "fixed" or "adaptive")`},
		{"bad budget", "client.toml", cl + "paths = [\"eth1\", \"wwan0\"]\nbudgets = [\"\", \"10GiB/year\"]\n",
			`client.toml: client.budgets[1]: "10GiB/year": period "year": want day, week or month`},
		{"priorities without paths", "client.toml", cl + "priorities = [0, 1]\n",
			`client.toml: client.priorities: 2 priorities for 0 paths (one per entry of paths, in the same order)`},
		{"priority out of range", "client.toml", cl + "paths = [\"eth1\", \"wwan0\"]\npriorities = [0, 9]\n",
			`client.toml: client.priorities[1]: 9 out of range (0..7; 0 is the first tier)`},
		{"weights without weighted", "client.toml", cl + "weights = [1.0]\n",
			`client.toml: client.weights: set, but only scheduler = "weighted" uses weights (scheduler is "earliest-arrival")`},
		{"weights count", "client.toml", edit(t, cl, `servers = ["198.18.1.2:7000"]`, `servers = ["198.18.1.2:7000", "198.18.2.2:7000"]`) +
			"paths = [\"eth1\", \"eth2\"]\nscheduler = \"weighted\"\nweights = [3, 1, 1]\n",
			`client.toml: client.weights: 3 weights for 4 subflows (2 paths × 2 servers × 1 per path; order: path, then server, then subflow)`},
		{"negative weight", "client.toml", cl + "scheduler = \"weighted\"\nweights = [-1]\n",
			`client.toml: client.weights[0]: -1 is not a finite number ≥ 0`},
		{"zero weights", "client.toml", cl + "scheduler = \"weighted\"\nweights = [0]\n",
			`client.toml: client.weights: all weights are 0; at least one subflow must carry traffic`},
		{"server id too big", "server.toml", edit(t, sv, "[server]\n", "[server]\nserver_id = 8\nserver_id_bits = 3\n"),
			`server.toml: server.server_id: 8 does not fit in server_id_bits = 3 (0..7)`},
		{"server id without bits", "server.toml", edit(t, sv, "[server]\n", "[server]\nserver_id = 1\n"),
			`server.toml: server.server_id: 1 needs server_id_bits > 0 (with 0 bits the only id is 0)`},
		{"server id bits", "server.toml", edit(t, sv, "[server]\n", "[server]\nserver_id_bits = 17\n"),
			`server.toml: server.server_id_bits: 17 out of range (0..16)`},
		{"handshake rate", "server.toml", edit(t, sv, "[server]\n", "[server]\nhandshake_rate = -1\n"),
			`server.toml: server.handshake_rate: -1 out of range (0..1000000; 0 = unlimited)`},
		{"replay window", "client.toml", cl + "[security]\nreplay_window = 1000\n",
			`client.toml: security.replay_window: 1000 out of range (1024..16777216 packets)`},
		{"reject before rekey", "client.toml", cl + "[security]\nrekey_after_time = \"3m\"\n",
			`client.toml: security.reject_after_time: 3m0s must be longer than rekey_after_time (3m0s), or sessions die before they rekey`},
		{"rekey packets", "client.toml", cl + "[security]\nrekey_after_packets = 1152921504606846976\n",
			`client.toml: security.rekey_after_packets: 1152921504606846976 out of range (65536..1152921504606846975)`},
		{"metrics address", "client.toml", cl + "[control]\nmetrics = \"9273\"\n",
			`client.toml: control.metrics: "9273" is not host:port`},
		{"metrics port", "client.toml", cl + "[control]\nmetrics = \"localhost:http\"\n",
			`client.toml: control.metrics: "localhost:http": port must be a number in 1..65535`},
		{"socket too long", "client.toml", cl + "[control]\nsocket = \"/" + strings.Repeat("s", 110) + "\"\n",
			`client.toml: control.socket: "/` + strings.Repeat("s", 110) + `" is 111 bytes; unix socket paths are limited to 107`},

		// Identity.
		{"own key as server key", "client.toml", "", ""}, // filled in below
		{"duplicate client key", "server.toml", sv + "[[server.clients]]\npublic_key = \"" + peerPubB + "\"\nallowed_ips = [\"100.64.0.3/32\"]\n" +
			"[[server.clients]]\npublic_key = \"" + peerPubA + "\"\nallowed_ips = [\"100.64.0.4/32\"]\n",
			`server.toml: server.clients[2].public_key: duplicates server.clients[0].public_key`},
		{"bad client key", "server.toml", edit(t, sv, peerPubA, "abc"),
			`server.toml: server.clients[0].public_key: bad key: not base64`},
		{"short client key", "server.toml", edit(t, sv, peerPubA, "AAAA"),
			`server.toml: server.clients[0].public_key: bad key: 3 bytes, want 32`},
		{"zero server key", "client.toml", edit(t, cl, serverPub, zeroPub),
			`client.toml: client.server_public_key: ` + lowOrderMsg},
		{"low-order server key", "client.toml", edit(t, cl, serverPub, order8Pub),
			`client.toml: client.server_public_key: ` + lowOrderMsg},
		{"low-order server key, top bit set", "client.toml", edit(t, cl, serverPub, order1TopPub),
			`client.toml: client.server_public_key: ` + lowOrderMsg},
		{"low-order client key", "server.toml", sv + "[[server.clients]]\npublic_key = \"" + order8Pub + "\"\nallowed_ips = [\"100.64.0.3/32\"]\n",
			`server.toml: server.clients[1].public_key: ` + lowOrderMsg},
		{"duplicate client name", "server.toml", edit(t, sv, "[[server.clients]]\n", "[[server.clients]]\nname = \"x\"\n") +
			"[[server.clients]]\nname = \"x\"\npublic_key = \"" + peerPubB + "\"\nallowed_ips = [\"100.64.0.3/32\"]\n",
			`server.toml: server.clients[1].name: "x" duplicates server.clients[0].name`},

		// Overlapping allowed_ips.
		{"overlap across clients", "server.toml", edit(t, sv, `["100.64.0.2/32"]`, `["100.64.0.2/32", "10.20.0.0/16"]`) +
			"[[server.clients]]\npublic_key = \"" + peerPubB + "\"\nallowed_ips = [\"100.64.0.3/32\"]\n" +
			"[[server.clients]]\npublic_key = \"" + peerPubC + "\"\nallowed_ips = [\"100.64.0.4/32\", \"10.20.30.0/24\"]\n",
			`server.toml: server.clients[2].allowed_ips[1]: 10.20.30.0/24 overlaps server.clients[0].allowed_ips[1] (10.20.0.0/16)`},
		{"overlap, wider later", "server.toml", edit(t, sv, `["100.64.0.2/32"]`, `["100.64.0.2/32", "10.1.1.0/24"]`) +
			"[[server.clients]]\npublic_key = \"" + peerPubB + "\"\nallowed_ips = [\"10.1.0.0/16\"]\n",
			`server.toml: server.clients[1].allowed_ips[0]: 10.1.0.0/16 overlaps server.clients[0].allowed_ips[1] (10.1.1.0/24)`},
		{"allowed ips contain server address", "server.toml", sv + "[[server.clients]]\npublic_key = \"" + peerPubB + "\"\nallowed_ips = [\"100.64.0.0/30\"]\n",
			`server.toml: server.clients[1].allowed_ips[0]: 100.64.0.0/30 contains this server's own tunnel address 100.64.0.1`},
		{"overlap, identical", "server.toml", sv + "[[server.clients]]\npublic_key = \"" + peerPubB + "\"\nallowed_ips = [\"fd00::/64\", \"100.64.0.2/32\"]\n",
			`server.toml: server.clients[1].allowed_ips[1]: 100.64.0.2/32 overlaps server.clients[0].allowed_ips[0] (100.64.0.2/32)`},
		{"overlap within one client", "server.toml", edit(t, sv, `["100.64.0.2/32"]`, `["100.64.0.2/32", "100.64.0.2/31"]`),
			`server.toml: server.clients[0].allowed_ips[1]: 100.64.0.2/31 overlaps server.clients[0].allowed_ips[0] (100.64.0.2/32)`},
	}
	// The client's own key named as the server's: needs the derived public key.
	ownPub := func() string {
		k, err := keys.ReadFile(filepath.Join(dir, "client.key"))
		if err != nil {
			t.Fatal(err)
		}
		return k.Public().String()
	}()
	if err := os.WriteFile(filepath.Join(dir, "notakey"), []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range cases {
		if tc.name == "own key as server key" {
			tc.doc = edit(t, cl, serverPub, ownPub)
			tc.want = `client.toml: client.server_public_key: is this client's own public key (private_key_file and the server must differ)`
		}
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.file, []byte(tc.doc))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %s", tc.want)
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("error\n got: %s\nwant: %s", got, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans several lines")
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.File != tc.file {
				t.Errorf("error is %T, not *Error for %s", err, tc.file)
			}
		})
	}
}

func TestErrorFields(t *testing.T) {
	dir := keyDir(t)
	doc := minimalServer(dir) + "[[server.clients]]\npublic_key = \"" + peerPubB + "\"\nallowed_ips = [\"100.64.0.300/32\"]\n"
	_, err := Parse("server.toml", []byte(doc))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v", err)
	}
	if ce.Key != "server.clients[1].allowed_ips[0]" || ce.Line != 0 || ce.File != "server.toml" {
		t.Errorf("Error = %+v", ce)
	}

	_, err = Parse("x.toml", []byte("role = \"client\"\n\n\n[client]\nshceduler = 1\n"))
	if !errors.As(err, &ce) || ce.Line != 5 {
		t.Errorf("unknown key error = %+v, want line 5", err)
	}
}

func TestReplayWindowRoundsUp(t *testing.T) {
	dir := keyDir(t)
	for _, tc := range []struct{ in, want int }{{1024, 1024}, {1025, 2048}, {100000, 131072}, {65536, 65536}} {
		doc := minimalClient(dir) + "[security]\nreplay_window = " + strconv.Itoa(tc.in) + "\n"
		cfg := mustParse(t, "client.toml", doc)
		if cfg.Security.ReplayWindow != tc.want {
			t.Errorf("replay_window %d → %d, want %d", tc.in, cfg.Security.ReplayWindow, tc.want)
		}
	}
}

func TestWeightsAndV6(t *testing.T) {
	dir := keyDir(t)
	doc := edit(t, minimalClient(dir), `servers = ["198.18.1.2:7000"]`, `servers = ["198.18.1.2:7000", "[fd00::1]:7000"]`) +
		"paths = [\"198.18.1.1\", \"fd00::2\"]\nsubflows_per_path = 2\nscheduler = \"weighted\"\nweights = [4, 4, 0, 0, 1, 1, 1, 1.5]\n"
	cfg := mustParse(t, "client.toml", doc)
	c := cfg.Client
	if c.SubflowCount() != 8 {
		t.Fatalf("SubflowCount = %d, want 2 × 2 × 2 = 8", c.SubflowCount())
	}
	if !slices.Equal(c.Weights, []float64{4, 4, 0, 0, 1, 1, 1, 1.5}) {
		t.Errorf("Weights = %v", c.Weights)
	}
	if c.Servers[1] != netip.MustParseAddrPort("[fd00::1]:7000") {
		t.Errorf("Servers[1] = %v", c.Servers[1])
	}
	if c.Paths[1].String() != "fd00::2" || c.Paths[0].String() != "198.18.1.1" {
		t.Errorf("Paths = %v", c.Paths)
	}
}

func TestCongestionNames(t *testing.T) {
	dir := keyDir(t)
	for _, name := range []string{"reno", "cubic", "lia", "olia", "balia", "wvegas", "coupled", "ewtcp", "none"} {
		cfg := mustParse(t, "client.toml", minimalClient(dir)+"congestion = \""+name+"\"\n")
		if cfg.Client.Congestion != name {
			t.Errorf("congestion = %q parsed as %q", name, cfg.Client.Congestion)
		}
	}
}

func TestLowOrderKeyError(t *testing.T) {
	dir := keyDir(t)
	_, err := Parse("client.toml", []byte(edit(t, minimalClient(dir), serverPub, order8Pub)))
	if !errors.Is(err, keys.ErrLowOrder) || !errors.Is(err, keys.ErrBadKey) {
		t.Errorf("err = %v, want one wrapping keys.ErrLowOrder and keys.ErrBadKey", err)
	}
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != "client.server_public_key" {
		t.Errorf("err = %#v", err)
	}
}

// chmod sets a file's mode exactly, whatever the umask.
func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func TestKeyFileModeWarnings(t *testing.T) {
	dir := keyDir(t)
	if cfg := mustParse(t, "client.toml", minimalClient(dir)); cfg.Warnings != nil {
		t.Fatalf("mode 0600 key: Warnings = %q, want none", cfg.Warnings)
	}

	for _, tc := range []struct {
		mode os.FileMode
		want string // "" for no warning
	}{
		{0o400, ""},
		{0o600, ""},
		{0o700, ""},
		{0o644, "is accessible to its group and all users (mode 0644)"},
		{0o640, "is accessible to its group (mode 0640)"},
		{0o604, "is accessible to all users (mode 0604)"},
		{0o602, "is accessible to all users (mode 0602)"}, // writable is as bad
	} {
		key := filepath.Join(dir, "client.key")
		chmod(t, key, tc.mode)
		cfg := mustParse(t, "client.toml", minimalClient(dir))
		if tc.want == "" {
			if cfg.Warnings != nil {
				t.Errorf("mode %04o: Warnings = %q, want none", tc.mode, cfg.Warnings)
			}
			continue
		}
		want := "client.toml: private_key_file: " + key + " " + tc.want + "; a secret key should be readable by its owner only: chmod 600 " + key
		if len(cfg.Warnings) != 1 || cfg.Warnings[0] != want {
			t.Errorf("mode %04o: Warnings = %q, want [%q]", tc.mode, cfg.Warnings, want)
		}
	}
	chmod(t, filepath.Join(dir, "client.key"), 0o600)

	// Preshared keys are secrets too; a server-wide file that a client also
	// names is reported once, under the key that first read it.
	psk := filepath.Join(dir, "a.psk")
	chmod(t, psk, 0o644)
	doc := `preshared_key_file = "` + psk + `"
` + minimalServer(dir) + `preshared_key_file = "` + psk + `"
`
	cfg := mustParse(t, "server.toml", doc)
	want := []string{"server.toml: preshared_key_file: " + psk + " is accessible to its group and all users (mode 0644); a secret key should be readable by its owner only: chmod 600 " + psk}
	if !slices.Equal(cfg.Warnings, want) {
		t.Errorf("Warnings = %q, want %q", cfg.Warnings, want)
	}
	cfg = mustParse(t, "server.toml", minimalServer(dir)+`preshared_key_file = "`+psk+`"
`)
	if len(cfg.Warnings) != 1 || !strings.HasPrefix(cfg.Warnings[0], "server.toml: server.clients[0].preshared_key_file: "+psk+" is accessible") {
		t.Errorf("client psk: Warnings = %q", cfg.Warnings)
	}

	// A warning is no error: a file that fails still fails, with its error.
	chmod(t, filepath.Join(dir, "client.key"), 0o644)
	_, err := Parse("client.toml", []byte(minimalClient(dir)+"scheduler = \"x\"\n"))
	if err == nil || !strings.Contains(err.Error(), "client.scheduler") {
		t.Errorf("err = %v", err)
	}
}

func TestMetricsExposureWarnings(t *testing.T) {
	dir := keyDir(t)
	const tail = "; the metrics endpoint has no authentication and its labels show every peer's public key and endpoint addresses (bind it to 127.0.0.1 or [::1], or firewall the port)"
	for _, tc := range []struct {
		addr string
		want string // "" for no warning
	}{
		{"127.0.0.1:9273", ""},
		{"127.0.0.53:9273", ""},
		{"[::1]:9273", ""},
		{"[::ffff:127.0.0.1]:9273", ""},
		{"localhost:9273", ""},
		{":9273", ""}, // loopback: 127.0.0.1:9273
		{"0.0.0.0:9273", `"0.0.0.0:9273" listens on all interfaces`},
		{"[::]:9273", `"[::]:9273" listens on all interfaces`},
		{"198.18.1.1:9273", `"198.18.1.1:9273" is not a loopback address`},
		{"[fd00::1]:9273", `"[fd00::1]:9273" is not a loopback address`},
		{"metrics.example:9273", `"metrics.example:9273" names a host, not a loopback address`},
	} {
		cfg := mustParse(t, "client.toml", minimalClient(dir)+"[control]\nmetrics = \""+tc.addr+"\"\n")
		addr := tc.addr
		if strings.HasPrefix(addr, ":") {
			addr = "127.0.0.1" + addr
		}
		if cfg.Control.Metrics != addr {
			t.Errorf("%s: Metrics = %q", tc.addr, cfg.Control.Metrics)
		}
		if tc.want == "" {
			if cfg.Warnings != nil {
				t.Errorf("%s: Warnings = %q, want none", tc.addr, cfg.Warnings)
			}
			continue
		}
		want := []string{"client.toml: control.metrics: " + tc.want + tail}
		if !slices.Equal(cfg.Warnings, want) {
			t.Errorf("%s: Warnings\n got: %q\nwant: %q", tc.addr, cfg.Warnings, want)
		}
	}
}

// Every example config parses (with a key file next to it).
func TestExamplesParse(t *testing.T) {
	files, err := filepath.Glob("../examples/*.toml")
	if err != nil || len(files) < 6 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		for _, k := range []string{"client.key", "server.key", "branch.key", "laptop.key", "hq.key", "branch-office.psk"} {
			writeKey(t, filepath.Join(dir, k))
		}
		if _, err := Parse(filepath.Join(dir, filepath.Base(f)), data); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestPriorities(t *testing.T) {
	dir := keyDir(t)
	cfg := mustParse(t, filepath.Join(dir, "c.toml"), minimalClient(dir)+"paths = [\"wlan0\", \"wwan0\"]\npriorities = [0, 1]\nbudgets = [\"\", \"10GiB/month\"]\nbudget_state = \"usage.json\"\n")
	if got := []int{cfg.Client.Paths[0].Priority, cfg.Client.Paths[1].Priority}; got[0] != 0 || got[1] != 1 {
		t.Fatalf("priorities %v", got)
	}
	if !cfg.Client.Paths[0].Budget.IsZero() || cfg.Client.Paths[1].Budget.String() != "10GiB/month" || cfg.Client.BudgetState != filepath.Join(dir, "usage.json") {
		t.Fatalf("budgets %+v, state %q", cfg.Client.Paths, cfg.Client.BudgetState)
	}
}

// Interface patterns are accepted as paths.
func TestPathPatterns(t *testing.T) {
	dir := keyDir(t)
	cfg := mustParse(t, filepath.Join(dir, "c.toml"), minimalClient(dir)+"paths = [\"eth0\", \"wwan*\"]\n")
	if cfg.Client.Paths[1].Interface != "wwan*" {
		t.Fatalf("paths %+v", cfg.Client.Paths)
	}
}

// The console: loopback alone, or a token and TLS; every other combination
// fails naming the file and the key to set.
func TestConsole(t *testing.T) {
	dir := keyDir(t)
	tls := "console_cert = \"" + dir + "/console.crt\"\nconsole_key = \"" + dir + "/console.key\"\n"
	const token = "console_token = \"0123456789abcdef\"\n"
	for _, tc := range []struct {
		name, control string
		addr          string // the Console address parsed, when no error
		err           string
	}{
		{"loopback", `console = "127.0.0.1:9911"`, "127.0.0.1:9911", ""},
		{"bare port", `console = ":9911"`, "127.0.0.1:9911", ""},
		{"localhost with token", "console = \"localhost:9911\"\n" + token, "localhost:9911", ""},
		{"everywhere with token and TLS", "console = \"0.0.0.0:9911\"\n" + token + tls, "0.0.0.0:9911", ""},
		{"everywhere without token", "console = \"0.0.0.0:9911\"\n" + tls,
			"", `client.toml: control.console_token: required: control.console "0.0.0.0:9911" listens on all interfaces`},
		{"address without TLS", "console = \"198.18.1.1:9911\"\n" + token,
			"", `client.toml: control.console_cert: required: control.console "198.18.1.1:9911" is not a loopback address`},
		{"host name", "console = \"braid.example:9911\"\n" + token,
			"", `client.toml: control.console_cert: required: control.console "braid.example:9911" names a host`},
		{"short token", "console = \"127.0.0.1:9911\"\nconsole_token = \"short\"", "", "client.toml: control.console_token: 5 characters; want at least 16"},
		{"cert without key", "console = \"127.0.0.1:9911\"\nconsole_cert = \"" + dir + "/console.crt\"", "", "client.toml: control.console_key: required with control.console_cert"},
		{"unreadable cert", "console = \"127.0.0.1:9911\"\nconsole_cert = \"" + dir + "/none.crt\"\nconsole_key = \"" + dir + "/console.key\"", "", "client.toml: control.console_cert: " + dir + "/none.crt with"},
		{"token without console", token, "", "client.toml: control.console_token: set without control.console"},
		{"bad port", `console = "127.0.0.1:http"`, "", `client.toml: control.console: "127.0.0.1:http": port must be a number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("client.toml", []byte(minimalClient(dir)+"[control]\n"+tc.control+"\n"))
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %s…", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Control.Console != tc.addr {
				t.Errorf("Console = %q, want %q", cfg.Control.Console, tc.addr)
			}
		})
	}
}
