package upcmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/keys"
)

// TestStartLoggerLogsWarnings: the config's warnings (here a world-readable
// key file and a metrics endpoint on every interface) reach the log at start,
// one WARN line each.
func TestStartLoggerLogsWarnings(t *testing.T) {
	dir := t.TempDir()
	k, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "client.key")
	if err := os.WriteFile(key, []byte(k.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	doc := `role = "client"
private_key_file = "client.key"
log_level = "warn"
[tun]
address = ["100.64.0.2/24"]
[client]
server_public_key = "9yIxvnVAdtAILItyxaJ0S+mbVqtzLjwV9xTQl3xLbVI="
servers = ["198.18.1.2:7000"]
[control]
metrics = "0.0.0.0:9273"
`
	file := filepath.Join(dir, "client.toml")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 2 {
		t.Fatalf("Warnings = %q, want 2", cfg.Warnings)
	}
	var out bytes.Buffer
	startLogger(cfg, &out)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("log:\n%s\nwant 2 lines", out.String())
	}
	for i, l := range lines {
		if !strings.Contains(l, "level=WARN") {
			t.Errorf("line %d not at WARN: %s", i, l)
		}
	}
	for _, want := range []string{key + " is accessible to its group and all users (mode 0644)", "chmod 600 " + key, `control.metrics: \"0.0.0.0:9273\" listens on all interfaces`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, out.String())
		}
	}
}
