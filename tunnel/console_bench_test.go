package tunnel

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braid-vpn/braid/console"
)

// BenchmarkSendReceiveConsole is the per-packet path of a server with 1000
// more clients while pages of its console are open, each watching the client
// that carries the traffic and polling as the page does (/api/live every
// second, /api/overview every 5 s with more than 50 peers). The console's
// sampler asks the engine for the watched peer alone once a second, so the
// time per packet should stay within 5 % of pages=0 (issue 36's target; run
// with -benchtime=5s or more so that each run spans several polls).
func BenchmarkSendReceiveConsole(b *testing.B) {
	for _, pages := range []int{0, 4} {
		b.Run(fmt.Sprintf("pages=%d", pages), func(b *testing.B) {
			bp, ln, ctx, cancel := newLoadedServerBench(b)
			defer cancel()
			go console.Serve(ctx, ln, console.Options{Source: console.Source{Status: bp.srv.Status, Peers: bp.srv.PeerStatuses}}, nil)
			base := "http://" + ln.Addr().String()
			key := url.QueryEscape(bp.srvPeer.pub.String())
			var polls atomic.Int64
			var wg sync.WaitGroup
			get := func(cl *http.Client, u string) {
				if resp, err := cl.Get(u); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					polls.Add(1)
				}
			}
			for range pages {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cl := &http.Client{Timeout: 10 * time.Second}
					t := time.NewTicker(time.Second)
					defer t.Stop()
					for n := 0; ctx.Err() == nil; n++ {
						if n%5 == 0 {
							get(cl, base+"/api/overview")
						}
						get(cl, base+"/api/live?peer="+key)
						select {
						case <-ctx.Done():
						case <-t.C:
						}
					}
				}()
			}
			bp.measurePerPacket(b, func() { cancel(); wg.Wait() })
			b.ReportMetric(float64(polls.Load()), "polls")
		})
	}
}

// PeerStatuses returns the named peers alone, in the engine's order, and
// nothing for keys that are not peers or not keys.
func TestPeerStatuses(t *testing.T) {
	bp := newBenchPairPeers(t, 2, "none", 20)
	all := bp.srv.Status().Peers
	if len(all) != 21 {
		t.Fatalf("%d peers", len(all))
	}
	want := []string{all[17].PublicKey, all[3].PublicKey}
	got := bp.srv.PeerStatuses(append(want, "not a key", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="))
	if len(got) != 2 || got[0].PublicKey != all[3].PublicKey || got[1].PublicKey != all[17].PublicKey {
		t.Fatalf("got %d peers: %+v", len(got), got)
	}
	if got := bp.srv.PeerStatuses(nil); len(got) != 0 {
		t.Fatalf("no keys: %d peers", len(got))
	}
}
