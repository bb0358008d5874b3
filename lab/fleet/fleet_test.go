package fleet

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAddressPlan checks that every client path, server link and inner
// address is distinct, inside its block and the lab's ranges, and that a
// link's two ends share its /30.
func TestAddressPlan(t *testing.T) {
	seen := map[netip.Addr]string{}
	add := func(a netip.Addr, what string) {
		t.Helper()
		if prev, dup := seen[a]; dup {
			t.Fatalf("%v is both %s and %s", a, prev, what)
		}
		seen[a] = what
	}
	lab := netip.MustParsePrefix("198.18.0.0/15")
	const clients, paths = 300, 3
	for i := range clients {
		for k := range paths {
			r, c := clientPathLink(i, k, paths)
			if !clientLinks.Contains(r.Addr()) || !lab.Contains(c.Addr()) || r.Masked() != c.Masked() || r.Bits() != 30 {
				t.Fatalf("client %d path %d: %v – %v", i, k, r, c)
			}
			add(r.Addr(), "a router end")
			add(c.Addr(), "a client end")
		}
		add(clientInner(i).Addr(), "an inner address")
		if !TunnelPrefix.Contains(clientInner(i).Addr()) || clientInner(i).Addr() == serverInner {
			t.Fatalf("client %d: inner %v", i, clientInner(i))
		}
	}
	for j := range MaxServers {
		r, s := serverLink(j)
		if !serverLinks.Contains(r.Addr()) || !serverLinks.Contains(s.Addr()) || r.Masked() != s.Masked() {
			t.Fatalf("server %d: %v – %v", j, r, s)
		}
		add(r.Addr(), "a router end")
		add(s.Addr(), "a server end")
	}
	for _, a := range []netip.Addr{VIP, backendAddr, backendRouter} {
		add(a, "a fixed address")
		if !lab.Contains(a) {
			t.Errorf("%v is outside the lab's range", a)
		}
	}
	if r, c := clientPathLink(1, 0, 2); r.String() != "198.19.0.9/30" || c.String() != "198.19.0.10/30" {
		t.Errorf("client 1 path 0: %v – %v, want 198.19.0.9/30 – 198.19.0.10/30", r, c)
	}
	if got := clientInner(300).Addr().String(); got != "100.64.1.46" {
		t.Errorf("client 300's inner address %s, want 100.64.1.46", got)
	}
	for n, want := range map[int]int{1: 0, 2: 8, 3: 8, 64: 8, 256: 8, 257: 9} {
		if got := serverIDBits(n); got != want {
			t.Errorf("serverIDBits(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestCheck checks that a bad config names the flag and what is wrong.
func TestCheck(t *testing.T) {
	good := Config{Servers: 3, Clients: 20, Paths: 2, Duration: 50 * time.Second, Kill: 1, KillAt: 15 * time.Second, ReviveAt: 35 * time.Second}.withDefaults()
	if err := good.Check(); err != nil {
		t.Fatalf("the scale-out scenario: %v", err)
	}
	for _, c := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Servers = 0 }, "--servers: 0"},
		{func(c *Config) { c.Clients = MaxClients + 1 }, "--clients"},
		{func(c *Config) { c.Paths = MaxClientPaths }, "--paths"},
		{func(c *Config) { c.Duration = 0 }, "--seconds"},
		{func(c *Config) { c.Kill = 3 }, "--kill: server 3 does not exist"},
		{func(c *Config) { c.Kill = -2 }, "--kill: server -2 does not exist"},
		{func(c *Config) { c.KillAt = time.Minute }, "outside the run"},
		{func(c *Config) { c.ReviveAt = 10 * time.Second }, "--revive"},
		{func(c *Config) { c.Servers, c.Kill = 1, 0 }, "the only server"},
		{func(c *Config) { c.RekeyAfter = time.Millisecond }, "--rekey-after"},
		{func(c *Config) { c.Sample = 0 }, "--sample"},
		{func(c *Config) { c.Object = -1 }, "--object"},
	} {
		cfg := good
		c.change(&cfg)
		if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error with %q, got %v", c.want, err)
		}
	}
}

// TestStall checks the longest stall: gaps before the window do not count,
// the window's start counts as progress, and a gap still open at the end
// is closed by stall.
func TestStall(t *testing.T) {
	var p progress
	var clk clock
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	clk.from.Store(ms(1000))
	p.read(10, ms(100), &clk)
	p.read(10, ms(900), &clk) // an 800 ms gap before the window
	if p.maxStall.Load() != 0 {
		t.Fatalf("a stall before the window counted: %v", p.maxStall.Load())
	}
	p.read(10, ms(1300), &clk) // 300 ms from the window's start
	p.read(10, ms(1400), &clk)
	if got := p.maxStall.Load(); got != ms(300) || p.stallAt.Load() != ms(1000) {
		t.Errorf("stall %d ns at %d, want 300 ms at the window's start", got, p.stallAt.Load())
	}
	clk.phase.Store(phaseAfterKill)
	p.read(10, ms(1500), &clk)
	p.stall(ms(2000), &clk) // no byte since 1500 at the end
	if got := p.maxStall.Load(); got != ms(500) || p.stallAt.Load() != ms(1500) {
		t.Errorf("stall %d ns at %d, want 500 ms from 1500 ms", got, p.stallAt.Load())
	}
	if b, a := p.phaseStall[phaseBeforeKill].Load(), p.phaseStall[phaseAfterKill].Load(); b != ms(300) || a != ms(500) {
		t.Errorf("phase stalls %d and %d ns, want 300 and 500 ms", b, a)
	}
	if p.bytes.Load() != 50 {
		t.Errorf("%d bytes, want 50", p.bytes.Load())
	}
}

