package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/braid-vpn/braid/httpbench"
)

// A path cut inside the network for 3 s during a download, then restored: the
// longest stall stays below 0.5 s and the server (the sender of the download) sends
// on the restored path again within 1 s of its return. The cut is either the link
// going down (the sender gets errors) or silent (a shaper that drops everything,
// as a failure somewhere along the path looks).
func TestE2EPathReturns(t *testing.T) {
	for _, silent := range []bool{false, true} {
		name := "link-down"
		if silent {
			name = "silent"
		}
		t.Run(name, func(t *testing.T) { pathReturns(t, silent) })
	}
}

func pathReturns(t *testing.T, silent bool) {
	r := newE2ERig(t, true)
	shape := func(rate uint64, limit uint32) { r.shapeLink(t, 2, rate, limit) }
	cutLink := func() error {
		if silent {
			shape(8, 1) // nothing fits: every packet is dropped
			return nil
		}
		return r.srv.SetDown("s2")
	}
	restore := func() error {
		if silent {
			shape(10_000_000, 0)
			return nil
		}
		return r.srv.SetUp("s2")
	}
	var mu sync.Mutex
	var restoredAt, backAt time.Time
	cut := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-cut
		if err := cutLink(); err != nil {
			t.Error(err)
		}
		time.Sleep(3 * time.Second)
		if err := restore(); err != nil {
			t.Error(err)
		}
		now := time.Now()
		mu.Lock()
		restoredAt = now
		mu.Unlock()
		// Watch the server's bytes on the path over link 2 (to 198.18.2.1).
		var last uint64
		for ctx.Err() == nil {
			st := r.dSrv.status(t)
			for _, p := range st.Peers {
				for _, pa := range p.Paths {
					if pa.Remote[:10] != "198.18.2.1" {
						continue
					}
					if last != 0 && pa.TxBytes > last+20_000 && backAt.IsZero() {
						mu.Lock()
						backAt = time.Now()
						mu.Unlock()
					}
					if last == 0 {
						last = pa.TxBytes
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	var once sync.Once
	res := r.fetch(t, "100.64.0.1:8080", 32*httpbench.MB, func(total int64) {
		if total >= 4*httpbench.MB {
			once.Do(func() { close(cut) })
		}
	})
	cancel()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("download %.2f Mbit/s, longest stall %v; path back in service %v after its link returned",
		res.GoodputMbps(), res.MaxStall, backAt.Sub(restoredAt).Round(10*time.Millisecond))
	logPaths(t, "server", r.dSrv.status(t))
	if restoredAt.IsZero() {
		t.Fatal("the download ended before the link was restored")
	}
	if backAt.IsZero() {
		t.Fatal("the server never sent on the restored path again during the download")
	}
	if d := backAt.Sub(restoredAt); d > time.Second {
		t.Errorf("the restored path carried traffic again only %v after its return", d)
	}
	if res.MaxStall >= 500*time.Millisecond {
		t.Errorf("longest stall %v", res.MaxStall)
	}
}
