package netwatch

import (
	"bytes"
	"context"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-vpn/braid/netns"
)

// A veth pair created in a namespace the test owns: its addresses coming and
// going are reported for the right interface.
func TestWatch(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace and a veth pair")
	}
	netns.Cleanup("braid-nw")
	ns, err := netns.New("braid-nw")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var events <-chan Event
	if err := ns.Do(func() (err error) {
		events, err = Watch(ctx, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
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

// lockedBuf collects log lines the watcher writes from its goroutine.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An event storm while nobody reads overflows the netlink socket's buffer: the
// kernel drops notifications and the next receive fails with ENOBUFS. The watch
// used to end there, silently (its channel closed); it must say so, subscribe
// again, report every interface's state, and go on reporting changes.
func TestWatchSurvivesOverflow(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace and a veth pair")
	}
	netns.Cleanup("braid-nwo")
	ns, err := netns.New("braid-nwo")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs lockedBuf
	var events <-chan Event
	if err := ns.Do(func() (err error) {
		events, err = Watch(ctx, slog.New(slog.NewTextHandler(&logs, nil)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
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
