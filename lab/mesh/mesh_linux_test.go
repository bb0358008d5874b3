package mesh

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-vpn/braid/lab/linkemu"
	"github.com/braid-vpn/braid/netns"
	"github.com/braid-vpn/braid/route"
)

// testPrefix is distinct from Prefix, so a test never removes (nor is
// mistaken for) a real run's namespaces.
const testPrefix = "braid-mesht"

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces, veth pairs and packet sockets")
	}
}

// ours lists the namespaces this process made with testPrefix.
func ours(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(netns.RunDir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	mine := fmt.Sprintf("%s-%d-", testPrefix, os.Getpid())
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), mine) {
			out = append(out, e.Name())
		}
	}
	return out
}

// buildShared builds the LD pair of the shared-node graph (both paths
// cross at m) with the default link model.
func buildShared(t *testing.T) *Mesh {
	t.Helper()
	g, s, d := shared(t)
	ps, err := route.Find(g, s, d, route.LD, 0, route.HopCount)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := NewPlan(g, s, d, ps[:2], Config{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Build(plan, testPrefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if n := len(ours(t)); n != len(plan.Testbed.Nodes) {
		t.Errorf("%d namespaces, want %d nodes and link nodes", n, len(plan.Testbed.Nodes))
	}
	return m
}

// listen starts a TCP server on the service address in the destination
// that runs serve on every connection.
func listen(t *testing.T, m *Mesh, port int, serve func(net.Conn)) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := m.Destination().Do(func() (err error) {
		ln, err = net.Listen("tcp4", fmt.Sprintf("%v:%d", m.Plan.Service, port))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return ln
}

// hopTotals is what each hop has forwarded since the mesh was built:
// towards the destination (AtoB) and towards the source (BtoA).
func hopTotals(m *Mesh) [][2]uint64 {
	out := make([][2]uint64, len(m.Plan.Hops))
	for h := range out {
		l := m.tb.LinkEmulator(hopName(h))
		out[h] = [2]uint64{l.Stats(linkemu.AtoB).BytesForwarded, l.Stats(linkemu.BtoA).BytesForwarded}
	}
	return out
}

// TestMeshPathsFollowTheirRoutes: a connection from each path's address
// reaches the service address, the server sees that address, and its
// bytes cross every hop of that path — both ways — and no hop of the
// other, although the two paths cross at m. Offloads are off on every
// end feeding an emulator, and Close leaves no namespace behind.
func TestMeshPathsFollowTheirRoutes(t *testing.T) {
	needRoot(t)
	m := buildShared(t)
	const payload = 100_000
	var mu sync.Mutex
	peers := map[string]bool{}
	listen(t, m, 9000, func(c net.Conn) {
		defer c.Close()
		mu.Lock()
		peers[c.RemoteAddr().(*net.TCPAddr).IP.String()] = true
		mu.Unlock()
		n, _ := io.Copy(io.Discard, c)
		if n == payload {
			c.Write(make([]byte, payload))
		}
	})
	for _, v := range m.Plan.Testbed.Veths {
		for _, e := range [][2]string{{v.NodeA, v.IfA}, {v.NodeB, v.IfB}} {
			if on, err := linkemu.ActiveOffloads(m.tb.NS(e[0]), e[1]); err != nil || len(on) > 0 {
				t.Errorf("%s %s: offloads on: %v (%v)", e[0], e[1], on, err)
			}
		}
	}
	for k, pp := range m.Plan.Paths {
		before := hopTotals(m)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := m.PathSession(k, "").Dial(ctx, "tcp4", fmt.Sprintf("%v:9000", m.Plan.Service))
		if err != nil {
			cancel()
			t.Fatalf("path %d: %v", k, err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(make([]byte, payload)); err != nil {
			t.Fatalf("path %d: write: %v", k, err)
		}
		c.(*net.TCPConn).CloseWrite()
		n, err := io.Copy(io.Discard, c)
		c.Close()
		cancel()
		if err != nil || n != payload {
			t.Fatalf("path %d: got %d of %d bytes back (%v)", k, n, payload, err)
		}
		mu.Lock()
		if !peers[pp.ClientAddr.String()] {
			t.Errorf("path %d: the server never saw %v (saw %v)", k, pp.ClientAddr, peers)
		}
		mu.Unlock()
		after := hopTotals(m)
		for h, hop := range m.Plan.Hops {
			down, up := after[h][0]-before[h][0], after[h][1]-before[h][1]
			if hop.Path == k {
				if down < payload || up < payload {
					t.Errorf("path %d, hop %d (%s): %d bytes towards the destination, %d back; want ≥ %d each way",
						k, h, m.Plan.Graph.ID(hop.From)+"–"+m.Plan.Graph.ID(hop.To), down, up, payload)
				}
			} else if down+up > 1000 {
				t.Errorf("path %d's connection put %d bytes on hop %d of path %d", k, down+up, h, hop.Path)
			}
		}
	}
	if err := m.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if left := ours(t); len(left) > 0 {
		t.Errorf("namespaces left after Close: %v", left)
	}
}

// TestMeshChannels: two bulk TCP flows, one per path (4 hops each), share
// one channel's airtime on a single channel — each frame uses it once per
// hop, so together they get about Rate/4 — and get about twice that with
// two channels.
func TestMeshChannels(t *testing.T) {
	needRoot(t)
	m := buildShared(t)
	listen(t, m, 9001, func(c net.Conn) {
		defer c.Close()
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
	rate := float64(m.Plan.Config.Rate)
	// A full frame carries 1448 bytes of TCP payload in 1514 (timestamps
	// on); the acknowledgements take about 2% more airtime.
	perChannel := rate / 4 * 1448 / 1514
	measure := func(ch Channels) (total float64, each [2]float64) {
		if err := m.SetChannels(ch); err != nil {
			t.Fatal(err)
		}
		const warm, window = 1 * time.Second, 2 * time.Second
		var wg sync.WaitGroup
		for k := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				c, err := m.PathSession(k, "cubic").Dial(ctx, "tcp4", fmt.Sprintf("%v:9001", m.Plan.Service))
				if err != nil {
					t.Errorf("path %d: %v", k, err)
					return
				}
				defer c.Close()
				start := time.Now()
				c.SetReadDeadline(start.Add(warm + window))
				buf := make([]byte, 64<<10)
				var n int64
				for {
					r, err := c.Read(buf)
					if time.Since(start) > warm {
						n += int64(r)
					}
					if err != nil {
						break
					}
				}
				each[k] = float64(n) * 8 / window.Seconds()
			}()
		}
		wg.Wait()
		return each[0] + each[1], each
	}
	one, oneEach := measure(SingleChannel)
	two, twoEach := measure(TwoChannels)
	t.Logf("single channel: %.2f Mbit/s (%.2f + %.2f); two channels: %.2f Mbit/s (%.2f + %.2f); one channel's share of a 4-hop path: %.2f Mbit/s",
		one/1e6, oneEach[0]/1e6, oneEach[1]/1e6, two/1e6, twoEach[0]/1e6, twoEach[1]/1e6, perChannel/1e6)
	if one < 0.8*perChannel || one > 1.05*perChannel {
		t.Errorf("single channel: %.2f Mbit/s together, want about %.2f (one channel over 4 hops)", one/1e6, perChannel/1e6)
	}
	if two < 0.8*2*perChannel || two > 1.05*2*perChannel {
		t.Errorf("two channels: %.2f Mbit/s together, want about %.2f (one channel each)", two/1e6, 2*perChannel/1e6)
	}
	if r := two / one; r < 1.6 || r > 2.4 {
		t.Errorf("two channels gave %.2f× a single channel, want about 2×", r)
	}
	for k, v := range twoEach {
		if v < 0.8*perChannel {
			t.Errorf("two channels: path %d got %.2f Mbit/s, want about %.2f of its own channel", k, v/1e6, perChannel/1e6)
		}
	}
}

// TestCleanupStale: namespaces left by a dead process with the prefix are
// removed by Build.
func TestCleanupStale(t *testing.T) {
	needRoot(t)
	// A dead PID: a child that has exited and been reaped.
	stale := filepath.Join(netns.RunDir, fmt.Sprintf("%s-%d-abcdef", testPrefix, deadPID(t)))
	if err := os.MkdirAll(netns.RunDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(stale) })
	g := route.NewGraph()
	s, _ := g.AddNode("s")
	d, _ := g.AddNode("d")
	mustLink(t, g, s, d)
	plan, err := NewPlan(g, s, d, []route.Path{{s, d}}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Build(plan, testPrefix)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale %s still there (%v)", stale, err)
	}
}

func deadPID(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Skipf("cannot start /bin/true for a dead PID: %v", err)
	}
	p.Wait()
	return p.Pid
}
