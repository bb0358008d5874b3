package load

import (
	"bytes"
	"encoding/binary"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/lab/flood"
	"github.com/braid-vpn/braid/lab/report"
)

func TestPlan(t *testing.T) {
	if ServerInner().String() != "100.64.0.1" || ClientInner(0).String() != "100.64.0.2" || ClientInner(300).String() != "100.64.1.46" {
		t.Errorf("inner addresses %v %v %v", ServerInner(), ClientInner(0), ClientInner(300))
	}
	if Source(0, 0, 2).String() != "198.19.0.1" || Source(0, 1, 2).String() != "198.19.0.2" || Source(200, 1, 2).String() != "198.19.1.146" {
		t.Errorf("sources %v %v %v", Source(0, 0, 2), Source(0, 1, 2), Source(200, 1, 2))
	}
	// Every source of the largest run is distinct, inside Sources and not
	// its broadcast address; every inner address inside Tunnel.
	seen := map[netip.Addr]bool{}
	for i := range MaxClients {
		for k := range 2 {
			a := Source(i, k, 2)
			if seen[a] || !Sources.Contains(a) || a == nth(Sources, 1<<16-1) {
				t.Fatalf("client %d path %d: source %v repeated or outside %v", i, k, a, Sources)
			}
			seen[a] = true
		}
		if !Tunnel.Contains(ClientInner(i)) || ClientInner(i) == ServerInner() {
			t.Fatalf("client %d: inner %v", i, ClientInner(i))
		}
	}
	if Sources.Overlaps(ServerOuter) || Sources.Overlaps(ClientOuter) || !ServerOuter.Contains(ClientOuter.Addr()) {
		t.Errorf("outer plan %v %v %v", ServerOuter, ClientOuter, Sources)
	}
	for _, c := range []struct {
		n, p int
		ok   bool
	}{{1, 1, true}, {MaxClients, 2, true}, {MaxClients, MaxPaths, false}, {0, 2, false}, {MaxClients + 1, 2, false}, {10, 0, false}, {10, MaxPaths + 1, false}} {
		if err := checkPlan(c.n, c.p); (err == nil) != c.ok {
			t.Errorf("checkPlan(%d, %d): %v", c.n, c.p, err)
		}
	}
}

func TestCheck(t *testing.T) {
	good := Config{Clients: 10, Paths: 2, Rate: 10, PacketSize: 1200, Hold: time.Second}.withDefaults()
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]func(*Config){
		"clients":  func(c *Config) { c.Clients = MaxClients + 1 },
		"small":    func(c *Config) { c.PacketSize = MinPacket - 1 },
		"big":      func(c *Config) { c.PacketSize = MaxPacket + 1 },
		"rate":     func(c *Config) { c.Rate = -1 },
		"start":    func(c *Config) { c.StartRate = -1 },
		"rekey":    func(c *Config) { c.RekeyAfter = time.Millisecond },
		"negative": func(c *Config) { c.Traffic = -time.Second },
	} {
		c := good
		bad(&c)
		if err := c.Check(); err == nil {
			t.Errorf("%s: %+v passed", name, c)
		}
	}
}

// TestServerFile: the server's file, written as the run writes it, is one
// braid accepts, with every client, its name and inner address, and the
// run's rekey times.
func TestServerFile(t *testing.T) {
	dir := t.TempDir()
	srv, _ := keys.Generate()
	text, _ := srv.MarshalText()
	if err := os.WriteFile(filepath.Join(dir, "server.key"), text, 0o600); err != nil {
		t.Fatal(err)
	}
	var cks []keys.Key
	for range 3 {
		k, _ := keys.Generate()
		cks = append(cks, k)
	}
	cfg := Config{RekeyAfter: 4 * time.Second}
	data, err := serverFile(cfg, cks, filepath.Join(dir, "s.sock")).Encode()
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(filepath.Join(dir, "server.toml"), data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if c.Server == nil || len(c.Server.Clients) != 3 || c.Security.RekeyAfterTime != 4*time.Second || c.Security.RejectAfterTime != 6*time.Second {
		t.Fatalf("parsed %+v / %+v", c.Server, c.Security)
	}
	for i, p := range c.Server.Clients {
		if p.Name != clientName(i) || p.PublicKey != cks[i].Public() || len(p.AllowedIPs) != 1 || p.AllowedIPs[0] != netip.PrefixFrom(ClientInner(i), 32) {
			t.Errorf("client %d: %+v", i, p)
		}
	}
	if len(c.Tun.Address) != 1 || c.Tun.Address[0] != netip.PrefixFrom(ServerInner(), Tunnel.Bits()) {
		t.Errorf("tun addresses %v", c.Tun.Address)
	}
	// Without a rekey time the file keeps braid's defaults.
	data, _ = serverFile(Config{}, cks, "s.sock").Encode()
	if bytes.Contains(data, []byte("rekey")) {
		t.Errorf("a run without --rekey-after sets it:\n%s", data)
	}
}

// TestInnerPacket: the packets the clients inject are IPv4/UDP to the sink
// with a valid header checksum (the server's kernel drops any other).
func TestInnerPacket(t *testing.T) {
	src := netip.AddrPortFrom(ClientInner(7), SinkPort)
	p := flood.UDP4(make([]byte, 100), src, Sink(), make([]byte, 100-MinPacket))
	if len(p) != 100 || p[0] != 0x45 || p[9] != 17 || binary.BigEndian.Uint16(p[2:]) != 100 {
		t.Fatalf("packet % x", p[:28])
	}
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(p[i:]))
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	if sum != 0xffff {
		t.Errorf("header checksum does not verify: sum %04x", sum)
	}
	if d := netip.AddrFrom4([4]byte(p[16:20])); d != Sink().Addr() || binary.BigEndian.Uint16(p[22:]) != SinkPort {
		t.Errorf("to %v:%d", d, binary.BigEndian.Uint16(p[22:]))
	}
}

