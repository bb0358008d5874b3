package budget

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "usage.json")
	if u, err := Load(file); u != nil || err != nil {
		t.Fatalf("missing file: %v, %v; want nil, nil", u, err)
	}
	since := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	want := map[string]Usage{"eth1": {Used: 12345, Since: since}}
	for range 2 { // the second replaces the first
		if err := Save(file, want); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Load(file)
	if err != nil || len(got) != 1 || got["eth1"].Used != 12345 || !got["eth1"].Since.Equal(since) {
		t.Fatalf("Load = %v, %v", got, err)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestSymlinksRefused(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte(`{"eth1":{"used":1}}`), 0o600)
	file := filepath.Join(dir, "usage.json")
	os.Symlink(target, file)
	if u, err := Load(file); err == nil {
		t.Fatalf("read through a link: %v", u)
	}
	if err := Save(file, map[string]Usage{"eth1": {Used: 2}}); err == nil {
		t.Fatal("saved over a link")
	}
	if b, _ := os.ReadFile(target); string(b) != `{"eth1":{"used":1}}` {
		t.Fatalf("target changed: %q", b)
	}
}

func TestCorruptKeptAside(t *testing.T) {
	file := filepath.Join(t.TempDir(), "usage.json")
	os.WriteFile(file, []byte("not json"), 0o600)
	u, err := Load(file)
	if !errors.Is(err, ErrCorrupt) || u != nil {
		t.Fatalf("Load = %v, %v; want ErrCorrupt", u, err)
	}
	if b, _ := os.ReadFile(file + ".corrupt"); string(b) != "not json" {
		t.Fatalf(".corrupt holds %q", b)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatal("corrupt file still in place")
	}
}

// A Since after now would never be passed by the current period: the meter
// would stay over its allowance for good. Restore counts the bytes against the
// current period instead, so the next period starts afresh.
func TestRestoreFutureSince(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	m := Meter{Limit: Limit{1000, Month}}
	if !m.Restore(Usage{Used: 5000, Since: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}, now) {
		t.Fatal("a future Since was not reported")
	}
	if !m.Exceeded(now) {
		t.Fatal("the saved bytes no longer count in the current period")
	}
	if next := time.Date(2027, 1, 1, 0, 0, 1, 0, time.UTC); m.Exceeded(next) {
		t.Fatal("still over the allowance in the next period")
	}
	var ok Meter
	ok.Limit = Limit{1000, Month}
	if ok.Restore(Usage{Used: 10, Since: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}, now) || ok.Used != 10 {
		t.Fatal("a valid Since was changed")
	}
}
