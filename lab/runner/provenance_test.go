package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/braid-vpn/braid/lab/linkemu"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/lab/testbed"
)

// lossSequences is what the emulators of p's network do in repetition rep
// of a run with seed campaign: the first n loss decisions of every emulated
// link direction, from the seed the runner reseeds them with.
func lossSequences(t *testing.T, campaign uint64, p *scenario.Point, rep, n int) [][]bool {
	t.Helper()
	plan, err := testbed.NewPlan(p.Topology, testbed.RepSeed(campaign, p.Network, rep))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]bool
	for _, e := range plan.Emulated {
		out = append(out, linkemu.Drops(e.AtoB, linkemu.AtoB, n), linkemu.Drops(e.BtoA, linkemu.BtoA, n))
	}
	if len(out) == 0 {
		t.Fatal("no emulated link")
	}
	return out
}

func lost(seqs [][]bool) int {
	n := 0
	for _, s := range seqs {
		for _, d := range s {
			if d {
				n++
			}
		}
	}
	return n
}

// TestRepetitionLossSequence: the loss sequence of a repetition comes from
// (campaign seed, network, repetition) and not from the transport. The
// transports compared at one point meet the same sequence in repetition r
// (uniform and Gilbert-Elliott loss), repetitions and networks differ, and
// the same seed gives the same sequence again.
func TestRepetitionLossSequence(t *testing.T) {
	s, err := scenario.Parse("seeds.toml", []byte(`
[[transports]]
name = "direct"
[[transports]]
name = "mptcp-direct"
[[transports]]
name = "braid"
[sweep]
loss = ["random 5%", "gemodel 1% 75% 50% 0.5%"]
`))
	if err != nil {
		t.Fatal(err)
	}
	pts := s.Points()
	if len(pts) != 6 || pts[0].Network != pts[2].Network || pts[0].Network == pts[3].Network {
		t.Fatalf("unexpected points: %v", pts)
	}
	const seed, n = 12345, 4000
	for _, net := range [][]scenario.Point{pts[:3], pts[3:]} {
		for rep := 0; rep < 3; rep++ {
			ref := lossSequences(t, seed, &net[0], rep, n)
			if lost(ref) == 0 {
				t.Fatalf("%s rep %d: nothing lost", net[0].String(), rep)
			}
			for _, p := range net[1:] {
				if got := lossSequences(t, seed, &p, rep, n); !slices.EqualFunc(got, ref, slices.Equal) {
					t.Errorf("%s rep %d: %s meets another loss sequence than %s", p.String(), rep, p.Transport.Name, net[0].Transport.Name)
				}
			}
			if again := lossSequences(t, seed, &net[0], rep, n); !slices.EqualFunc(again, ref, slices.Equal) {
				t.Errorf("%s rep %d: the same seed gave another sequence", net[0].String(), rep)
			}
			if next := lossSequences(t, seed, &net[0], rep+1, n); slices.EqualFunc(next, ref, slices.Equal) {
				t.Errorf("%s: repetitions %d and %d meet the same sequence", net[0].String(), rep, rep+1)
			}
			if other := lossSequences(t, seed+1, &net[0], rep, n); slices.EqualFunc(other, ref, slices.Equal) {
				t.Errorf("%s rep %d: seeds %d and %d gave the same sequence", net[0].String(), rep, seed, seed+1)
			}
		}
	}
	// Networks differ (the GE network loses less: compare the first link's
	// uniform draws instead of counts).
	a := lossSequences(t, seed, &pts[0], 0, n)
	b := lossSequences(t, seed, &pts[3], 0, n)
	if slices.EqualFunc(a, b, slices.Equal) {
		t.Error("two networks meet the same sequence")
	}
	// The seeds of a network's repetitions are distinct, and distinct
	// from another network's.
	seen := map[uint64]string{}
	for net := 0; net < 50; net++ {
		for rep := 0; rep < 50; rep++ {
			k := testbed.RepSeed(seed, net, rep)
			if o, dup := seen[k]; dup {
				t.Fatalf("RepSeed(net %d, rep %d) = RepSeed(%s)", net, rep, o)
			}
			seen[k] = fmt.Sprintf("net %d, rep %d", net, rep)
		}
	}
}

func TestNewSeed(t *testing.T) {
	for i := 0; i < 1000; i++ {
		if s := NewSeed(); s == 0 || s >= 1<<32 {
			t.Fatalf("NewSeed() = %d", s)
		}
	}
}

