package cc_test

import (
	"slices"
	"testing"

	"github.com/braid-vpn/braid/cc"
	"github.com/braid-vpn/braid/config"
)

func TestNames(t *testing.T) {
	want := []string{"none", "reno", "cubic", "lia", "olia", "balia", "wvegas", "coupled", "ewtcp", "rate"}
	if !slices.Equal(cc.Names(), want) {
		t.Errorf("cc.Names() = %v, want %v", cc.Names(), want)
	}
}

// The config file validates congestion names against its own list (so that it
// links without the data path); it must be exactly the set this package runs.
// Its default is either one of them or "auto" (the config package resolves it).
func TestConfigListsEveryAlgorithm(t *testing.T) {
	if !slices.Equal(cc.Names(), config.Congestions) {
		t.Errorf("cc.Names() = %v, config.Congestions = %v", cc.Names(), config.Congestions)
	}
	if d := config.DefaultCongestion; d != "auto" && !slices.Contains(cc.Names(), d) {
		t.Errorf("default congestion %q is neither \"auto\" nor an algorithm", d)
	}
}
