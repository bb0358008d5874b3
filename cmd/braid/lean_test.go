package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestLeanDeps: the VPN binary links neither gonum (plotting, statistics) nor
// the lab; those are in cmd/braid-lab, which `braid lab` runs.
func TestLeanDeps(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go tool in PATH to list the package's dependencies")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "gonum.org/") || dep == "github.com/braid-vpn/braid/lab" || strings.HasPrefix(dep, "github.com/braid-vpn/braid/lab/") {
			t.Errorf("cmd/braid depends on %s; lab and plotting code belongs in cmd/braid-lab", dep)
		}
	}
}

// TestLeanSize: the VPN binary, stripped, stays within 16 MB (15.5 MB with
// net/http for the metrics endpoint and the console, and google/nftables for
// `braid balance`, which adds 1.06 MB; no plotting, no statistics, no
// Prometheus client: those stay in braid-lab).
func TestLeanSize(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go tool in PATH to build the binary")
	}
	bin := t.TempDir() + "/braid"
	if out, err := exec.Command(goTool, "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("braid stripped: %.2f MB", float64(fi.Size())/1e6)
	if fi.Size() > 16e6 {
		t.Errorf("braid is %.2f MB stripped, more than 16 MB", float64(fi.Size())/1e6)
	}
}

// TestLabForwarding: `braid lab …` and `braid routes …` run braid-lab (here a
// stand-in script in PATH) with the same arguments and return its exit code;
// without braid-lab they fail with one line saying how to build it.
func TestLabForwarding(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\necho \"$@\"\nexit 3\n"
	if err := writeExecutable(dir+"/braid-lab", script); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	for _, args := range [][]string{{"lab", "demo", "--json"}, {"routes", "stats"}} {
		code, out, stderr := braid(t, "", args...)
		if code != 3 || out != strings.Join(args, " ")+"\n" || stderr != "" {
			t.Errorf("braid %v: exit %d, stdout %q, stderr %q", args, code, out, stderr)
		}
	}

	t.Setenv("PATH", t.TempDir())
	code, out, stderr := braid(t, "", "lab", "demo")
	checkOneLineError(t, code, out, stderr)
	if !strings.Contains(stderr, "go build -o braid-lab ./cmd/braid-lab") {
		t.Errorf("stderr = %q, want how to build braid-lab", stderr)
	}
}

func writeExecutable(path, content string) error {
	return os.WriteFile(path, []byte(content), 0o755)
}
