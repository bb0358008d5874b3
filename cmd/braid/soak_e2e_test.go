package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-vpn/braid/httpbench"
)

// TestSoak downloads through the rig's two 10 Mbit/s paths for BRAID_SOAK (e.g. 10m)
// while the paths are cut and restored in turn every 3 s (one is always up): the
// session must survive, the longest stall of any download must stay below 0.5 s, and
// the daemons' memory must not grow. A measurement, not a CI test:
//
//	sudo BRAID_SOAK=10m go test ./cmd/braid -run TestSoak -v -timeout 30m
func TestSoak(t *testing.T) {
	d, _ := time.ParseDuration(os.Getenv("BRAID_SOAK"))
	if d <= 0 {
		t.Skip("a measurement: set BRAID_SOAK (e.g. 10m) to run it")
	}
	r := newE2ERig(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()

	var wg sync.WaitGroup
	var cuts int
	wg.Add(1)
	go func() {
		defer wg.Done()
		links := []string{"s1", "s2"}
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				r.srv.SetUp("s1")
				r.srv.SetUp("s2")
				return
			case <-time.After(3 * time.Second):
			}
			l := links[i/2%2]
			var err error
			if i%2 == 0 {
				err = r.srv.SetDown(l)
				cuts++
			} else {
				err = r.srv.SetUp(l)
			}
			if err != nil {
				t.Errorf("link %s: %v", l, err)
			}
		}
	}()

	rss0 := map[string]int64{}
	var worst time.Duration
	var downloads int
	var bytes int64
	start := time.Now()
	for ctx.Err() == nil {
		if downloads == 2 { // warmed up: the baseline for memory growth
			rss0["server"], rss0["client"] = vmRSS(t, r.dSrv.cmd.Process.Pid), vmRSS(t, r.dCli.cmd.Process.Pid)
		}
		res, err := httpbench.Fetch(ctx, httpbench.URL("100.64.0.1:8080", 16*httpbench.MB), httpbench.Options{Dial: dialIn(r.cli, e2eCC())})
		if err != nil {
			if ctx.Err() != nil {
				break // the soak ended inside a download
			}
			t.Fatalf("download %d failed after %v: %v", downloads, time.Since(start).Round(time.Second), err)
		}
		downloads++
		bytes += res.Bytes
		if res.MaxStall > worst {
			worst = res.MaxStall
			t.Logf("download %d: %.2f Mbit/s, longest stall so far %v", downloads, res.GoodputMbps(), worst)
		}
	}
	cancel()
	wg.Wait()
	el := time.Since(start)
	rssS, rssC := vmRSS(t, r.dSrv.cmd.Process.Pid), vmRSS(t, r.dCli.cmd.Process.Pid)
	t.Logf("soak %v: %d downloads, %.2f Mbit/s mean, %d path cuts, longest stall %v; RSS server %d→%d KiB, client %d→%d KiB",
		el.Round(time.Second), downloads, float64(bytes*8)/el.Seconds()/1e6, cuts, worst, rss0["server"]>>10, rssS>>10, rss0["client"]>>10, rssC>>10)
	if worst >= 500*time.Millisecond {
		t.Errorf("longest stall %v ≥ 0.5 s", worst)
	}
	for name, now := range map[string]int64{"server": rssS, "client": rssC} {
		if was := rss0[name]; was > 0 && now > was+was/2+8<<20 {
			t.Errorf("%s memory grew from %d to %d KiB", name, was>>10, now>>10)
		}
	}
}

// vmRSS returns a process's resident memory.
func vmRSS(t *testing.T, pid int) int64 { return procStatus(t, pid, "VmRSS") }

// procStatus returns a size field of /proc/pid/status in bytes (0 if absent).
func procStatus(t *testing.T, pid int, key string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
