package tunnel

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/budget"
	"github.com/braid-vpn/braid/internal/logbuf"
	"github.com/braid-vpn/braid/tundev/tuntest"
)

// meteredClient makes (without starting it) a client like the rig's client A
// whose second path has a 200 kB/month allowance and whose usage is kept in
// state; what it logs goes to the returned buffer.
func meteredClient(t *testing.T, r *rig, state string) (*Engine, *logbuf.Buffer) {
	t.Helper()
	var logs logbuf.Buffer
	cfg := r.cfgA
	cfg.TUN = tuntest.New(1380)
	cfg.BudgetState = state
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	cfg.LocalPaths = []LocalPath{{Addr: cliAddr1}, {Addr: cliAddr2, Budget: budget.Limit{Bytes: 200_000, Period: budget.Month}}}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e, &logs
}

// overBudget reports whether the client has its metered path over its allowance.
func overBudget(e *Engine) bool {
	for _, pa := range e.Status().Peers[0].Paths {
		if pa.Budget != "" && pa.Priority == overBudgetTier {
			return true
		}
	}
	return false
}

// The budget state is never written or read through a symbolic link: not through
// one planted at the temporary file's name (it was fixed, ".usage.json.tmp", and
// braid, as root, wrote wherever such a link pointed), nor through one at the
// state file itself.
func TestBudgetStateNoSymlinks(t *testing.T) {
	r := newRig(t, rigOpts{})
	r.cliA.Close()
	dir := t.TempDir()
	state := filepath.Join(dir, "usage.json")
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("precious"), 0o600)
	if err := os.Symlink(victim, filepath.Join(dir, ".usage.json.tmp")); err != nil {
		t.Fatal(err)
	}
	e, _ := meteredClient(t, r, state)
	e.Close()
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Fatalf("the file a planted link points to now holds %q", b)
	}
	fi, err := os.Lstat(state)
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("state file not written as a regular file: %v, %v", fi, err)
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, ".usage.json.*.tmp")); len(tmps) != 0 {
		t.Fatalf("temporary files left behind: %v", tmps)
	}

	// The state file itself a link, to a file whose usage would put the path
	// over its allowance: neither read nor written through.
	os.Remove(state)
	over, _ := json.Marshal(map[string]budget.Usage{cliAddr2.String(): {Used: 1 << 30, Since: budget.Month.Start(time.Now())}})
	target := filepath.Join(dir, "elsewhere.json")
	os.WriteFile(target, over, 0o600)
	if err := os.Symlink(target, state); err != nil {
		t.Fatal(err)
	}
	e, logs := meteredClient(t, r, state)
	if overBudget(e) {
		t.Fatal("usage was read through a symbolic link")
	}
	e.Close()
	if b, _ := os.ReadFile(target); !bytes.Equal(b, over) {
		t.Fatalf("written through a symbolic link: %q", b)
	}
	if fi, err := os.Lstat(state); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the symbolic link was replaced")
	}
	if !strings.Contains(logs.String(), "symbolic link") {
		t.Fatalf("nothing logged about the link:\n%s", logs)
	}
}

// A state file that does not parse is reported and kept aside as .corrupt, not
// silently overwritten with usage counted from zero.
func TestBudgetStateCorruptKeptAside(t *testing.T) {
	r := newRig(t, rigOpts{})
	r.cliA.Close()
	state := filepath.Join(t.TempDir(), "usage.json")
	garbage := []byte(`{"198.18.2.1": {"used": 1`)
	os.WriteFile(state, garbage, 0o600)
	e, logs := meteredClient(t, r, state)
	e.Close()
	if b, err := os.ReadFile(state + ".corrupt"); err != nil || !bytes.Equal(b, garbage) {
		t.Fatalf("corrupt state not kept aside: %q, %v", b, err)
	}
	if !strings.Contains(logs.String(), "corrupt") {
		t.Fatalf("nothing logged about the corrupt file:\n%s", logs)
	}
	var u map[string]budget.Usage
	if b, _ := os.ReadFile(state); json.Unmarshal(b, &u) != nil {
		t.Fatalf("no valid state written after: %q", b)
	}
}

// Usage saved with a Since in the future (a clock that ran ahead) no longer pins
// the path to backup-only for good: it counts against the current period, and
// a warning says so.
func TestBudgetStateFutureSince(t *testing.T) {
	r := newRig(t, rigOpts{})
	r.cliA.Close()
	state := filepath.Join(t.TempDir(), "usage.json")
	future := budget.Month.Start(time.Now().AddDate(5, 0, 0))
	b, _ := json.Marshal(map[string]budget.Usage{cliAddr2.String(): {Used: 1000, Since: future}})
	os.WriteFile(state, b, 0o600)
	e, logs := meteredClient(t, r, state)
	defer e.Close()
	m := e.server.meters[cliAddr2.String()]
	if m == nil {
		t.Fatal("no meter for the metered path")
	}
	if m.Since.After(time.Now()) || m.Used != 1000 {
		t.Fatalf("restored meter since %v, used %d; want the current period, 1000", m.Since, m.Used)
	}
	if !strings.Contains(logs.String(), "future") {
		t.Fatalf("nothing logged about the future date:\n%s", logs)
	}
}
