// Package dist holds what braid installs besides its binary (the systemd unit).
package dist

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The unit passes systemd-analyze verify (with the binary path pointing at a file
// that exists here) when systemd is present.
func TestSystemdUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed: cannot verify the unit")
	}
	unit, err := os.ReadFile("systemd/braid@.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Type=notify", "ExecReload=", "CapabilityBoundingSet=CAP_NET_ADMIN CAP_NET_RAW", "ProtectSystem=strict", "PrivateTmp=yes"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("unit lacks %q", want)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	fixed := strings.ReplaceAll(string(unit), "/usr/local/bin/braid", self)
	path := filepath.Join(t.TempDir(), "braid@test.service")
	if err := os.WriteFile(path, []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
