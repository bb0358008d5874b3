package netwatch

import (
	"context"
	"net/netip"
	"os"
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
		events, err = Watch(ctx)
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
