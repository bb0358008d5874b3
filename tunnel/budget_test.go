package tunnel

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braid-vpn/braid/budget"
	"github.com/braid-vpn/braid/tundev/tuntest"
)

// A path with a data allowance carries traffic until it is used up, then only its
// keepalives (backup tier, in both directions: the client rekeys with the new
// tiers); its usage is saved and survives a restart.
func TestEngineBudget(t *testing.T) {
	r := newRig(t, rigOpts{})
	waitUsable(t, r.srv, "a", 2)
	r.cliA.Close()
	state := filepath.Join(t.TempDir(), "usage.json")
	cfg := r.cfgA
	cfg.TUN = tuntest.New(1380)
	cfg.BudgetState = state
	cfg.Params.Scheduler = "roundrobin" // both paths carry the stream until one is over budget
	cfg.LocalPaths = []LocalPath{{Addr: cliAddr1}, {Addr: cliAddr2, Budget: budget.Limit{Bytes: 200_000, Period: budget.Month}}}
	cli, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cli.Start()
	waitUsable(t, cli, "server", 2)
	waitUsable(t, r.srv, "a", 2)
	var got atomic.Int64
	go func() {
		for range cfg.TUN.(*tuntest.Device).Outbound() {
			got.Add(1)
		}
	}()
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			r.srvTun.Inject(udp4(inSrv, inCliA, 5000, 4000, make([]byte, 1000)))
		}
	}()
	// 1 MB/s downstream: the 200 kB allowance goes within a second or two.
	deadline := time.Now().Add(5 * time.Second)
	for {
		over := false
		for _, pa := range cli.Status().Peers[0].Paths {
			over = over || (pa.Budget != "" && pa.Priority == overBudgetTier)
		}
		if over {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the metered path never went over its allowance: %+v", cli.Status().Peers[0].Paths)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // the rekey carries the tiers to the server
	s0 := txOn(r.srv, "a", 2)
	time.Sleep(time.Second)
	if b := txOn(r.srv, "a", 2) - s0; b > 1024 {
		t.Errorf("server still sends %d B/s on the path over its allowance", b)
	}
	close(stop)
	cli.Close()

	// Restart: the usage is still there, so the path starts backup-only.
	cfg.TUN = tuntest.New(1380)
	again, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	for _, pa := range again.Status().Peers[0].Paths {
		if pa.Budget != "" && (pa.Priority != overBudgetTier || pa.BudgetUsed < 200_000) {
			t.Fatalf("after a restart the metered path is %+v", pa)
		}
	}
}
