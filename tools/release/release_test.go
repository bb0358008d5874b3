package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/braid-vpn/braid/internal/targets"
)

// TestReleaseReproducible builds the amd64 artifacts twice from this tree:
// every file must be byte-identical, SHA256SUMS must match the files, and
// the packages must hold what docs/install.md promises.
func TestReleaseReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds braid and braid-lab twice")
	}
	src, err := ReadSource("../..", "1.2.3")
	if err != nil {
		t.Skip(err)
	}
	src.Root, _ = filepath.Abs(src.Root)
	ts, _ := pickTargets("amd64")
	a, b := t.TempDir(), t.TempDir()
	arts, err := Build(src, ts, a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Build(src, ts, b); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"_linux_amd64", "_amd64.deb", ".x86_64.rpm", "_x86_64.ipk", "braid-lab_1.2.3_linux_amd64.tar.gz", "SHA256SUMS"} {
		if !hasSuffix(arts, suffix) {
			t.Errorf("no artifact ending in %s among %v", suffix, arts)
		}
	}
	for _, name := range arts {
		x, err1 := os.ReadFile(filepath.Join(a, name))
		y, err2 := os.ReadFile(filepath.Join(b, name))
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			t.Errorf("%s differs between two builds (%v, %v)", name, err1, err2)
		}
	}
	sums, err := os.ReadFile(filepath.Join(a, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(sums)), "\n")
	if len(lines) != len(arts)-1 {
		t.Errorf("SHA256SUMS has %d lines for %d artifacts", len(lines), len(arts)-1)
	}
	for _, l := range lines {
		sum, name, _ := strings.Cut(l, "  ")
		data, err := os.ReadFile(filepath.Join(a, name))
		h := sha256.Sum256(data)
		if err != nil || hex.EncodeToString(h[:]) != sum {
			t.Errorf("SHA256SUMS: %s does not match", name)
		}
	}

	dpkg, err := exec.LookPath("dpkg-deb")
	if err != nil {
		t.Skip("dpkg-deb not installed: not listing the .deb")
	}
	deb := filepath.Join(a, find(arts, "_amd64.deb"))
	out, err := exec.Command(dpkg, "-c", deb).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"-rwxr-xr-x root/root", "./usr/bin/braid\n",
		"drwx------ root/root         0", "./etc/braid/\n",
		"./usr/lib/systemd/system/braid@.service\n", "./usr/lib/systemd/system/braid-balance.service\n",
		"./usr/share/man/man1/braid.1.gz\n", "./usr/share/man/man1/braid-up.1.gz\n",
		"./usr/share/bash-completion/completions/braid\n", "./usr/share/zsh/vendor-completions/_braid\n",
		"./usr/share/fish/vendor_completions.d/braid.fish\n",
		"./usr/share/doc/braid/THIRD_PARTY_NOTICES\n", "./usr/share/doc/braid/examples/server.toml\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the .deb lacks %q:\n%s", want, out)
		}
	}
	info, err := exec.Command(dpkg, "-f", deb, "Version", "Architecture").Output()
	if err != nil || string(info) != "Version: 1.2.3\nArchitecture: amd64\n" {
		t.Errorf("deb control: %q (%v)", info, err)
	}
}

// The unit in the packages runs /usr/bin/braid; the source names /usr/local/bin.
func TestStagedUnit(t *testing.T) {
	src := Source{Root: "../..", Version: "1.2.3"}
	s, err := stageShared(src, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"braid@.service":        "ExecStart=/usr/bin/braid up -c /etc/braid/%i.toml",
		"braid-balance.service": "ExecStart=/usr/bin/braid balance -c /etc/braid/balance.toml",
	}
	if len(s.units) != len(want) {
		t.Errorf("staged units: %v", s.units)
	}
	for _, u := range s.units {
		unit, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		if exec := want[filepath.Base(u)]; exec == "" || !strings.Contains(string(unit), exec) || strings.Contains(string(unit), "/usr/local/bin") {
			t.Errorf("staged unit %s:\n%s", filepath.Base(u), unit)
		}
	}
	if len(s.man) < 5 {
		t.Errorf("man pages: %v", s.man)
	}
	for _, f := range []string{s.bash, s.zsh, s.fish} {
		if b, err := os.ReadFile(f); err != nil || !bytes.Contains(b, []byte("__complete")) {
			t.Errorf("%s: not a cobra completion script (%v)", f, err)
		}
	}
}

func TestPickTargets(t *testing.T) {
	if ts, err := pickTargets(""); err != nil || len(ts) != len(targets.All) {
		t.Errorf("all: %v %v", ts, err)
	}
	if ts, err := pickTargets("mips-softfloat,armv7"); err != nil || len(ts) != 2 || ts[0].GOMIPS != "softfloat" || ts[1].GOARM != "7" {
		t.Errorf("two: %v %v", ts, err)
	}
	if _, err := pickTargets("sparc"); err == nil || !strings.Contains(err.Error(), "unknown target \"sparc\"") {
		t.Errorf("unknown: %v", err)
	}
}

func hasSuffix(names []string, suffix string) bool { return find(names, suffix) != "" }

func find(names []string, suffix string) string {
	for _, n := range names {
		if strings.HasSuffix(n, suffix) {
			return n
		}
	}
	return ""
}
