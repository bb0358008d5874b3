package bench

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/httpbench"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/lab/runner"
)

func TestBenchPaths(t *testing.T) {
	if len(benchPaths) != 4 {
		t.Fatalf("%d veth pairs, want 4", len(benchPaths))
	}
	p := benchPaths[2]
	if p.Name != "p3" || p.Index != 2 || p.ClientIf != "a-p3" || p.ServerIf != "b-p3" ||
		p.ClientAddr.String() != "198.18.3.1" || p.ServerAddr.String() != "198.18.3.2" || p.Subnet.String() != "198.18.3.0/24" {
		t.Errorf("third path %+v", p)
	}
	for c, want := range map[string]int{
		"kernel": 2, "kernel,braid-1path,wireguard-go": 2, "braid-2paths": 2, "braid-4paths": 4,
		strings.Join(AllCases, ","): 4,
	} {
		if got := vethsFor(strings.Split(c, ",")); got != want {
			t.Errorf("vethsFor(%s) = %d, want %d", c, got, want)
		}
	}
}

func TestCheckParallel(t *testing.T) {
	for _, c := range []struct {
		k    int
		size int64
		ok   bool
	}{{1, 1, true}, {4, 1 << 20, true}, {MaxParallel, 1 << 30, true}, {0, 10, false}, {MaxParallel + 1, 1 << 30, false}, {3, 2, false}} {
		if err := CheckParallel(c.k, c.size); (err == nil) != c.ok {
			t.Errorf("CheckParallel(%d, %d): %v", c.k, c.size, err)
		}
	}
}

// loopTunnel downloads from a local httpbench server, counting its dials;
// failAt > 0 makes that dial fail.
type loopTunnel struct {
	runner.BaseSession
	dials  atomic.Int32
	failAt int32
}

func (l *loopTunnel) Dial(ctx context.Context, n, a string) (net.Conn, error) {
	if l.dials.Add(1) == l.failAt {
		return nil, errors.New("left from the wrong address")
	}
	var d net.Dialer
	return d.DialContext(ctx, n, a)
}

func TestDownloadParallel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: httpbench.Handler()}
	go srv.Serve(ln)
	defer srv.Close()
	target := netip.MustParseAddrPort(ln.Addr().String()).String()

	// 3 downloads of 1000001 bytes in all: 333334 + 333334 + 333333, each
	// on a connection of its own that the tunnel dialed.
	tn := &loopTunnel{BaseSession: runner.BaseSession{To: target}}
	res, err := download(context.Background(), tn, 1000001, 3)
	if err != nil || res.Bytes != 1000001 || res.Duration <= 0 || tn.dials.Load() != 3 {
		t.Errorf("got %+v (%v), %d dials; want 1000001 bytes over 3", res, err, tn.dials.Load())
	}
	// One refused connection fails the whole download, with its own error.
	tn = &loopTunnel{BaseSession: runner.BaseSession{To: target}, failAt: 2}
	if _, err := download(context.Background(), tn, 3<<20, 4); err == nil || !strings.Contains(err.Error(), "wrong address") {
		t.Errorf("a refused connection: %v", err)
	}
}

// parseFile is what braid reads from f written as dir/name, beside a fresh
// key in the key file f names.
func parseFile(dir, name string, f *config.File) (*config.Config, error) {
	k, _ := keys.Generate() // a write that fails shows as Parse's error
	os.WriteFile(filepath.Join(dir, f.PrivateKeyFile), []byte(k.String()), 0o600)
	data, err := f.Encode()
	if err != nil {
		return nil, err
	}
	return config.Parse(filepath.Join(dir, name), data)
}

// The generated files pass braid's own strict parser: one path is one
// subflow to the address on that path; two and four paths mesh with all
// the addresses.
func TestBraidConfigs(t *testing.T) {
	dir := t.TempDir()
	sk, _ := keys.Generate()
	ck, _ := keys.Generate()
	for _, c := range []struct {
		n        int
		servers  []string
		ifs      []string
		subflows int
	}{
		{1, []string{"198.18.1.2:7000"}, []string{"a-p1"}, 1},
		{2, []string{"198.18.1.2:7000", "198.18.2.2:7000"}, []string{"a-p1", "a-p2"}, 4},
		{4, []string{"198.18.1.2:7000", "198.18.2.2:7000", "198.18.3.2:7000", "198.18.4.2:7000"}, []string{"a-p1", "a-p2", "a-p3", "a-p4"}, 16},
	} {
		_, cf := braidConfigs(Config{}, benchPaths[:c.n])(sk, ck, filepath.Join(dir, "s.sock"), filepath.Join(dir, "c.sock"))
		cfg, err := parseFile(dir, "client.toml", cf)
		if err != nil {
			t.Fatalf("%d paths: %v", c.n, err)
		}
		cl := cfg.Client
		var servers, ifs []string
		for _, s := range cl.Servers {
			servers = append(servers, s.String())
		}
		for _, p := range cl.Paths {
			ifs = append(ifs, p.Interface)
		}
		if !slices.Equal(servers, c.servers) || !slices.Equal(ifs, c.ifs) || cl.SubflowCount() != c.subflows || cl.ServerPublicKey != sk.Public() {
			t.Errorf("%d paths: servers %v paths %v subflows %d", c.n, servers, ifs, cl.SubflowCount())
		}
		if cfg.Tun.Address[0].String() != "100.64.0.2/24" {
			t.Errorf("client address %v", cfg.Tun.Address)
		}
		if cl.Congestion != config.DefaultCongestion || cl.Recovery != config.DefaultRecovery {
			t.Errorf("%d paths: congestion %q recovery %q, want braid's defaults", c.n, cl.Congestion, cl.Recovery)
		}
	}
	// The bench's --congestion and --recovery reach the client's file,
	// --crypto-workers both files.
	workers := 3
	sf, cf := braidConfigs(Config{Congestion: "none", Recovery: "off", CryptoWorkers: &workers}, benchPaths[:1])(sk, ck, filepath.Join(dir, "s.sock"), filepath.Join(dir, "c.sock"))
	cfg, err := parseFile(dir, "client.toml", cf)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Client.Congestion != "none" || cfg.Client.Recovery != "off" || cfg.CryptoWorkers != 3 {
		t.Errorf("congestion %q recovery %q workers %d, want none, off and 3", cfg.Client.Congestion, cfg.Client.Recovery, cfg.CryptoWorkers)
	}
	sc, err := parseFile(dir, "server.toml", sf)
	if err != nil {
		t.Fatal(err)
	}
	if sc.CryptoWorkers != 3 {
		t.Errorf("server crypto_workers %d, want 3", sc.CryptoWorkers)
	}
	if len(sc.Server.Clients) != 1 || sc.Server.Clients[0].PublicKey != ck.Public() || sc.Server.Clients[0].AllowedIPs[0].String() != "100.64.0.2/32" {
		t.Errorf("server clients %+v", sc.Server.Clients)
	}
	if sc.Server.Listen[0].String() != "0.0.0.0:7000" {
		t.Errorf("server listens on %v", sc.Server.Listen)
	}
}

func TestCheckCases(t *testing.T) {
	if err := CheckCases(AllCases); err != nil {
		t.Error(err)
	}
	if err := CheckCases([]string{"kernel", "braid-3paths"}); err == nil || !strings.Contains(err.Error(), `"braid-3paths"`) {
		t.Errorf("unknown case: %v", err)
	}
}
