package tunnel

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braid-vpn/braid/conn/conntest"
)

// txOn returns the bytes e has sent on its path whose local or remote address is
// on link (1 or 2 of the rig).
func txOn(e *Engine, peer string, link int) uint64 {
	var n uint64
	for _, p := range e.Status().Peers {
		if p.Name != peer {
			continue
		}
		for _, pa := range p.Paths {
			if pa.Local[:8] == fmt.Sprintf("198.18.%d", link) || pa.Remote[:8] == fmt.Sprintf("198.18.%d", link) {
				n += pa.TxBytes
			}
		}
	}
	return n
}

// A backup path (priority tier 1) carries only its keepalives while the primary
// works, in both directions (the server learns the tiers in the handshake); it
// takes over when the primary fails and hands back when it returns.
func TestEngineBackupTier(t *testing.T) {
	r := newRig(t, rigOpts{tiers: [2]int{0, 1}})
	waitUsable(t, r.cliA, "server", 2)
	waitUsable(t, r.srv, "a", 2)
	var got atomic.Int64
	go func() {
		for range r.cliATun.Outbound() {
			got.Add(1)
		}
	}()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			r.srvTun.Inject(udp4(inSrv, inCliA, 5000, 4000, make([]byte, 1000)))
		}
	}()
	time.Sleep(300 * time.Millisecond)
	srv0, cli0 := txOn(r.srv, "a", 2), txOn(r.cliA, "server", 2)
	const window = time.Second
	time.Sleep(window)
	srvB, cliB := txOn(r.srv, "a", 2)-srv0, txOn(r.cliA, "server", 2)-cli0
	t.Logf("backup path while the primary works: server sent %d B/s, client %d B/s", srvB, cliB)
	if srvB > 1024 || cliB > 1024 {
		t.Fatalf("backup carried %d (server) and %d (client) B/s; want ≤ 1 KB/s each", srvB, cliB)
	}

	// The primary fails: the backup takes over.
	r.net.SetLink(srvAddr1.Addr(), cliAddr1, conntest.LinkOptions{Down: true})
	r.net.SetLink(cliAddr1, srvAddr1.Addr(), conntest.LinkOptions{Down: true})
	cut := time.Now()
	before := got.Load()
	for got.Load() < before+50 && time.Since(cut) < 3*time.Second {
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(cut)
	t.Logf("backup carries the stream %v after the primary failed", took.Round(time.Millisecond))
	if took > 500*time.Millisecond {
		t.Fatalf("backup took over after %v, want ≤ 0.5 s", took)
	}

	// The primary returns: traffic goes back to it.
	r.net.SetLink(srvAddr1.Addr(), cliAddr1, conntest.LinkOptions{})
	r.net.SetLink(cliAddr1, srvAddr1.Addr(), conntest.LinkOptions{})
	time.Sleep(time.Second)
	s1 := txOn(r.srv, "a", 2)
	time.Sleep(window)
	if b := txOn(r.srv, "a", 2) - s1; b > 1024 {
		t.Fatalf("after the primary returned the backup still carried %d B/s", b)
	}
}
