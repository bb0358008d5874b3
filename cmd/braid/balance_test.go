package main

import (
	"os"
	"path/filepath"
	"testing"
)

// `braid balance` refuses to run without a valid file, with one line naming
// the file, the key and the problem (these runs stop before touching the
// kernel: the package's namespace tests cover installing).
func TestBalanceCommandErrors(t *testing.T) {
	code, out, stderr := braid(t, "", "balance")
	checkOneLineError(t, code, out, stderr)
	if want := "braid: balance: -c FILE is required\n"; stderr != want {
		t.Errorf("stderr = %q, want %q", stderr, want)
	}
	bad := filepath.Join(t.TempDir(), "bal.toml")
	os.WriteFile(bad, []byte("vip = \"203.0.113.10\"\nport = 70000\nserver_id_bits = 4\n"), 0o600)
	code, out, stderr = braid(t, "", "balance", "-c", bad)
	checkOneLineError(t, code, out, stderr)
	if want := "braid: " + bad + ": port: 70000 out of range (1..65535)\n"; stderr != want {
		t.Errorf("stderr = %q, want %q", stderr, want)
	}
}
