package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/internal/logbuf"
	"github.com/braid-vpn/braid/lab/load"
	"github.com/braid-vpn/braid/lab/testbed"
	"github.com/braid-vpn/braid/netns"
)

// TestLabLoad runs `braid lab load` small: 50 two-path clients against one
// server daemon, rekeying every 2 s so that the run sees rekeys. Every
// client comes up, the traffic reaches the sink, every figure is there, no
// drop that means a bug, and nothing is left behind.
func TestLabLoad(t *testing.T) {
	labTestBraid(t, "needs root: builds network namespaces and starts a braid server")
	const clients = 50
	out := filepath.Join(t.TempDir(), "out")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"lab", "load", "--json", "--out", out, "--clients", strconv.Itoa(clients),
		"--hold", "2s", "--traffic", "3s", "--rate", "50", "--rekey-after", "2s", "--ramp-timeout", "20s"}, nil, &stdout, &stderr)
	t.Logf("stderr:\n%s", stderr.String())
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var res load.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not a load.Result: %v\n%s", err, stdout.String())
	}
	if res.Clients != clients || res.Paths != load.DefaultPaths {
		t.Errorf("%d clients × %d paths, want %d × %d", res.Clients, res.Paths, clients, load.DefaultPaths)
	}
	r := res.Ramp
	if r.Established != clients || !r.AllUpSeconds.Valid() || !(r.HandshakesPerSecond > 0) || !(r.CPUPerHandshakeMs > 0) {
		t.Errorf("ramp %+v, want all %d up with a rate and a CPU cost", r, clients)
	}
	id := res.Idle
	if id.PeersUp != clients {
		t.Errorf("the server has %d peers up after the hold, want %d", id.PeersUp, clients)
	}
	// A Go daemon: some MB, far below a GB; every client costs something.
	for _, v := range []load.Num{id.RSSEmptyMB, id.RSSBeforeMB, id.RSSMB, id.PeakRSSMB} {
		if !v.Valid() || v < 1 || v > 1000 {
			t.Errorf("server RSS figures %+v, want 1..1000 MB each", id)
		}
	}
	if !(id.RSSMB >= id.RSSEmptyMB) || !id.RSSPerClientKiB.Valid() || !(id.RSSPerConfiguredKiB > 0) || !id.ServerCores.Valid() {
		t.Errorf("idle figures %+v", id)
	}
	tr := res.Traffic
	if tr.SentPackets == 0 || tr.SentBytes != tr.SentPackets*uint64(load.DefaultPacketSize) {
		t.Errorf("sent %d packets, %d bytes", tr.SentPackets, tr.SentBytes)
	}
	// Generous: the machine is shared, the clients' engines may shed some.
	if tr.DeliveredPackets < tr.SentPackets/2 || tr.DeliveredPackets > tr.SentPackets || !(tr.Mbps > 0) || !(tr.CPUPerGB > 0) {
		t.Errorf("traffic %+v, want most of the sent packets at the sink and a CPU cost", tr)
	}
	// Each client rekeyed at least once in the ~6 s after its first
	// handshake, and each second's count adds up to the total.
	h := res.Handshakes
	sum := 0
	for _, n := range h.PerSecond {
		sum += n
	}
	if h.Total != sum || h.Rekeys < clients || h.Total != clients+h.Rekeys || h.PeakAfterRamp == 0 {
		t.Errorf("handshakes %+v (sum per second %d), want every client's first and a rekey each", h, sum)
	}
	if len(res.UnexpectedDrops) > 0 {
		t.Errorf("drops that mean a bug: %v (all: server %v, clients %v)", res.UnexpectedDrops, res.ServerDrops, res.ClientDrops)
	}
	if res.Generator.CPUSeconds <= 0 || res.Generator.PeakRSSMB <= 0 {
		t.Errorf("load generator figures %+v", res.Generator)
	}
	for _, name := range []string{"results.json", "report.md", "handshakes.csv"} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Error(err)
		}
	}
	if md, err := os.ReadFile(filepath.Join(out, "report.md")); err != nil || !strings.Contains(string(md), "| idle | server RSS per client (KiB) |") {
		t.Errorf("report.md: %v\n%s", err, md)
	}
	checkNoNamespaces(t)
}

// TestLabLoadInterrupt cancels a load run during its idle hold: the run
// ends with the error and removes its namespaces and processes.
func TestLabLoadInterrupt(t *testing.T) {
	labTestBraid(t, "needs root: builds network namespaces and starts a braid server")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout bytes.Buffer
	var stderr logbuf.Buffer // read while the run writes it
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"lab", "load", "--clients", "10", "--hold", "1m"}, nil, &stdout, &stderr)
	}()
	deadline := time.After(30 * time.Second)
	// The ramp's line comes right before the hold.
	for !strings.Contains(stderr.String(), "ramp: 10 clients up") {
		select {
		case code := <-done:
			t.Fatalf("ended (exit %d) before the hold:\n%s", code, stderr.String())
		case <-deadline:
			t.Fatalf("no ramp after 30 s:\n%s", stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	cancel()
	select {
	case code := <-done:
		if code == 0 {
			t.Errorf("exit 0 after the cancel:\n%s", stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end 30 s after the cancel")
	}
	checkNoNamespaces(t)
}

// checkNoNamespaces fails for every namespace this process made that is
// still there (their names carry its PID).
func checkNoNamespaces(t *testing.T) {
	t.Helper()
	ents, _ := os.ReadDir(netns.RunDir)
	mine := testbed.Prefix + "-" + strconv.Itoa(os.Getpid()) + "-"
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), mine) {
			t.Errorf("namespace %s left behind", e.Name())
		}
	}
}
