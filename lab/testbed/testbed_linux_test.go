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
// every emulated link, and Close leaves no namespace behind.
func TestBuildRoutesEachPath(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2 (ip)")
	}
	tb, err := Build(scenario.DefaultTopology(), Options{Prefix: testPrefix, Seed: 1})
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
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	for _, p := range tb.Plan.Paths {
		emu := tb.Emulator(p.Name)
		before := emu.Stats(linkemu.AtoB).BytesForwarded
		var c net.Conn
		err := tb.Client().Do(func() (err error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: p.ClientAddr.AsSlice()}, Timeout: 5 * time.Second}
			c, err = d.DialContext(context.Background(), "tcp4", tb.Plan.WebAddr.String()+":9000")
			return err
		})
		if err != nil {
			t.Fatalf("path %s: dial web: %v", p.Name, err)
		}
		c.Write(make([]byte, 100_000))
		c.Close()
		time.Sleep(200 * time.Millisecond)
		if got := emu.Stats(linkemu.AtoB).BytesForwarded - before; got < 100_000 {
			t.Errorf("path %s: its emulator forwarded %d bytes upstream, want ≥ 100000", p.Name, got)
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