// TestResult fills a Result as a run does and checks the figures and the
// report made of them.
func TestResult(t *testing.T) {
	cfg := Config{Clients: 4, Paths: 2, Rate: 10, PacketSize: 1000, Hold: 2 * time.Second, RekeyAfter: 3 * time.Second}.withDefaults()
	r := newResult(cfg)
	start := time.Now()
	r.setRamp(reply{Start: start, Up: []float64{0.5, 1, 2, -1}}, 0.3)
	if r.Ramp.Established != 3 || r.Ramp.AllUpSeconds.Valid() || r.Ramp.MedianUpSeconds != 1 || r.Ramp.P90UpSeconds != 2 ||
		r.Ramp.HandshakesPerSecond != 1.5 || math.Abs(float64(r.Ramp.CPUPerHandshakeMs)-100) > 1e-9 {
		t.Errorf("ramp %+v", r.Ramp)
	}
	const mb = 1 << 20
	base := procSample{at: start, cpu: 1, rss: 30 * mb}
	from := procSample{at: start.Add(time.Second), cpu: 2, rss: 32 * mb}
	to := procSample{at: start.Add(3 * time.Second), cpu: 3, rss: 34 * mb, hwm: 35 * mb}
	st := &control.Status{Memory: &control.MemoryStatus{HeapBytes: 5e6, TotalBytes: 9e6}, Peers: []control.PeerStatus{{Established: true}, {}, {Established: true}}}
	r.setIdle(10*mb, base, from, to, st)
	id := r.Idle
	if id.RSSPerClientKiB != 1024 || id.RSSPerConfiguredKiB != 6*1024 || id.ServerCores != 0.5 || id.PeersUp != 2 || id.GoHeapMB != 5 || id.PeakRSSMB != 35*mb/1e6 {
		t.Errorf("idle %+v", id)
	}
	r.setTraffic(reply{Packets: 1000, Bytes: 1e6}, 0.9e6, 900, 2*time.Second, 1.5)
	tr := r.Traffic
	if math.Abs(float64(tr.LossPercent)-10) > 1e-9 || math.Abs(float64(tr.Mbps)-3.6) > 1e-9 || math.Abs(float64(tr.CPUPerGB)-1.5/0.9e-3) > 1e-6 ||
		math.Abs(float64(tr.CPUPerGBAbove)-(1.5-0.5*2.5)/0.9e-3) > 1e-6 {
		t.Errorf("traffic %+v", tr)
	}
	hs := []float64{0.5, 1, 2, 3.4, 4.1, 4.2, 6.9}
	r.setEnd(reply{Handshakes: hs, Drops: map[string]uint64{"handshake_stale": 3, "replayed": 0}},
		map[string]uint64{"forged": 1, "handshake_cookie_sent": 0, "unknown_index": 2},
		map[string]uint64{"forged": 3, "handshake_cookie_sent": 5, "unknown_index": 2}, 2.1)
	h := r.Handshakes
	if h.Total != 7 || h.Rekeys != 4 || h.PeakAfterRamp != 2 || len(h.PerSecond) != 7 || h.PerSecond[4] != 2 || h.PerSecond[5] != 0 {
		t.Errorf("handshakes %+v", h)
	}
	if len(r.ServerDrops) != 2 || r.ServerDrops["forged"] != 2 || r.ServerDrops["handshake_cookie_sent"] != 5 ||
		len(r.UnexpectedDrops) != 1 || r.UnexpectedDrops["forged"] != 2 || len(r.ClientDrops) != 1 {
		t.Errorf("drops %v / %v / %v", r.ServerDrops, r.UnexpectedDrops, r.ClientDrops)
	}

	doc := r.Document()
	var text bytes.Buffer
	doc.WriteText(&text)
	for _, want := range []string{"4 client engines of 2 path(s)", "rekey_after_time 3s", "3 of 4", "server RSS per client (KiB)", "1024.0",
		"forged", "yes", "0: 1, 1: 1, 2: 1, 3: 1, 4: 2, 6: 1"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}
	dir := t.TempDir()
	if _, err := doc.Write(dir); err != nil {
		t.Fatal(err)
	}
	csv, err := os.ReadFile(filepath.Join(dir, "handshakes.csv"))
	if err != nil || !strings.HasPrefix(string(csv), "second,handshakes\n0,1\n") || strings.Count(string(csv), "\n") != 8 {
		t.Errorf("handshakes.csv: %v\n%s", err, csv)
	}
	if _, err := os.Stat(filepath.Join(dir, report.FileJSON)); err != nil {
		t.Error(err)
	}
}

func TestPerSecondText(t *testing.T) {
	if got := perSecondText(nil, 3); got != "none" {
		t.Errorf("none: %q", got)
	}
	if got := perSecondText([]int{0, 2, 0, 1, 1, 1}, 2); got != "1: 2, 3: 1, …" {
		t.Errorf("capped: %q", got)
	}
}
