package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/lab/results"
)

// labTunnelTransports are the lab's tunnel baselines, with what each needs
// installed and whether it spreads over both paths.
var labTunnelTransports = []struct {
	entry     string // [[transports]] body
	needs     []string
	multipath bool
}{
	{entry: `name = "udp-tunnel"`},
	{entry: `name = "tcp-tunnel"`},
	{entry: `name = "mptcp-tunnel"`, multipath: true},
	{entry: "name = \"mptcp-tunnel\"\nsubflows = 2", multipath: true},
	{entry: `name = "openvpn-udp"`, needs: []string{"openvpn"}},
	{entry: "name = \"openvpn-udp\"\ncipher = \"none\"", needs: []string{"openvpn"}},
	{entry: `name = "openvpn-tcp"`, needs: []string{"openvpn"}},
	{entry: `name = "openvpn-mptcp"`, needs: []string{"openvpn", "mptcpize"}, multipath: true},
}

// TestLabTunnelTransports runs every tunnel baseline that is installed once
// on the smoke testbed (two 10 Mbit/s paths, 10 ms): each must carry a
// 2 MiB download at a sane rate, and the multipath ones must use both paths.
func TestLabTunnelTransports(t *testing.T) {
	labTestBraid(t, "needs root: builds the lab's network namespaces and starts tunnel daemons")
	var doc strings.Builder
	doc.WriteString("name = \"tunnels\"\n[experiment]\nsize = \"2MiB\"\nreps = 1\ntimeout = \"40s\"\n[[links]]\nname = \"primary\"\nrtt = \"10ms\"\n[[links]]\nname = \"secondary\"\nrtt = \"10ms\"\n")
	multipath := map[string]bool{}
	n := 0
	for _, tr := range labTunnelTransports {
		missing := ""
		for _, bin := range tr.needs {
			if _, err := exec.LookPath(bin); err != nil {
				missing = bin
			}
		}
		if missing != "" {
			t.Logf("not installed, not tested: %s (needs %s)", strings.ReplaceAll(tr.entry, "\n", " "), missing)
			continue
		}
		fmt.Fprintf(&doc, "[[transports]]\n%s\n", tr.entry)
		n++
		if tr.multipath {
			name, _, _ := strings.Cut(strings.TrimPrefix(tr.entry, `name = "`), `"`)
			multipath[name] = true
		}
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "tunnels.toml")
	os.WriteFile(file, []byte(doc.String()), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"lab", "run", file, "--json", "--emulator", "userspace"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res results.Run
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not a results.Run: %v", err)
	}
	if len(res.Points) != n {
		t.Fatalf("%d points, want %d", len(res.Points), n)
	}
	for _, p := range res.Points {
		t.Logf("%-24s %6.2f Mbit/s, shares %v", p.Label, p.Goodput.Mean, p.PathShares)
		if p.Error != "" || len(p.Samples) != 1 {
			t.Errorf("%s: error %q", p.Label, p.Error)
			continue
		}
		if g := p.Goodput.Mean; g < 3 {
			t.Errorf("%s: %.2f Mbit/s on a 10 Mbit/s path", p.Label, g)
		}
		if multipath[p.Transport] {
			for path, share := range p.PathShares {
				if share < 0.2 {
					t.Errorf("%s: path %s carried %.0f%% of the bytes; want both paths used", p.Label, path, 100*share)
				}
			}
		}
	}
}
