package testbed

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
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
