package cc_test

import (
	"slices"
	"testing"

	"github.com/braid-vpn/braid/cc"
	"github.com/braid-vpn/braid/config"
)

// The config file validates congestion names against its own list (so that it
// links without the data path); it must be exactly the set this package runs.
func TestConfigListsEveryAlgorithm(t *testing.T) {
	if !slices.Equal(cc.Names(), config.Congestions) {
		t.Errorf("cc.Names() = %v, config.Congestions = %v", cc.Names(), config.Congestions)
	}
	if config.DefaultCongestion != cc.None {
		t.Errorf("default congestion %q, want %q (no behaviour change unless asked)", config.DefaultCongestion, cc.None)
	}
}
