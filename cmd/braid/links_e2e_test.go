package main

import (
	"sync"
	"testing"
	"time"

	"github.com/braid-vpn/braid/httpbench"
	"github.com/braid-vpn/braid/netns"
	"github.com/vishvananda/netlink"
)

// usableOn counts the usable paths of d over device dev.
func usableOn(t *testing.T, d *daemon, dev string) int {
	n := 0
	for _, p := range d.status(t).Peers {
		for _, pa := range p.Paths {
			if pa.Device == dev && (pa.State == "active" || pa.State == "degraded") {
				n++
			}
		}
	}
	return n
}

// The client's second interface does not exist when braid starts: the client
// starts anyway with that path waiting, and uses it within a second of the
// interface appearing with its address. Then, mid-download, the interface goes
// down: traffic moves to the other path at once, without a long stall.
func TestE2EInterfaceComesAndGoes(t *testing.T) {
	r := newE2ERigWith(t, true, func(r *e2eRig) {
		if err := r.cli.Netlink().LinkDel(mustLink(t, r.cli, "c2")); err != nil {
			t.Fatal(err)
		}
		r.pathsA = 1
	})
	time.Sleep(time.Second)
	if err := netns.AddVeth(netns.VethEnd{NS: r.cli, Name: "c2", Addrs: pfx("198.18.2.1/24")}, netns.VethEnd{NS: r.srv, Name: "s2", Addrs: pfx("198.18.2.2/24")}); err != nil {
		t.Fatal(err)
	}
	shape := netns.TBF{Rate: 10_000_000}
	if err := r.cli.Shape("c2", shape); err != nil {
		t.Fatal(err)
	}
	if err := r.srv.Shape("s2", shape); err != nil {
		t.Fatal(err)
	}
	appeared := time.Now()
	for usableOn(t, r.dCli, "c2") == 0 {
		if time.Since(appeared) > 3*time.Second {
			logPaths(t, "client", r.dCli.status(t))
			t.Fatal("the new interface's path is not in use 3 s after it appeared")
		}
		time.Sleep(20 * time.Millisecond)
	}
	used := time.Since(appeared)
	r.dSrv.waitPaths(t, "a", 2)

	var once sync.Once
	var downAt time.Time
	res := r.fetch(t, "100.64.0.1:8080", 16*httpbench.MB, func(total int64) {
		if total >= 4*httpbench.MB {
			once.Do(func() {
				downAt = time.Now()
				if err := r.cli.SetDown("c2"); err != nil {
					t.Error(err)
				}
			})
		}
	})
	t.Logf("new interface in use %v after it appeared; download with it going down mid-way: %.2f Mbit/s, longest stall %v",
		used.Round(10*time.Millisecond), res.GoodputMbps(), res.MaxStall)
	if used > time.Second {
		t.Errorf("the new interface's path in use only %v after it appeared", used)
	}
	if downAt.IsZero() {
		t.Fatal("the interface never went down")
	}
	if res.MaxStall >= 500*time.Millisecond {
		t.Errorf("longest stall %v after the interface went down", res.MaxStall)
	}
}

func mustLink(t *testing.T, ns *netns.Namespace, name string) netlink.Link {
	t.Helper()
	l, err := ns.Netlink().LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
