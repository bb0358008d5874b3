package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-vpn/braid/httpbench"
)

// A backup path (client.priorities tier 4, on link 2) while the primary works
// carries at most 1 KB/s during a download; when the primary fails silently
// mid-download the backup takes over with no stall longer than 0.5 s; when the
// primary returns, traffic goes back to it.
func TestE2EBackupPath(t *testing.T) {
	r := newE2ERigWith(t, true, func(r *e2eRig) {
		f := filepath.Join(r.dir, "client.toml")
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.Replace(string(b), `paths = ["c1", "c2"]`, `paths = ["c1", "c2"]`+"\npriorities = [0, 4]", 1)
		if s == string(b) {
			t.Fatal("client.toml has no paths line to add priorities to")
		}
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	backupTx := func() uint64 { // server bytes sent towards the client's link 2
		var n uint64
		for _, p := range r.dSrv.status(t).Peers {
			for _, pa := range p.Paths {
				if strings.HasPrefix(pa.Remote, "198.18.2.1:") {
					n += pa.TxBytes
				}
			}
		}
		return n
	}

	// The primary works: the backup carries only keepalives.
	b0, t0 := backupTx(), time.Now()
	res := r.fetch(t, "100.64.0.1:8080", 8*httpbench.MB, nil)
	perSec := float64(backupTx()-b0) / time.Since(t0).Seconds()
	t.Logf("primary up: download %.2f Mbit/s, backup %.0f B/s", res.GoodputMbps(), perSec)
	if perSec > 1024 {
		t.Errorf("the backup carried %.0f B/s while the primary worked, want ≤ 1 KB/s", perSec)
	}

	// The primary fails silently at 2 MiB and returns 3 s later.
	shape := func(rate uint64, limit uint32) { r.shapeLink(t, 1, rate, limit) }
	var once sync.Once
	var mu sync.Mutex
	var back time.Time
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cut := make(chan struct{})
	go func() {
		select {
		case <-cut:
		case <-ctx.Done():
			return
		}
		shape(8, 1) // nothing fits: every packet is dropped
		time.Sleep(3 * time.Second)
		shape(10_000_000, 0)
		mu.Lock()
		back = time.Now()
		mu.Unlock()
	}()
	res = r.fetch(t, "100.64.0.1:8080", 16*httpbench.MB, func(total int64) {
		if total >= 2*httpbench.MB {
			once.Do(func() { close(cut) })
		}
	})
	cancel()
	t.Logf("primary cut for 3 s: download %.2f Mbit/s, longest stall %v", res.GoodputMbps(), res.MaxStall.Round(time.Millisecond))
	mu.Lock()
	returned := !back.IsZero()
	mu.Unlock()
	if !returned {
		t.Fatal("the download ended before the primary returned")
	}
	if res.MaxStall > 500*time.Millisecond {
		t.Errorf("longest stall %v when the primary failed, want ≤ 0.5 s", res.MaxStall)
	}

	// Back on the primary: the backup is quiet again.
	time.Sleep(time.Second)
	b1 := backupTx()
	res = r.fetch(t, "100.64.0.1:8080", 4*httpbench.MB, nil)
	if b := backupTx() - b1; float64(b) > 1024*(res.Duration.Seconds()+1) {
		t.Errorf("after the primary returned the backup carried %d B during a %.1f s download", b, res.Duration.Seconds())
	}
	logPaths(t, "server", r.dSrv.status(t))
}
