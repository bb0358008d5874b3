package config

import (
	"bytes"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// unset lists the fields of v that are empty as Encode sees them (zero
// strings and numbers, nil pointers and slices), by their TOML key, looking
// into tables and arrays of tables.
func unset(v reflect.Value, prefix string) []string {
	var out []string
	t := v.Type()
	for i := range t.NumField() {
		key, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
		key = prefix + key
		f := v.Field(i)
		if f.Kind() == reflect.Pointer && !f.IsNil() && f.Elem().Kind() == reflect.Struct {
			f = f.Elem()
		}
		switch {
		case f.Kind() == reflect.Struct:
			out = append(out, unset(f, key+".")...)
		case f.Kind() == reflect.Slice && f.Len() > 0 && f.Index(0).Kind() == reflect.Struct:
			for j := range f.Len() {
				out = append(out, unset(f.Index(j), key+".")...)
			}
		case f.IsZero():
			out = append(out, key)
		}
	}
	return out
}

// fullFiles are a client and a server file that together set every key
// (TestEncodeRoundTrip checks that they do, so a key added to File must be
// added here), with values Parse accepts.
func fullFiles(dir string) (client, server *File) {
	tun := FileTun{Name: "wan3", Address: []string{"100.64.0.2/24", "fd00:b5a1::2/64"}, MTU: new(int64(1400)), Routes: []string{"198.18.3.0/24", "fd00:1::/64"}}
	sec := FileSecurity{ReplayWindow: new(int64(4096)), RekeyAfterTime: "90s", RekeyAfterPackets: new(int64(1 << 20)), RejectAfterTime: "150s"}
	client = &File{
		Role: "client", PrivateKeyFile: filepath.Join(dir, "client.key"), PresharedKeyFile: "a.psk", LogLevel: "debug", Offload: new(false), CryptoWorkers: new(int64(3)),
		Tun: tun,
		Client: &FileClient{
			ServerPublicKey:  serverPub,
			Servers:          []string{"198.18.1.2:7000", "198.18.2.2:7000"},
			Paths:            []string{"eth1", "198.18.2.1"},
			SubflowsPerPath:  new(int64(2)),
			Scheduler:        "weighted",
			Weights:          []float64{3, 3, 0.5, 0.5, 1, 1, 2.25, 0},
			Priorities:       []int64{0, 4},
			Budgets:          []string{"", "10GiB/month"},
			BudgetState:      "laptop.budget",
			Reorder:          "fixed",
			ReorderHold:      "30ms",
			Congestion:       "olia",
			Recovery:         "fec",
			HandshakeTimeout: "2s",
			Transport:        "tcp",
			TCPCongestion:    "cubic",
		},
		Security: sec,
		Control: FileControl{Socket: "ctl/c.sock", Metrics: "127.0.0.1:9273", Console: "127.0.0.1:9911", ConsoleToken: "0123456789abcdef",
			ConsoleCert: filepath.Join(dir, "console.crt"), ConsoleKey: filepath.Join(dir, "console.key")},
	}
	server = &File{
		Role: "server", PrivateKeyFile: "server.key", PresharedKeyFile: "a.psk", LogLevel: "warn", Offload: new(true), CryptoWorkers: new(int64(0)),
		Tun: FileTun{Name: "srv0", Address: []string{"100.64.0.1/24"}, MTU: new(int64(1300)), Routes: []string{"10.9.0.0/16"}},
		Server: &FileServer{
			Listen:        []string{"0.0.0.0:7000", "[::]:7001"},
			ListenSockets: 1,
			ServerID:      5,
			ServerIDBits:  4,
			HandshakeRate: new(int64(0)), // explicit 0 (unlimited) differs from absent (20)
			Transport:     "mptcp",
			TCPCongestion: "bbr",
			Clients: []FilePeer{
				{Name: "laptop", PublicKey: peerPubA, AllowedIPs: []string{"100.64.0.2/32", "fd00:b5a1::2/128"}, PresharedKeyFile: "a.psk"},
				{Name: "office", PublicKey: peerPubB, AllowedIPs: []string{"100.64.0.3/32"}, PresharedKeyFile: filepath.Join(dir, "a.psk")},
			},
		},
		Security: sec,
		Control: FileControl{Socket: "s.sock", Metrics: "[::1]:9274", Console: "0.0.0.0:9911", ConsoleToken: "fedcba9876543210",
			ConsoleCert: filepath.Join(dir, "console.crt"), ConsoleKey: filepath.Join(dir, "console.key")},
	}
	return client, server
}

// securityDoc is fullFiles' [security] table, as a document says it.
const securityDoc = `[security]
replay_window = 4096
rekey_after_time = "90s"
rekey_after_packets = 1048576
reject_after_time = "150s"
`

// Encode writes every key of File so that the parser reads back the same
// File and the same Config as from the equivalent hand-written document.
func TestEncodeRoundTrip(t *testing.T) {
	dir := keyDir(t)
	client, server := fullFiles(dir)
	if got := unset(reflect.ValueOf(*client), ""); !slices.Equal(got, []string{"server"}) {
		t.Errorf("the client file leaves %v unset; set every [client] and common key", got)
	}
	if got := unset(reflect.ValueOf(*server), ""); !slices.Equal(got, []string{"client"}) {
		t.Errorf("the server file leaves %v unset; set every [server] and common key", got)
	}
	handWritten := map[*File]string{
		client: `role = "client"
private_key_file = "` + dir + `/client.key"
preshared_key_file = "a.psk"
log_level = "debug"
offload = false
crypto_workers = 3
[tun]
name = "wan3"
address = ["100.64.0.2/24", "fd00:b5a1::2/64"]
mtu = 1400
routes = ["198.18.3.0/24", "fd00:1::/64"]
[client]
server_public_key = "` + serverPub + `"
servers = ["198.18.1.2:7000", "198.18.2.2:7000"]
paths = ["eth1", "198.18.2.1"]
subflows_per_path = 2
scheduler = "weighted"
weights = [3, 3, 0.5, 0.5, 1, 1, 2.25, 0]
priorities = [0, 4]
budgets = ["", "10GiB/month"]
budget_state = "laptop.budget"
reorder = "fixed"
reorder_hold = "30ms"
congestion = "olia"
recovery = "fec"
handshake_timeout = "2s"
transport = "tcp"
tcp_congestion = "cubic"
` + securityDoc + `[control]
socket = "ctl/c.sock"
metrics = "127.0.0.1:9273"
console = "127.0.0.1:9911"
console_token = "0123456789abcdef"
console_cert = "` + dir + `/console.crt"
console_key = "` + dir + `/console.key"
`,
		server: `role = "server"
private_key_file = "server.key"
preshared_key_file = "a.psk"
log_level = "warn"
offload = true
crypto_workers = 0
[tun]
name = "srv0"
address = ["100.64.0.1/24"]
mtu = 1300
routes = ["10.9.0.0/16"]
[server]
listen = ["0.0.0.0:7000", "[::]:7001"]
listen_sockets = 1
server_id = 5
server_id_bits = 4
handshake_rate = 0
transport = "mptcp"
tcp_congestion = "bbr"
[[server.clients]]
name = "laptop"
public_key = "` + peerPubA + `"
allowed_ips = ["100.64.0.2/32", "fd00:b5a1::2/128"]
preshared_key_file = "a.psk"
[[server.clients]]
name = "office"
public_key = "` + peerPubB + `"
allowed_ips = ["100.64.0.3/32"]
preshared_key_file = "` + dir + `/a.psk"
` + securityDoc + `[control]
socket = "s.sock"
metrics = "[::1]:9274"
console = "0.0.0.0:9911"
console_token = "fedcba9876543210"
console_cert = "` + dir + `/console.crt"
console_key = "` + dir + `/console.key"
`,
	}
	for f, doc := range handWritten {
		name := filepath.Join(dir, f.Role+".toml")
		data, err := f.Encode()
		if err != nil {
			t.Fatalf("%s: Encode: %v", f.Role, err)
		}
		back, err := decode(name, data)
		if err != nil {
			t.Fatalf("%s: decoding the encoded file: %v\n%s", f.Role, err, data)
		}
		if !reflect.DeepEqual(back, f) {
			t.Errorf("%s: decoded %+v\nwant %+v\nfrom:\n%s", f.Role, back, f, data)
		}
		got, err := Parse(name, data)
		if err != nil {
			t.Fatalf("%s: Parse of the encoded file: %v\n%s", f.Role, err, data)
		}
		want := mustParse(t, name, doc)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Parse(Encode) = %+v\nwant %+v\nfrom:\n%s", f.Role, got, want, data)
		}
	}
}

// An empty field is not written, so the daemon's default applies: a
// minimal File encodes to only the keys it sets.
func TestEncodeOmitsEmpty(t *testing.T) {
	dir := keyDir(t)
	f := &File{
		Role: "client", PrivateKeyFile: filepath.Join(dir, "client.key"),
		Tun:    FileTun{Address: []string{"100.64.0.2/24"}},
		Client: &FileClient{ServerPublicKey: serverPub, Servers: []string{"198.18.1.2:7000"}},
	}
	data, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{"[server", "[security", "[control", "mtu", "scheduler", "weights", "subflows_per_path", `""`, "''", "[]"} {
		if bytes.Contains(data, []byte(absent)) {
			t.Errorf("%q written:\n%s", absent, data)
		}
	}
	got := mustParse(t, "client.toml", string(data))
	if want := mustParse(t, "client.toml", minimalClient(dir)); !reflect.DeepEqual(got, want) {
		t.Errorf("Parse(Encode(minimal)) = %+v\nwant %+v\nfrom:\n%s", got, want, data)
	}
}
