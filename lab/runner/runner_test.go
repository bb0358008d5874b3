package runner

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/lab/testbed"
)

var unimplemented sync.Once

func TestRegistry(t *testing.T) {
	for _, n := range []string{"direct", "mptcp-direct", "braid"} {
		if _, ok := transports[n]; !ok {
			t.Errorf("%s not registered", n)
		}
	}
	for _, n := range scenario.TransportNames() {
		if _, ok := transports[n]; !ok && n != "test-unimplemented" {
			t.Errorf("scenario transport %s has no implementation", n)
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("registering direct twice did not panic")
			}
		}()
		Register("direct", startDirect)
	}()
	Register("test-noop", func(context.Context, *Env) (Session, error) { return nil, nil })
	if !slices.Contains(Names(), "test-noop") || !slices.IsSorted(Names()) {
		t.Errorf("Names() = %v", Names())
	}
	// A kind the scenario package knows but nobody implemented is refused
	// before a testbed is built.
	unimplemented.Do(func() {
		scenario.RegisterTransport(scenario.TransportKind{Name: "test-unimplemented", Summary: "for TestRegistry"})
	})
	err := checkRunnable([]scenario.Point{{Transport: scenario.Transport{Name: "direct"}}, {Transport: scenario.Transport{Name: "test-unimplemented"}}})
	if err == nil || !strings.Contains(err.Error(), `"test-unimplemented"`) {
		t.Errorf("checkRunnable: %v", err)
	}
	if err := checkRunnable(scenario.Default().Points()); err != nil {
		t.Errorf("the default scenario is not runnable: %v", err)
	}
}

var testPaths = []testbed.Path{
	{Name: "primary", ClientIf: "a-primary", ClientAddr: netip.MustParseAddr("198.18.1.1"), ServerAddr: netip.MustParseAddr("198.18.1.2"), Subnet: netip.MustParsePrefix("198.18.1.0/24")},
	{Name: "secondary", ClientIf: "a-secondary", ClientAddr: netip.MustParseAddr("198.18.2.1"), ServerAddr: netip.MustParseAddr("198.18.2.2"), Subnet: netip.MustParsePrefix("198.18.2.0/24")},
}

// encode is f as braid reads it.
func encode(t *testing.T, f *config.File) []byte {
	t.Helper()
	data, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The generated configs must pass braid's own strict parser and say what
// the transport asked for.
func TestBraidConfigsParse(t *testing.T) {
	dir := t.TempDir()
	sk, _ := keys.Generate()
	ck, _ := keys.Generate()
	os.WriteFile(filepath.Join(dir, "server.key"), []byte(sk.String()), 0o600)
	os.WriteFile(filepath.Join(dir, "client.key"), []byte(ck.String()), 0o600)
	web := netip.MustParsePrefix("198.18.3.0/24")
	tr := scenario.Transport{Name: "braid", Scheduler: "weighted", Weights: []float64{90, 10}, Reorder: "fixed", Congestion: "none", Recovery: "off"}
	cc, err := config.Parse(filepath.Join(dir, "client.toml"), encode(t, BraidClientConfig(tr, testPaths, web, sk, filepath.Join(dir, "c.sock"))))
	if err != nil {
		t.Fatal(err)
	}
	c := cc.Client
	if c.Recovery != "off" {
		t.Errorf("client: recovery %q, want off", c.Recovery)
	}
	if c.Scheduler != "weighted" || c.Reorder != "fixed" || !slices.Equal(c.Weights, []float64{90, 90, 10, 10}) {
		t.Errorf("client: scheduler %q reorder %q weights %v", c.Scheduler, c.Reorder, c.Weights)
	}
	if len(c.Paths) != 2 || c.Paths[1].Interface != "a-secondary" || len(c.Servers) != 2 || c.Servers[1].String() != "198.18.2.2:7000" {
		t.Errorf("client paths %v servers %v", c.Paths, c.Servers)
	}
	if !slices.Equal(cc.Tun.Routes, []netip.Prefix{web}) || c.ServerPublicKey != sk.Public() {
		t.Errorf("tun routes %v", cc.Tun.Routes)
	}
	sc, err := config.Parse(filepath.Join(dir, "server.toml"), encode(t, BraidServerConfig("lab", ck, filepath.Join(dir, "s.sock"))))
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Server.Clients) != 1 || sc.Server.Clients[0].PublicKey != ck.Public() || sc.Server.Clients[0].AllowedIPs[0].String() != "100.64.0.2/32" {
		t.Errorf("server clients %+v", sc.Server.Clients)
	}
	// Defaults stay the config's: an unset option is not written.
	if s := encode(t, BraidClientConfig(scenario.Transport{Name: "braid"}, testPaths, web, sk, "x.sock")); strings.Contains(string(s), "scheduler") || strings.Contains(string(s), "weights") {
		t.Errorf("unset options written:\n%s", s)
	}

	// An MPTCP tunnel: both ends get the transport and the download's
	// congestion control, the client the extra subflows.
	srvF, cliF := BraidServerConfig("lab", ck, filepath.Join(dir, "s.sock")), BraidClientConfig(scenario.Transport{Name: "mptcp-tunnel"}, testPaths, web, sk, filepath.Join(dir, "c.sock"))
	braidSetup{transport: "mptcp"}.apply(srvF, cliF, "cubic", 4)
	if cc, err = config.Parse(filepath.Join(dir, "client.toml"), encode(t, cliF)); err != nil {
		t.Fatal(err)
	}
	if sc, err = config.Parse(filepath.Join(dir, "server.toml"), encode(t, srvF)); err != nil {
		t.Fatal(err)
	}
	if c := cc.Client; c.Transport != "mptcp" || c.TCPCongestion != "cubic" || c.SubflowsPerPath != 4 {
		t.Errorf("mptcp client: transport %q tcp_congestion %q subflows %d", c.Transport, c.TCPCongestion, c.SubflowsPerPath)
	}
	if s := sc.Server; s.Transport != "mptcp" || s.TCPCongestion != "cubic" {
		t.Errorf("mptcp server: transport %q tcp_congestion %q", s.Transport, s.TCPCongestion)
	}
}

