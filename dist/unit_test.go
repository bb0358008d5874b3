// Package dist holds what braid installs besides its binary (the systemd unit).
package dist

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Each unit passes systemd-analyze verify (with the binary path pointing at a
// file that exists here) when systemd is present.
func TestSystemdUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed: cannot verify the units")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for name, wants := range map[string][]string{
		"braid@.service": {"Type=notify", "ExecReload=", "CapabilityBoundingSet=CAP_NET_ADMIN CAP_NET_RAW", "ProtectSystem=strict", "PrivateTmp=yes"},
		// The balancer: nftables, rules and routes, nothing more; it reads
		// ip_forward and changes no sysctl.
		"braid-balance.service": {"ExecStart=/usr/local/bin/braid balance -c ", "CapabilityBoundingSet=CAP_NET_ADMIN\n", "ProtectKernelTunables=yes", "ProtectSystem=strict"},
	} {
		unit, err := os.ReadFile(filepath.Join("systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range wants {
			if !strings.Contains(string(unit), want) {
				t.Errorf("%s lacks %q", name, want)
			}
		}
		fixed := strings.ReplaceAll(string(unit), "/usr/local/bin/braid", self)
		path := filepath.Join(t.TempDir(), strings.Replace(name, "@", "@test", 1))
		if err := os.WriteFile(path, []byte(fixed), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(analyze, "verify", path).CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", name, err, out)
		}
	}
}
