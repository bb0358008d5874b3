package bench

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeTool writes an executable script name in dir that prints version.
func fakeTool(t *testing.T, dir, name, version string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho '"+version+"'\necho 'second line'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFindWireGuardGo(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("needs /bin/sh for the stand-in programs")
	}
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	if _, err := FindWireGuardGo(""); !errors.Is(err, ErrToolMissing) {
		t.Errorf("empty PATH: %v, want ErrToolMissing", err)
	}
	// `go install golang.zx2c4.com/wireguard@…` names it "wireguard".
	p := fakeTool(t, dir, "wireguard", "wireguard-go v0.0.20250522")
	got, err := FindWireGuardGo("")
	if err != nil || got.Path != p || got.Version != "wireguard-go v0.0.20250522" {
		t.Errorf("go install's name: %+v, %v", got, err)
	}
	// "wireguard-go" wins over "wireguard".
	p2 := fakeTool(t, dir, "wireguard-go", "wireguard-go v1.2.3")
	if got, err := FindWireGuardGo(""); err != nil || got.Path != p2 {
		t.Errorf("both names: %+v, %v", got, err)
	}
	// A "wireguard" that is something else is not taken for wireguard-go.
	os.Remove(p2)
	fakeTool(t, dir, "wireguard", "some other wireguard 1.0")
	if _, err := FindWireGuardGo(""); !errors.Is(err, ErrToolMissing) || !strings.Contains(err.Error(), "is not wireguard-go") {
		t.Errorf("impostor: %v", err)
	}
	// An explicit path must be wireguard-go; a missing one is an error,
	// not a case to skip quietly.
	other := fakeTool(t, t.TempDir(), "wg-go", "wireguard-go v9")
	if got, err := FindWireGuardGo(other); err != nil || got.Version != "wireguard-go v9" {
		t.Errorf("explicit: %+v, %v", got, err)
	}
	if _, err := FindWireGuardGo(filepath.Join(dir, "nope")); err == nil || errors.Is(err, ErrToolMissing) {
		t.Errorf("explicit missing path: %v", err)
	}
}

func TestFindWg(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("needs /bin/sh for the stand-in programs")
	}
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	if _, err := FindWg(); !errors.Is(err, ErrToolMissing) {
		t.Errorf("empty PATH: %v", err)
	}
	p := fakeTool(t, dir, "wg", "wireguard-tools v1.0.20210914 - https://git.zx2c4.com/wireguard-tools/")
	if got, err := FindWg(); err != nil || got.Path != p || !strings.HasPrefix(got.Version, "wireguard-tools v1.0.20210914") {
		t.Errorf("%+v, %v", got, err)
	}
	fakeTool(t, dir, "wg", "wg 0.1 (something else)")
	if _, err := FindWg(); err == nil {
		t.Error("an unrelated wg accepted")
	}
}

func TestHints(t *testing.T) {
	for _, h := range []string{WireGuardGoHint(), WgHint()} {
		if strings.Contains(h, "\n") {
			t.Errorf("hint is not one line: %q", h)
		}
	}
	v := WireGuardVersion()
	if v == "" {
		v = "latest"
	}
	if h := WireGuardGoHint(); !strings.Contains(h, "go install golang.zx2c4.com/wireguard@"+v) || !strings.Contains(h, "--wireguard-go") {
		t.Errorf("wireguard-go hint %q", h)
	}
	if h := WgHint(); !strings.Contains(h, "apt-get install --no-install-recommends wireguard-tools") {
		t.Errorf("wg hint %q", h)
	}
}

func TestWireGuardNamesAndArgs(t *testing.T) {
	c, s := WireGuardNames(12345)
	if c != "bwgc12345" || s != "bwgs12345" {
		t.Errorf("names %q %q", c, s)
	}
	// The largest PID Linux hands out (pid_max ≤ 2^22) still fits IFNAMSIZ-1.
	if c, _ := WireGuardNames(4194304); len(c) > 15 {
		t.Errorf("%q is longer than 15 bytes", c)
	}
	cli, srv := WgSetArgs("bwgc1", "bwgs1", "/d/c.key", "/d/s.key", "CPUB", "SPUB", netip.AddrPortFrom(benchPaths[0].ServerAddr, WireGuardPort))
	wantCli := []string{"set", "bwgc1", "private-key", "/d/c.key", "peer", "SPUB", "endpoint", "198.18.1.2:51820", "allowed-ips", "100.64.1.1/32"}
	wantSrv := []string{"set", "bwgs1", "private-key", "/d/s.key", "listen-port", "51820", "peer", "CPUB", "allowed-ips", "100.64.1.2/32"}
	if !slices.Equal(cli, wantCli) {
		t.Errorf("client\n got %q\nwant %q", cli, wantCli)
	}
	if !slices.Equal(srv, wantSrv) {
		t.Errorf("server\n got %q\nwant %q", srv, wantSrv)
	}
}
