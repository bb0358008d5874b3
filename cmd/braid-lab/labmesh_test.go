package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/braid-vpn/braid/lab/mesh"
	"github.com/braid-vpn/braid/netns"
)

func TestLabMeshNeedsRoot(t *testing.T) {
	saved := labMeshGeteuid
	t.Cleanup(func() { labMeshGeteuid = saved })
	labMeshGeteuid = func() int { return 1000 }
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"lab", "mesh"}, nil, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	msg := stderr.String()
	if !strings.HasPrefix(msg, "braid: the lab needs root") || strings.Count(msg, "\n") != 1 {
		t.Errorf("stderr %q, want one line saying the lab needs root", msg)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q, want nothing", stdout.String())
	}
}

// TestLabMeshFlags: bad flags fail with one line before anything is built
// (the root check is faked so this runs as any user).
func TestLabMeshFlags(t *testing.T) {
	saved := labMeshGeteuid
	t.Cleanup(func() { labMeshGeteuid = saved })
	labMeshGeteuid = func() int { return 0 }
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--channels", "3"}, `--channels: "3" (want 1, 2 or both)`},
		{[]string{"--algos", "opt-link"}, `--algos: "opt-link" (want ld, nd or zd)`},
		{[]string{"--size", "4"}, "--size:"},
		{[]string{"--rate", "unlimited"}, "--rate: a channel needs a rate"},
		{[]string{"--reps", "0"}, "--reps: 0 is outside"},
		{[]string{"--topologies", "0"}, "--topologies: 0"},
		{[]string{"--from", "s"}, "--from and --to need --graph"},
		{[]string{"--graph", "/nonexistent/g.json", "--from", "s", "--to", "d"}, "no such file"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"lab", "mesh"}, c.args...), nil, &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), c.want) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 1 and one line containing %q", c.args, code, stderr.String(), c.want)
		}
	}
	if _, err := parseChannels("both"); err != nil {
		t.Error(err)
	}
}

// sharedGraph is the hand-made mesh of lab/mesh's tests: three 4-hop ways
// from s to d; the LD pair s–a–m–c–d and s–b–m–e–d crosses at m.
const sharedGraph = `{"edges": [
 {"from":"s","to":"a"},{"from":"a","to":"m"},{"from":"m","to":"c"},{"from":"c","to":"d"},
 {"from":"s","to":"b"},{"from":"b","to":"m"},{"from":"m","to":"e"},{"from":"e","to":"d"},
 {"from":"s","to":"x"},{"from":"x","to":"y"},{"from":"y","to":"z"},{"from":"z","to":"d"}]}`