// TestCompetitorConfigs: the server accepts both clients; the competing
// client is the measured one's copy with its own key, device, address and
// socket, and routes the web subnet's parent (the measured client keeps the
// web subnet itself in its own device); the measured file is left as it was.
func TestCompetitorConfigs(t *testing.T) {
	dir := t.TempDir()
	sk, _ := keys.Generate()
	ck, _ := keys.Generate()
	qk, _ := keys.Generate()
	for name, k := range map[string]keys.Key{"server.key": sk, "client.key": ck, "competitor.key": qk} {
		os.WriteFile(filepath.Join(dir, name), []byte(k.String()), 0o600)
	}
	web := netip.MustParsePrefix("198.18.3.0/24")
	srvF, cliF := BraidServerConfig("lab", ck, filepath.Join(dir, "s.sock")), BraidClientConfig(scenario.Transport{Name: "braid", Scheduler: "minrtt"}, testPaths, web, sk, filepath.Join(dir, "c.sock"))
	before := string(encode(t, cliF))
	compF := AddCompetitor(srvF, cliF, qk, filepath.Join(dir, "q.sock"))
	if after := string(encode(t, cliF)); after != before {
		t.Errorf("the measured client's file changed:\n%s\nwas\n%s", after, before)
	}
	sc, err := config.Parse(filepath.Join(dir, "server.toml"), encode(t, srvF))
	if err != nil {
		t.Fatal(err)
	}
	if cs := sc.Server.Clients; len(cs) != 2 || cs[1].PublicKey != qk.Public() || cs[1].AllowedIPs[0] != CompetitorAddr {
		t.Errorf("server clients %+v, want the measured client and the competitor at %v", cs, CompetitorAddr)
	}
	qc, err := config.Parse(filepath.Join(dir, "competitor.toml"), encode(t, compF))
	if err != nil {
		t.Fatal(err)
	}
	if qc.PrivateKey != qk || qc.Tun.Name != CompetitorTun || !slices.Equal(qc.Tun.Address, []netip.Prefix{CompetitorAddr}) || qc.Control.Socket != filepath.Join(dir, "q.sock") {
		t.Errorf("competitor: tun %+v, socket %q, own key %v", qc.Tun, qc.Control.Socket, qc.PrivateKey == qk)
	}
	if want := []netip.Prefix{netip.MustParsePrefix("198.18.2.0/23")}; !slices.Equal(qc.Tun.Routes, want) {
		t.Errorf("competitor routes %v, want %v", qc.Tun.Routes, want)
	}
	if c := qc.Client; c.ServerPublicKey != sk.Public() || c.Scheduler != "minrtt" || len(c.Paths) != 2 || len(c.Servers) != 2 {
		t.Errorf("competitor client %+v, want the measured client's server, scheduler, paths", c)
	}
}