func TestLoadavg(t *testing.T) {
	if v, err := readLoad(); err != nil || v < 0 {
		t.Errorf("readLoad = %v, %v", v, err)
	}
	if w := HighLoadWarning(0.9, 2); w != "" {
		t.Errorf("load 0.9 on 2 CPUs warned: %s", w)
	}
	if w := HighLoadWarning(1.1, 2); !strings.Contains(w, "BUSY") || !strings.Contains(w, "1.10 on 2 CPUs") {
		t.Errorf("load 1.1 on 2 CPUs: %q", w)
	}
	// The monitor keeps the highest sample: the start's or the last.
	saved := readLoad
	t.Cleanup(func() { readLoad = saved })
	for _, loads := range [][2]float64{{0.25, 3.5}, {3.5, 0.75}} {
		load := loads[0]
		readLoad = func() (float64, error) { return load, nil }
		start, finish := watchLoad(1 << 62) // no tick: only the final sample
		load = loads[1]
		if got := finish(); start != loads[0] || got != 3.5 {
			t.Errorf("loads %v: start %v, max %v, want max 3.5", loads, start, got)
		}
	}
}

func TestLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "braid-lab.lock")
	l, err := AcquireLock(path, "braid-lab lab run a.toml")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if lines := strings.Split(string(data), "\n"); lines[0] != fmt.Sprint(os.Getpid()) || lines[2] != "braid-lab lab run a.toml" {
		t.Errorf("lock file holds %q", data)
	}
	// A second run (another open file: flock sees it as another owner)
	// is refused with the owner's PID and command.
	_, err = AcquireLock(path, "braid-lab lab run b.toml")
	var busy *BusyError
	if !errors.As(err, &busy) || busy.PID != os.Getpid() || busy.Command != "braid-lab lab run a.toml" {
		t.Fatalf("second lock: %v", err)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "--force") || !strings.Contains(msg, path) {
		t.Errorf("error is not one line naming --force and the lock: %q", msg)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := AcquireLock(path, "braid-lab lab run b.toml")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l2.Release()

	// A stale lock: the PID of a process that is gone.
	dead := deadPID(t)
	os.WriteFile(path, []byte(fmt.Sprintf("%d\n2026-01-01T00:00:00Z\nbraid-lab lab run old.toml\n", dead)), 0o644)
	l3, err := AcquireLock(path, "braid-lab lab run c.toml")
	if err != nil {
		t.Fatalf("stale lock of pid %d not taken over: %v", dead, err)
	}
	l3.Release()
	// A PID that is alive but runs another program (reused after a crash)
	// is stale too; one that runs the recorded command without holding
	// the flock (its file was removed and made again) is not.
	parent := os.Getppid()
	os.WriteFile(path, []byte(fmt.Sprintf("%d\nx\nsomething else\n", parent)), 0o644)
	if l4, err := AcquireLock(path, "c"); err != nil {
		t.Errorf("reused PID: %v", err)
	} else {
		l4.Release()
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", parent)); err == nil && len(b) > 0 {
		cmdline := strings.Join(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), " ")
		os.WriteFile(path, []byte(fmt.Sprintf("%d\nx\n%s\n", parent, cmdline)), 0o644)
		if _, err := AcquireLock(path, "d"); !errors.As(err, &busy) || busy.PID != parent {
			t.Errorf("live owner without flock: %v", err)
		}
	}
}

// deadPID returns the PID of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Skip("cannot start /bin/true:", err)
	}
	p.Wait()
	return p.Pid
}

func TestGitDirty(t *testing.T) {
	for _, c := range []struct {
		status string
		dirty  bool
	}{
		{"", false},
		{"?? docs/results/splits-ge/\n", false},
		{"?? docs/results/a/report.md\n?? notes.txt\n", false},
		{" M lab/runner/runner.go\n", true},
		{"M  docs/lab.md\n?? docs/results/x/\n", true},
		{"?? docs/results/x/results.json\n?? lab/runner/new.go\n", true},
		{"?? \"lab/runner/with space.go\"\n", true},
		{"D  lab/scenarios/old.toml", true},
	} {
		if got := gitDirty(c.status); got != c.dirty {
			t.Errorf("gitDirty(%q) = %v, want %v", c.status, got, c.dirty)
		}
	}
}
