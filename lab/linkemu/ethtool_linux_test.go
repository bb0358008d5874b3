//go:build linux

package linkemu

import (
	"slices"
	"strings"
	"testing"

	"github.com/safchain/ethtool"

	"github.com/braid-vpn/braid/netns"
)

// TestPickOffloads checks the choice against the states `ethtool -k` would
// print, one case per line.
func TestPickOffloads(t *testing.T) {
	avail := func(active, requested bool) ethtool.FeatureState {
		return ethtool.FeatureState{Available: true, Active: active, Requested: requested}
	}
	features := map[string]ethtool.FeatureState{
		"tx-tcp-segmentation":     avail(true, true),  // on
		"tx-generic-segmentation": avail(true, true),  // on (printed as generic-segmentation-offload)
		"rx-gro":                  avail(false, true), // off [requested on]
		"rx-lro":                  avail(false, false),
		"tx-checksum-ip-generic":  {Active: true, Requested: true}, // on [fixed]: not available
		"tx-udp-segmentation":     {Available: true, Active: true, NeverChanged: true},
		"rx-udp-gro-forwarding":   avail(true, true),
		"tx-gso-list":             avail(true, true),
		"tx-scatter-gather":       avail(true, true),
		"highdma":                 avail(true, true), // not an offload of frames
		"rx-checksum":             avail(true, true), // receive checksums leave frames whole
		"tx-nocache-copy":         avail(true, true),
	}
	on, change := pickOffloads(features)
	wantOn := []string{"rx-udp-gro-forwarding", "tx-checksum-ip-generic", "tx-generic-segmentation",
		"tx-gso-list", "tx-scatter-gather", "tx-tcp-segmentation", "tx-udp-segmentation"}
	wantChange := []string{"rx-gro", "rx-udp-gro-forwarding", "tx-generic-segmentation",
		"tx-gso-list", "tx-scatter-gather", "tx-tcp-segmentation"}
	if !slices.Equal(on, wantOn) {
		t.Errorf("on = %v, want %v", on, wantOn)
	}
	if !slices.Equal(change, wantChange) {
		t.Errorf("change = %v, want %v", change, wantChange)
	}
}

// kernelFeatures reads ifname's features in ns through the library alone,
// not through the code under test.
func kernelFeatures(t *testing.T, ns *netns.Namespace, ifname string) map[string]bool {
	t.Helper()
	var f map[string]bool
	err := ns.Do(func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer e.Close()
		f, err = e.Features(ifname)
		return err
	})
	if err != nil {
		t.Fatalf("reading the features of %s: %v", ifname, err)
	}
	return f
}

// vethOffloads are offloads a fresh veth has on that make AF_PACKET see
// super-frames or unfinished checksums, by their kernel names; the first
// two are the ones `ethtool -k` prints under a legacy name.
var vethOffloads = []string{"tx-generic-segmentation", "tx-tcp-segmentation", "tx-tcp6-segmentation",
	"tx-udp-segmentation", "tx-checksum-ip-generic", "tx-scatter-gather"}

// TestOffloadsKernel switches a veth's offloads off and reads them back
// through the library, in the namespace the veth lives in (a veth of the
// same name outside would not count: there is none).
func TestOffloadsKernel(t *testing.T) {
	needRoot(t)
	ns := newNS(t)
	must(t, netns.AddVeth(netns.VethEnd{NS: ns, Name: "x"}, netns.VethEnd{NS: ns, Name: "y"}))
	before := kernelFeatures(t, ns, "x")
	for _, f := range vethOffloads {
		if !before[f] {
			t.Fatalf("%s is off on a fresh veth: the test cannot see it switched off (features: %v)", f, before)
		}
	}
	must(t, DisableOffloads(ns, "x"))
	after := kernelFeatures(t, ns, "x")
	for _, f := range append(vethOffloads, "rx-gro", "rx-lro", "tx-gso-list") {
		if after[f] {
			t.Errorf("%s still on after DisableOffloads", f)
		}
	}
	// The peer is untouched: only the named interface changes.
	if peer := kernelFeatures(t, ns, "y"); !peer["tx-tcp-segmentation"] {
		t.Error("DisableOffloads on x switched y's segmentation off too")
	}
}

// TestOffloadsFixed: the loopback keeps checksum and scatter-gather offloads
// on [fixed]; DisableOffloads switches what it can and names what stays on.
func TestOffloadsFixed(t *testing.T) {
	needRoot(t)
	ns := newNS(t)
	err := DisableOffloads(ns, "lo")
	if err == nil {
		t.Fatal("DisableOffloads on lo succeeded: its fixed offloads went unnoticed")
	}
	if msg := err.Error(); !strings.Contains(msg, "still on") || !strings.Contains(msg, "tx-checksum-ip-generic") {
		t.Errorf("error %q does not name the fixed offload tx-checksum-ip-generic", msg)
	}
	t.Log(err)
	if f := kernelFeatures(t, ns, "lo"); f["tx-tcp-segmentation"] {
		t.Error("tx-tcp-segmentation (changeable) still on on lo: the fixed ones stopped the rest")
	}
	if _, err := ActiveOffloads(ns, "nonexistent0"); err == nil {
		t.Error("ActiveOffloads of a missing interface succeeded")
	}
}