// TestFinish checks the summary on a hand-made run: three servers, server
// 1 killed at 10 s; client 0 fails over to 2, client 1 stays on 0, client
// 2 moves from 0 to 2 at 5 s without a kill, client 3 fails over and then
// moves again.
func TestFinish(t *testing.T) {
	r := newResults(Config{Servers: 3, Clients: 4, Paths: 2, Duration: 30 * time.Second, Kill: 1, KillAt: 10 * time.Second, Uplink: 100e6}.withDefaults())
	r.Setup.Kill = 1 // as the kill sets it
	r.Start, r.BeforeKill, r.End = []int{1, 0, 0, 1}, []int{1, 0, 2, 1}, []int{2, 0, 2, 0}
	h := func(hs ...Holder) []Holder { return hs }
	r.Clients[0].Holders = h(Holder{0, 1}, Holder{10.2, -1}, Holder{16, 2})
	r.Clients[1].Holders = h(Holder{0, 0})
	r.Clients[2].Holders = h(Holder{0, 0}, Holder{5, 2})
	r.Clients[3].Holders = h(Holder{0, 1}, Holder{10.2, -1}, Holder{15, 0}, Holder{20, 2}, Holder{21, 0})
	for i, g := range []float64{40, 20, 20, 10} {
		r.Clients[i].GoodputMbps = g
		r.Clients[i].LongestStallMs = []float64{7000, 50, 90, 6000}[i]
		r.Clients[i].PhaseStallMs = [][]float64{{30, 7000, 0}, {50, 40, 0}, {90, 80, 60}, {20, 5000, 6000}}[i]
	}
	// Client 2 has one path usable on its server, client 3 one bringing
	// server 2 bytes although server 0 holds its session.
	usable := [][]int{{0, 0, 2}, {2, 0, 0}, {0, 0, 1}, {2, 0, 0}}
	receiving := [][]int{{0, 0, 1}, {2, 0, 0}, {0, 0, 1}, {1, 0, 1}}
	r.finish(usable, receiving, []int{2, 0, 3})
	s := r.Summary
	if s.AggregateMbps != 90 || s.UplinkShare != 0.3 { // three servers' uplinks
		t.Errorf("aggregate %v, share %v", s.AggregateMbps, s.UplinkShare)
	}
	if want := 90.0 * 90 / (4 * (1600 + 400 + 400 + 100)); s.Jain != want {
		t.Errorf("Jain %v, want %v", s.Jain, want)
	}
	if s.KilledClients != 2 || s.KilledStallMs != 7000 || s.OthersStallMs != 80 || s.OthersBaselineMs != 90 {
		t.Errorf("killed %d, their stall %v, the others' %v after the kill and %v before", s.KilledClients, s.KilledStallMs, s.OthersStallMs, s.OthersBaselineMs)
	}
	if len(s.KilledLanded) != 2 || s.KilledLanded[0] != 2 || s.KilledLanded[1] != 0 || s.KilledSessionBackS != 6 {
		t.Errorf("landed on %v, back within %v s, want [2 0] and 6 s", s.KilledLanded, s.KilledSessionBackS)
	}
	for i, want := range []int{0, 0, 1, 2} {
		if r.Clients[i].Moves != want {
			t.Errorf("client %d: %d moves, want %d", i, r.Clients[i].Moves, want)
		}
	}
	if s.Moves != 3 {
		t.Errorf("%d moves, want 3", s.Moves)
	}
	for i, want := range []bool{true, true, false, false} {
		if r.Clients[i].PathsHome != want {
			t.Errorf("client %d: paths %v / %v on %d, home %v", i, usable[i], receiving[i], r.End[i], r.Clients[i].PathsHome)
		}
	}
	want := []ServerResult{
		{ID: 0, SessionsStart: 2, Sessions: 2, Established: 2, Paths: 4},
		{ID: 1, Killed: true, SessionsStart: 2},
		{ID: 2, Sessions: 2, Established: 3, Paths: 3, StrayPaths: 1},
	}
	if s.ClientsPathsHome != 2 || !slices.Equal(r.Servers, want) {
		t.Errorf("paths home %d, servers %+v, want %+v", s.ClientsPathsHome, r.Servers, want)
	}
}

// TestUplinkCeiling pins the ceiling docs/lab.md quotes: 1328 bytes of TCP
// payload in a 1475-byte frame.
func TestUplinkCeiling(t *testing.T) {
	if got, want := uplinkCeiling, 1328.0/1475; got != want {
		t.Errorf("ceiling %v, want %v (docs/lab.md)", got, want)
	}
}
