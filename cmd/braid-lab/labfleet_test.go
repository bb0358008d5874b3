package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/lab/fleet"
	"github.com/braid-vpn/braid/lab/testbed"
	"github.com/braid-vpn/braid/netns"
)

// runFleet runs `braid lab fleet args…` and returns its results.
func runFleet(t *testing.T, args ...string) fleet.Results {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out := filepath.Join(t.TempDir(), "out")
	var stdout, stderr bytes.Buffer
	code := run(ctx, append(append([]string{"lab", "fleet"}, args...), "--json", "--out", out), nil, &stdout, &stderr)
	t.Logf("stderr:\n%s", stderr.String())
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var res fleet.Results
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not fleet.Results: %v\n%s", err, stdout.String())
	}
	for _, f := range []string{"results.json", "report.md", "samples.csv"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("--out lacks %s: %v", f, err)
		}
	}
	for _, c := range res.Clients {
		t.Logf("client %d: %.1f Mbit/s, stall %.0f ms at %.2f s, servers %d→%d, paths %v / %v, holders %v, failures %d %s",
			c.Index, c.GoodputMbps, c.LongestStallMs, c.StallAtS, c.ServerStart, c.ServerEnd, c.PathsUsable, c.PathsReceiving, c.Holders, c.Failures, c.LastError)
	}
	checkNoNamespacesLeft(t)
	return res
}

// TestLabFleetFairness runs the fairness scenario small: every client
// downloads, Jain's index is computed from their goodputs, every session is
// on the one server with its path.
func TestLabFleetFairness(t *testing.T) {
	labTestBraid(t, "needs root: builds network namespaces and veth pairs and starts braid daemons")
	res := runFleet(t, "fairness", "--clients", "4", "--uplink", "40mbit", "--seconds", "8s", "--warmup", "2s")
	if len(res.Clients) != 4 || len(res.Servers) != 1 {
		t.Fatalf("%d clients, %d servers", len(res.Clients), len(res.Servers))
	}
	var sum, sq float64
	for _, c := range res.Clients {
		if c.Bytes <= 0 || c.GoodputMbps <= 0 {
			t.Errorf("client %d: %d bytes, %v Mbit/s", c.Index, c.Bytes, c.GoodputMbps)
		}
		if c.ServerEnd != 0 || !c.PathsHome || c.PathsUsable[0] != 1 || c.PathsReceiving[0] != 1 {
			t.Errorf("client %d: on server %d with paths %v / %v", c.Index, c.ServerEnd, c.PathsUsable, c.PathsReceiving)
		}
		sum, sq = sum+c.GoodputMbps, sq+c.GoodputMbps*c.GoodputMbps
	}
	if want := sum * sum / (4 * sq); res.Summary.Jain < want-1e-9 || res.Summary.Jain > want+1e-9 {
		t.Errorf("Jain %v, want %v from the goodputs", res.Summary.Jain, want)
	}
	// The shaped uplink bounds what all clients together receive.
	if res.Summary.AggregateMbps > 40*1.05 || res.Summary.AggregateMbps != sum {
		t.Errorf("aggregate %v Mbit/s (clients' sum %v) through a 40 Mbit/s uplink", res.Summary.AggregateMbps, sum)
	}
	if s := res.Servers[0]; s.Sessions != 4 || s.Established != 4 || s.Paths != 4 || s.StrayPaths != 0 {
		t.Errorf("server: %+v, want 4 sessions, all established, 4 paths, none stray", s)
	}
}

// TestLabFleetScaleout runs the scale-out scenario small: two servers
// behind the balancer, four two-path clients, the server holding the most
// sessions killed: every client ends on the other with both paths there,
// and every download moved again after its longest stall.
func TestLabFleetScaleout(t *testing.T) {
	labTestBraid(t, "needs root: builds network namespaces, veth pairs and nftables rules and starts braid daemons")
	const seconds, killAt = 18.0, 3.0
	res := runFleet(t, "scaleout", "--servers", "2", "--clients", "4", "--paths", "2", "--seconds", "18s", "--warmup", "2s",
		"--kill", "busiest@3s", "--revive", "0", "--rekey-after", "0")
	killed := res.Setup.Kill
	if killed < 0 || res.Summary.KilledClients < 2 {
		t.Fatalf("killed server %d with %d of 4 clients, want the busiest, which has 2 or more", killed, res.Summary.KilledClients)
	}
	live := 1 - killed
	for _, c := range res.Clients {
		if c.ServerEnd != live || !c.PathsHome {
			t.Errorf("client %d: on server %d at the end with paths %v / %v, want every path on server %d", c.Index, c.ServerEnd, c.PathsUsable, c.PathsReceiving, live)
		}
		if end := c.StallAtS + c.LongestStallMs/1000; end > seconds-0.5 {
			t.Errorf("client %d: stalled from %.2f s to the end of the window (%v s)", c.Index, c.StallAtS, seconds)
		}
		if c.Killed && c.StallAtS+c.LongestStallMs/1000 < killAt {
			t.Logf("client %d: its longest stall (%.0f ms) came before the kill", c.Index, c.LongestStallMs)
		}
	}
	for _, l := range res.Summary.KilledLanded {
		if l != live {
			t.Errorf("a killed client landed on %d, want %d", l, live)
		}
	}
	if s := res.Servers[killed]; !s.Killed || s.Sessions != 0 || s.Established != 0 {
		t.Errorf("killed server: %+v", s)
	}
}

// checkNoNamespacesLeft fails if a namespace named by this process (the
// names carry its PID) is still there.
func checkNoNamespacesLeft(t *testing.T) {
	t.Helper()
	ents, _ := os.ReadDir(netns.RunDir)
	mine := fmt.Sprintf("%s-%d-", testbed.Prefix, os.Getpid())
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), mine) {
			t.Errorf("namespace %s left behind", e.Name())
		}
	}
}
