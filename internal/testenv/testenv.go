// Package testenv tells tests what they run on, so that a test that cannot work
// there skips and says why, rather than failing for a reason that is not braid's.
//
// Today it knows one thing: whether the test binary runs under qemu user-mode
// emulation (scripts/crosstest.sh runs the daemon's tests for arm64 and big-endian
// mips that way). The script says so in an environment variable rather than the
// tests guessing from the machine, so that a native run never skips by mistake.
package testenv

import (
	"os"
	"testing"
)

// EmulatedVar is the environment variable that marks an emulated run: any value
// but "" and "0".
const EmulatedVar = "BRAID_EMULATED"

// Emulated reports whether the tests run under user-mode emulation.
func Emulated() bool {
	v := os.Getenv(EmulatedVar)
	return v != "" && v != "0"
}

// SkipIfEmulated skips t under emulation; why says what the emulator lacks.
func SkipIfEmulated(t testing.TB, why string) {
	t.Helper()
	if Emulated() {
		t.Skipf("under qemu user-mode emulation (%s is set): %s", EmulatedVar, why)
	}
}

// NoNetns is why no test that builds network namespaces runs under emulation:
// qemu-user refuses netlink sockets other than NETLINK_ROUTE, and the netns
// package's netlink handle opens XFRM and netfilter ones too (MPTCP's path
// manager and ethtool are generic netlink), so netns.New fails.
const NoNetns = "qemu-user refuses the netlink families (XFRM, netfilter, generic) that building a test network namespace needs"
