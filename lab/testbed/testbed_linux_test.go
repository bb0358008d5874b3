package testbed

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braid-vpn/braid/lab/linkemu"
	"github.com/braid-vpn/braid/lab/scenario"
)

const testPrefix = "braid-tbt"

// TestBuildRoutesEachPath builds the paper's testbed and checks what the
// runner relies on: a connection from each path's address reaches the web
// server through that path's emulator, offloads are off on all four ends of
// every emulated link, and Close leaves no namespace behind. It runs on each
// emulator backend the kernel has.
func TestBuildRoutesEachPath(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2 (ip)")
	}
	t.Run("userspace", func(t *testing.T) { testBuild(t, EmulatorUserspace) })
	t.Run("netem", func(t *testing.T) {
		if err := NetemAvailable(); err != nil {
			t.Skipf("not testable on this kernel: %v", err)
		}
		testBuild(t, EmulatorNetem)
	})
}

func testBuild(t *testing.T, emulator string) {
	tb, err := Build(scenario.DefaultTopology(), Options{Prefix: testPrefix, Seed: 1, Emulator: emulator})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, n := range tb.Plan.Nodes {
		names = append(names, tb.NS(n.Name).Name())
	}
	t.Cleanup(func() { tb.Close() })

	for _, v := range tb.Plan.Veths {
		if !v.NoOffloads {
			continue
		}
		for _, e := range [][2]string{{v.NodeA, v.IfA}, {v.NodeB, v.IfB}} {
			if on, err := linkemu.ActiveOffloads(tb.NS(e[0]), e[1]); err != nil || len(on) > 0 {
				t.Errorf("%s/%s: offloads still on: %v (%v)", e[0], e[1], on, err)
			}
		}
	}

	var ln net.Listener
	if err := tb.Web().Do(func() (err error) {
		ln, err = net.Listen("tcp4", "0.0.0.0:9000")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { c.Write(make([]byte, 100_000)); c.Close() }()
		}
	}()
	for _, p := range tb.Plan.Paths {
		if emulator == EmulatorUserspace && tb.LinkEmulator(p.Name) == nil {
			t.Fatalf("path %s has no userspace emulator", p.Name)
		}
		before := tb.Delivered(p.Name)
		var c net.Conn
		err := tb.Client().Do(func() (err error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: p.ClientAddr.AsSlice()}, Timeout: 5 * time.Second}
			c, err = d.DialContext(context.Background(), "tcp4", tb.Plan.WebAddr.String()+":9000")
			return err
		})
		if err != nil {
			t.Fatalf("path %s: dial web: %v", p.Name, err)
		}
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		if n != 100_000 {
			t.Errorf("path %s: received %d bytes, want 100000", p.Name, n)
		}
		if got := tb.Delivered(p.Name) - before; got < 100_000 {
			t.Errorf("path %s: its emulator delivered %d bytes towards the client, want ≥ 100000", p.Name, got)
		}
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, n := range names {
		if strings.Contains(string(out), n) {
			t.Errorf("namespace %s still exists after Close", n)
		}
	}
}

// TestMediumSharesCapacity puts both paths of the testbed on one 10 Mbit/s
// medium, cuts and restores them, and sends on both at once: together they
// get the medium's 10 Mbit/s, not the 20 two separate links would carry.
func TestMediumSharesCapacity(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces")
	}
	s, err := scenario.Parse("m.toml", []byte(`
[[media]]
name = "air"
rate = "10Mbit"
[[links]]
name = "primary"
medium = "air"
[[links]]
name = "secondary"
medium = "air"
`))
	if err != nil {
		t.Fatal(err)
	}
	tb, err := Build(s.Topology, Options{Prefix: testPrefix, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	// A cut and a restore give the links back their place on the medium, not
	// a line of their own.
	for _, p := range []string{"primary", "secondary"} {
		if err := tb.Cut(p); err != nil {
			t.Fatal(err)
		}
		if err := tb.Restore(p); err != nil {
			t.Fatal(err)
		}
	}
	var ln net.Listener
	if err := tb.Web().Do(func() (err error) {
		ln, err = net.Listen("tcp4", "0.0.0.0:9001")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const dur = 3 * time.Second
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				c.SetWriteDeadline(time.Now().Add(dur))
				buf := make([]byte, 64<<10)
				for {
					if _, err := c.Write(buf); err != nil {
						break
					}
				}
				c.Close()
			}()
		}
	}()
	// Count what arrives between 0.5 s (slow start over) and dur.
	counts := make([]atomic.Int64, len(tb.Plan.Paths))
	for i, p := range tb.Plan.Paths {
		var c net.Conn
		if err := tb.Client().Do(func() (err error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: p.ClientAddr.AsSlice()}, Timeout: 5 * time.Second}
			c, err = d.DialContext(context.Background(), "tcp4", tb.Plan.WebAddr.String()+":9001")
			return err
		}); err != nil {
			t.Fatalf("path %s: %v", p.Name, err)
		}
		defer c.Close()
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				counts[i].Add(int64(n))
				if err != nil {
					return
				}
			}
		}()
	}
	sum := func() (total int64, each []int64) {
		for i := range counts {
			each = append(each, counts[i].Load())
			total += each[i]
		}
		return
	}
	time.Sleep(500 * time.Millisecond)
	start, each0 := sum()
	time.Sleep(dur - 500*time.Millisecond)
	end, each1 := sum()
	for i := range each0 {
		if each1[i] == each0[i] {
			t.Errorf("path %s carried nothing", tb.Plan.Paths[i].Name)
		}
	}
	mbps := float64(end-start) * 8 / (dur - 500*time.Millisecond).Seconds() / 1e6
	t.Logf("both paths together: %.2f Mbit/s over a 10 Mbit/s medium", mbps)
	// TCP payload is ~95% of the frames on the medium.
	if mbps > 10.2 || mbps < 7 {
		t.Errorf("together %.2f Mbit/s, want the medium's 10 (7..10.2), not two links' 20", mbps)
	}
	if st := tb.Plan.emulated("primary").AtoB.Medium.Stats(); st.Frames == 0 {
		t.Errorf("medium saw no frames: %+v", st)
	}
}
