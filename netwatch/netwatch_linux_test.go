package netwatch

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/internal/logbuf"
	"github.com/braid-vpn/braid/internal/testenv"
	"github.com/braid-vpn/braid/netns"
)

// watchIn makes a network namespace named after prefix and watches it; both end
// with the test.
func watchIn(t *testing.T, prefix string, log *slog.Logger) (*netns.Namespace, <-chan Event) {
	t.Helper()
	testenv.SkipIfEmulated(t, testenv.NoNetns)
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace and a veth pair")
	}
	netns.Cleanup(prefix)
	ns, err := netns.New(prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var events <-chan Event
	if err := ns.Do(func() (err error) {
		events, err = Watch(ctx, log)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ns, events
}

// A veth pair created in a namespace the test owns: its addresses coming and
// going are reported for the right interface.
func TestWatch(t *testing.T) {
	ns, events := watchIn(t, "braid-nw", nil)
	if err := netns.AddVeth(netns.VethEnd{NS: ns, Name: "nw0", Addrs: []netip.Prefix{netip.MustParsePrefix("198.18.9.1/24")}},
		netns.VethEnd{NS: ns, Name: "nw1"}); err != nil {
		t.Fatal(err)
	}
	wait := func(dev string, up bool) {
		t.Helper()
		deadline := time.After(3 * time.Second)
		for {
			select {
			case ev := <-events:
				if ev.Device == dev && ev.Up == up {
					return
				}
			case <-deadline:
				t.Fatalf("no event %s up=%v", dev, up)
			}
		}
	}
	wait("nw0", true)
	if err := ns.DelAddr("nw0", netip.MustParsePrefix("198.18.9.1/24")); err != nil {
		t.Fatal(err)
	}
	wait("nw0", false)
	if err := ns.AddAddr("nw0", netip.MustParsePrefix("198.18.9.5/24")); err != nil {
		t.Fatal(err)
	}
	wait("nw0", true)
	if err := ns.SetDown("nw0"); err != nil {
		t.Fatal(err)
	}
	wait("nw0", false)
}

// An event storm while nobody reads overflows the netlink socket's buffer: the
// kernel drops notifications and the next receive fails with ENOBUFS. The watch
// used to end there, silently (its channel closed); it must say so, subscribe
// again, report every interface's state, and go on reporting changes.
func TestWatchSurvivesOverflow(t *testing.T) {
	var logs logbuf.Buffer
	ns, events := watchIn(t, "braid-nwo", slog.New(slog.NewTextHandler(&logs, nil)))
	if err := netns.AddVeth(netns.VethEnd{NS: ns, Name: "nw0", Addrs: []netip.Prefix{netip.MustParsePrefix("198.18.9.1/24")}},
		netns.VethEnd{NS: ns, Name: "nw1"}); err != nil {
		t.Fatal(err)
	}
	// The storm, read by nobody: thousands of link changes.
	h := ns.Netlink()
	l, err := h.LinkByName("nw1")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4000 {
		if err := h.LinkSetMTU(l, 1400+i%2); err != nil {
			t.Fatal(err)
		}
	}
	// Read everything that comes until the watcher says it lost events.
	deadline := time.After(10 * time.Second)
	for !strings.Contains(logs.String(), "overflowed") {
		select {
		case _, ok := <-events:
			if !ok {
				t.Fatal("the watch ended after the overflow")
			}
		case <-deadline:
			t.Fatalf("no overflow reported after the storm; log:\n%s", logs.String())
		}
	}
	// Still watching: a change after the storm is reported.
	if err := ns.DelAddr("nw0", netip.MustParsePrefix("198.18.9.1/24")); err != nil {
		t.Fatal(err)
	}
	deadline = time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the watch ended after the overflow")
			}
			if ev.Device == "nw0" && !ev.Up {
				return
			}
		case <-deadline:
			t.Fatalf("no event for nw0 after the storm; log:\n%s", logs.String())
		}
	}
}
