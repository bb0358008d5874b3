package config

import (
	"bytes"

	"github.com/pelletier/go-toml/v2"
)

// The File types mirror the file, key for key: Parse decodes into them and
// Encode writes them, so a key added here is both read and written. They
// hold plain strings and numbers so that parsing prefixes, addresses, keys
// and durations happens in Parse, where the error can name the key with its
// array index, rather than inside go-toml, whose messages name Go types.
// Pointers mark values whose absence differs from their zero value (an
// explicit handshake_rate = 0 disables the limit).
//
// Encode omits every empty field (zero, "", nil, an empty table), so what a
// File leaves unset keeps the daemon's default. Programs that write braid's
// config (the lab) build a File and encode it instead of formatting TOML.
type File struct {
	Role             string       `toml:"role,omitempty"`
	PrivateKeyFile   string       `toml:"private_key_file,omitempty"`
	PresharedKeyFile string       `toml:"preshared_key_file,omitempty"`
	LogLevel         string       `toml:"log_level,omitempty"`
	Offload          *bool        `toml:"offload,omitempty"`
	CryptoWorkers    *int64       `toml:"crypto_workers,omitempty"`
	Tun              FileTun      `toml:"tun,omitempty"`
	Client           *FileClient  `toml:"client,omitempty"`
	Server           *FileServer  `toml:"server,omitempty"`
	Security         FileSecurity `toml:"security,omitempty"`
	Control          FileControl  `toml:"control,omitempty"`
}

// FileTun is the [tun] table.
type FileTun struct {
	Name    string   `toml:"name,omitempty"`
	Address []string `toml:"address,omitempty"`
	MTU     *int64   `toml:"mtu,omitempty"`
	Routes  []string `toml:"routes,omitempty"`
}

// FileClient is the [client] table.
type FileClient struct {
	ServerPublicKey  string    `toml:"server_public_key,omitempty"`
	Servers          []string  `toml:"servers,omitempty"`
	Paths            []string  `toml:"paths,omitempty"`
	SubflowsPerPath  *int64    `toml:"subflows_per_path,omitempty"`
	Scheduler        string    `toml:"scheduler,omitempty"`
	Weights          []float64 `toml:"weights,omitempty"`
	Priorities       []int64   `toml:"priorities,omitempty"`
	Budgets          []string  `toml:"budgets,omitempty"`
	BudgetState      string    `toml:"budget_state,omitempty"`
	Reorder          string    `toml:"reorder,omitempty"`
	ReorderHold      string    `toml:"reorder_hold,omitempty"`
	Congestion       string    `toml:"congestion,omitempty"`
	Recovery         string    `toml:"recovery,omitempty"`
	HandshakeTimeout string    `toml:"handshake_timeout,omitempty"`
	Transport        string    `toml:"transport,omitempty"`
	TCPCongestion    string    `toml:"tcp_congestion,omitempty"`
}

// FileServer is the [server] table.
type FileServer struct {
	Listen        []string   `toml:"listen,omitempty"`
	ServerID      int64      `toml:"server_id,omitempty"`
	ServerIDBits  int64      `toml:"server_id_bits,omitempty"`
	HandshakeRate *int64     `toml:"handshake_rate,omitempty"`
	ListenSockets int64      `toml:"listen_sockets,omitempty"`
	Transport     string     `toml:"transport,omitempty"`
	TCPCongestion string     `toml:"tcp_congestion,omitempty"`
	Clients       []FilePeer `toml:"clients,omitempty"`
}

// FilePeer is one [[server.clients]] entry.
type FilePeer struct {
	Name             string   `toml:"name,omitempty"`
	PublicKey        string   `toml:"public_key,omitempty"`
	AllowedIPs       []string `toml:"allowed_ips,omitempty"`
	PresharedKeyFile string   `toml:"preshared_key_file,omitempty"`
}

// FileSecurity is the [security] table.
type FileSecurity struct {
	ReplayWindow      *int64 `toml:"replay_window,omitempty"`
	RekeyAfterTime    string `toml:"rekey_after_time,omitempty"`
	RekeyAfterPackets *int64 `toml:"rekey_after_packets,omitempty"`
	RejectAfterTime   string `toml:"reject_after_time,omitempty"`
}

// FileControl is the [control] table.
type FileControl struct {
	Socket  string `toml:"socket,omitempty"`
	Metrics string `toml:"metrics,omitempty"`

	Console      string `toml:"console,omitempty"`
	ConsoleToken string `toml:"console_token,omitempty"`
	ConsoleCert  string `toml:"console_cert,omitempty"`
	ConsoleKey   string `toml:"console_key,omitempty"`
}

// Encode writes f as a config file, leaving out every empty field. It does
// not validate: Parse does, and relative key files in f are resolved
// against the directory of the file the result is written to.
func (f *File) Encode() ([]byte, error) {
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(f); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