func TestMPTCPCommands(t *testing.T) {
	got, _ := MPTCPSubflowCommands(testPaths, 1)
	want := [][]string{
		{"mptcp", "limits", "set", "subflow", "8", "add_addr_accepted", "8"},
		{"mptcp", "endpoint", "add", "198.18.2.1", "dev", "a-secondary", "subflow"},
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, _ := MPTCPSubflowCommands(nil, 1); len(got) != 1 {
		t.Errorf("no paths: %q", got)
	}
}

func TestUsablePaths(t *testing.T) {
	st := control.Status{Peers: []control.PeerStatus{{Established: true, Paths: []control.PathStatus{
		{Device: "a-primary", State: "active"},
		{Device: "a-primary", State: "down"},
		{Device: "a-secondary", State: "probing"},
	}}}}
	if n := UsablePaths(st, testPaths); n != 1 {
		t.Errorf("usable %d, want 1 (secondary only probing)", n)
	}
	st.Peers[0].Paths[2].State = "degraded"
	if n := UsablePaths(st, testPaths); n != 2 {
		t.Errorf("usable %d, want 2", n)
	}
	st.Peers[0].Established = false
	if n := UsablePaths(st, testPaths); n != 0 {
		t.Errorf("usable %d without a session, want 0", n)
	}
	// Without a device the local address decides.
	if !onPath(control.PathStatus{Local: "198.18.2.1:4000"}, testPaths[1]) || onPath(control.PathStatus{Local: "198.18.2.1:4000"}, testPaths[0]) {
		t.Error("onPath by local address")
	}
}

func TestSharesAndOptions(t *testing.T) {
	s := Shares(map[string]uint64{"primary": 300, "secondary": 100})
	if s["primary"] != 0.75 || s["secondary"] != 0.25 {
		t.Errorf("shares %v", s)
	}
	if Shares(map[string]uint64{"primary": 0}) != nil {
		t.Error("shares of nothing should be nil")
	}
	o := TransportOptions(scenario.Transport{Scheduler: "weighted", Weights: []float64{75, 25}})
	if len(o) != 2 || o["weights"] != "75/25" || o["scheduler"] != "weighted" {
		t.Errorf("options %v", o)
	}
	if TransportOptions(scenario.Transport{Name: "direct"}) != nil {
		t.Error("no options should be nil")
	}
	if sub(5, 7) != 5 || sub(7, 5) != 2 {
		t.Error("sub")
	}
}

// The description counts the subflows the daemon lists as usable against
// the full mesh, and only an established peer's.
func TestBraidDetail(t *testing.T) {
	var paths []control.PathStatus
	for i := range 16 {
		st := "active"
		if i == 5 {
			st = "probing"
		}
		paths = append(paths, control.PathStatus{State: st})
	}
	st := control.Status{Peers: []control.PeerStatus{
		{Established: true, Scheduler: "earliest-arrival", Congestion: "rate", Recovery: "retransmit+fec", Paths: paths},
		{Established: false, Scheduler: "other", Paths: paths},
	}}
	got := braidDetail(st, []string{"a-p1", "a-p2", "a-p3", "a-p4"}, 4, 1380)
	want := "braid scheduler earliest-arrival, congestion rate, recovery retransmit+fec, 4 path(s) over veth a-p1+a-p2+a-p3+a-p4 to 4 server address(es): 15 of 16 daemon paths usable, inner MTU 1380"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// runInNamespaces runs the scenario text on the built-in testbed with the
// userspace emulator, skipping the test unless it runs as root.
func runInNamespaces(t *testing.T, name, prefix, text string) *results.Run {
	t.Helper()
	return runWith(t, name, text, Options{Prefix: prefix, Emulator: "userspace"})
}

// runWith is runInNamespaces with the runner's options given.
func runWith(t *testing.T, name, text string, opt Options) *results.Run {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: builds the testbed in network namespaces")
	}
	s, err := scenario.Parse(name, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	run, err := Run(context.Background(), s, opt)
	if err != nil {
		t.Fatal(err)
	}
	return run
}
