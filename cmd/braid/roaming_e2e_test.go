package main

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/braid-vpn/braid/httpbench"
)

// The client's address on path 1 changes in the middle of a download (a new DHCP
// lease, a new Wi-Fi network on the same server): the download completes without
// a long stall and without a new handshake, and the server moves the path to the
// new address instead of starting another.
func TestE2EAddressChange(t *testing.T) {
	r := newE2ERig(t, true)
	hs := r.dCli.status(t).Peers[0].LastHandshake
	var once sync.Once
	var changed time.Time
	res := r.fetch(t, "100.64.0.1:8080", 16*httpbench.MB, func(total int64) {
		if total >= 4*httpbench.MB {
			once.Do(func() {
				changed = time.Now()
				// Old address out, new one in (adding first would make the new
				// one a secondary, removed with the primary).
				if err := r.cli.DelAddr("c1", netip.MustParsePrefix("198.18.1.1/24")); err != nil {
					t.Error(err)
				}
				if err := r.cli.AddAddr("c1", netip.MustParsePrefix("198.18.1.5/24")); err != nil {
					t.Error(err)
				}
			})
		}
	})
	st := r.dSrv.status(t)
	logPaths(t, "server", st)
	if changed.IsZero() {
		t.Fatal("the address never changed")
	}
	if now := r.dCli.status(t).Peers[0].LastHandshake; !now.Equal(hs) && now.Sub(changed) > 0 && now.Sub(changed) < 5*time.Second {
		t.Errorf("a handshake at %v, %v after the address change", now, now.Sub(changed))
	}
	n, stray, moved := 0, 0, false
	for _, pa := range st.Peers[0].Paths {
		if pa.Remote[:10] == "198.18.1.5" {
			moved = moved || pa.State == "active" || pa.State == "degraded"
		}
		// Between the old address's removal and the new one's arrival, the
		// kernel may send a datagram of c1's socket from c2's address (the
		// client lets it pick a source when its own is gone). The server
		// challenges that source, which never answers (nothing of c1 listens
		// on c2), and drops it after its challenges: not a path it keeps.
		if pa.State == "validating" {
			stray++
			continue
		}
		n++
	}
	t.Logf("download %.2f Mbit/s, longest stall %v; server paths %d (and %d unvalidated), one at the new address in service: %v", res.GoodputMbps(), res.MaxStall, n, stray, moved)
	if res.MaxStall > time.Second {
		t.Errorf("longest stall %v > 1 s", res.MaxStall)
	}
	if !moved {
		t.Error("no path to the new address in service")
	}
	// The paths moved, with their ids and measurements; before, the new address
	// got two new paths and the two old ones stayed, Down, for a minute.
	if n != 4 {
		t.Errorf("server has %d paths for client a, want the same 4", n)
	}
	// An unvalidated stray goes after its challenges (8, 250 ms apart).
	for deadline := time.Now().Add(4 * time.Second); stray > 0; time.Sleep(100 * time.Millisecond) {
		stray = 0
		for _, pa := range r.dSrv.status(t).Peers[0].Paths {
			if pa.State == "validating" {
				stray++
			}
		}
		if stray > 0 && time.Now().After(deadline) {
			t.Errorf("%d unvalidated paths still there 4 s later", stray)
			break
		}
	}
}