// TestLabMeshBraid runs `braid lab mesh` on the hand-made mesh (the test
// binary plays braid): TCP over the shortest path, braid over the LD pair
// on one channel and on two. TCP's bytes cross only path 0; braid's cross
// both paths (although they meet at m); one channel never gives the pair
// more than one 4-hop path's airtime, two channels give clearly more than
// TCP; and no namespace is left.
func TestLabMeshBraid(t *testing.T) {
	labTestBraid(t, "needs root: builds the mesh's network namespaces and starts braid daemons")
	dir := t.TempDir()
	file := filepath.Join(dir, "shared.json")
	if err := os.WriteFile(file, []byte(sharedGraph), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const size = 1 << 20
	var stdout, stderr bytes.Buffer
	start := time.Now()
	args := []string{"lab", "mesh", "--graph", file, "--from", "s", "--to", "d", "--algos", "ld", "--reps", "1", "--size", "1MiB", "--json", "--out", out}
	if code := run(ctx, args, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	t.Logf("took %v", time.Since(start).Round(100*time.Millisecond))
	var res mesh.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not a mesh.Result: %v\n%s", err, stdout.String())
	}
	for _, f := range []string{"results.json", "samples.csv", "summary.csv", "tables.md", "mesh-goodput-1ch.png", "mesh-goodput-2ch.svg", "mesh-goodput-ld.png"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("--out: %v", err)
		}
	}
	if len(res.Runs) != 1 || len(res.Runs[0].Measurements) != 3 {
		t.Fatalf("want 1 topology with 3 measurements, got %+v", res.Runs)
	}
	tr := res.Runs[0]
	if tr.ShortestHops != 4 || len(tr.Pairs) != 1 || fmt.Sprint(tr.Pairs[0].Paths) != "[[s a m c d] [s b m e d]]" {
		t.Fatalf("topology: %d hops, pairs %+v", tr.ShortestHops, tr.Pairs)
	}
	got := map[string]mesh.Measurement{}
	for _, m := range tr.Measurements {
		if m.Error != "" || len(m.Samples) != 1 {
			t.Fatalf("%s: %d samples, error %q", m.Case, len(m.Samples), m.Error)
		}
		got[m.Case] = m
		s := m.Samples[0]
		t.Logf("%-6s %5.2f Mbit/s, path bytes %v, shares %.2f", m.Case, s.GoodputMbps, s.PathBytes, m.Shares)
		if s.Bytes != size {
			t.Errorf("%s: %d bytes downloaded, want %d", m.Case, s.Bytes, size)
		}
	}
	tcp, one, two := got["tcp"], got["ld-1ch"], got["ld-2ch"]
	if pb := tcp.Samples[0].PathBytes; pb[0] < size || pb[1] > 10_000 {
		t.Errorf("tcp: path bytes %v, want ≥ %d on path 0 and nothing on path 1", pb, size)
	}
	for _, m := range []mesh.Measurement{one, two} {
		pb := m.Samples[0].PathBytes
		if pb[0] < size/10 || pb[1] < size/10 || pb[0]+pb[1] < size {
			t.Errorf("%s: path bytes %v, want both paths to carry ≥ 10%% of %d", m.Case, pb, size)
		}
	}
	// The model's bound: one channel, frames of 1514 bytes with 1448 of
	// payload, every frame on air once per hop of a 4-hop path.
	bound := 11.0 / 4 * 1448 / 1514
	if g := one.Samples[0].GoodputMbps; g > 1.05*bound {
		t.Errorf("one channel: %.2f Mbit/s, above the channel's %.2f for 4-hop paths", g, bound)
	}
	if r := two.Samples[0].GoodputMbps / tcp.Samples[0].GoodputMbps; r < 1.2 {
		t.Errorf("two channels gave %.2f× TCP, want > 1.2× (ideal 2×)", r)
	}
	ents, _ := os.ReadDir(netns.RunDir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), fmt.Sprintf("%s-%d-", mesh.Prefix, os.Getpid())) {
			t.Errorf("namespace %s left behind", e.Name())
		}
	}
}

// TestLabMeshInterrupt sends the process SIGINT while `braid lab mesh` is
// downloading: the run stops with one line saying so and removes every
// namespace it made.
func TestLabMeshInterrupt(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: builds the mesh's network namespaces")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "shared.json")
	if err := os.WriteFile(file, []byte(sharedGraph), 0o644); err != nil {
		t.Fatal(err)
	}
	mine := fmt.Sprintf("%s-%d-", mesh.Prefix, os.Getpid())
	count := func() int {
		n := 0
		ents, _ := os.ReadDir(netns.RunDir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), mine) {
				n++
			}
		}
		return n
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		// The LD pair's mesh has 7 nodes (s a b m c e d) and 8 link
		// nodes; once they exist the run's signal handler is in place,
		// and the TCP download of 64 MiB at 2.6 Mbit/s would take minutes.
		deadline := time.Now().Add(30 * time.Second)
		for count() < 15 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		select {
		case <-finished:
			return // the run failed early: no handler left to catch a signal
		case <-time.After(500 * time.Millisecond):
		}
		syscall.Kill(os.Getpid(), syscall.SIGINT)
	}()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run(context.Background(), []string{"lab", "mesh", "--graph", file, "--from", "s", "--to", "d", "--algos", "ld", "--reps", "1", "--size", "64MiB"}, nil, &stdout, &stderr)
	close(finished)
	<-done
	if code != 1 || !strings.Contains(stderr.String(), "braid: interrupted after 0 of 1 topologies; the namespaces were removed") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the interrupted run took %v", took)
	}
	if n := count(); n != 0 {
		t.Errorf("%d namespaces left after the interrupt", n)
	}
}
