package tunnel

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braid-vpn/braid/cc"
	"github.com/braid-vpn/braid/conn/conntest"
	"github.com/braid-vpn/braid/internal/testenv"
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
	testenv.SkipIfEmulated(t, "times wall-clock behaviour: the backup must carry the stream within 0.5 s of the cut, which an emulated CPU missed (0.58 s under qemu on a busy host)")
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

// A secondary tier (1) joins while the primary is saturated (its window full,
// packets waiting in the queue for a second) and leaves once the queue has stayed
// short for tierLeaveAfter; a load the primary carries never wakes it. A backup
// tier (4) does not join for saturation.
func TestEngineTierJoinsWhenSaturated(t *testing.T) {
	testenv.SkipIfEmulated(t, "times wall-clock behaviour: 17 s of sleeps around a primary saturated at 500 packets/s, more than an emulated CPU keeps up with (the tier logic does not depend on the architecture)")
	for _, tier := range []int{1, 4} {
		t.Run(fmt.Sprintf("tier%d", tier), func(t *testing.T) { tierUnderLoad(t, tier, true) })
	}
}

// The same load pushed at the client on a flow it never sent on — a flood of
// its tunnel address from the Internet — saturates the primary, but does not
// spill onto the secondary tier (often a metered link, whose allowance it would
// burn): a joined secondary tier carries only flows the client sent on lately.
func TestEngineUnaskedFloodStaysOnPrimary(t *testing.T) {
	tierUnderLoad(t, 1, false)
}

// tierUnderLoad streams down to client A, lightly then beyond the primary's
// window. With asked the client sends a packet of the same flow every 200 ms (a
// request, or a transport's acks), as any traffic it wants does.
func tierUnderLoad(t *testing.T, tier int, asked bool) {
	r := newRig(t, rigOpts{tiers: [2]int{0, tier}, params: Params{Congestion: "reno"}, tunables: func(tn *Tunables) {
		tn.CC = cc.Config{InitialWindow: 4, MaxWindow: 4}
	}})
	// 100 ms round trips: the primary's window of 4 moves 40 packets a second.
	r.setDelays(50*time.Millisecond, 50*time.Millisecond)
	waitUsable(t, r.cliA, "server", 2)
	waitUsable(t, r.srv, "a", 2)
	go func() {
		for range r.cliATun.Outbound() {
		}
	}()
	var gap atomic.Int64                    // between injected packets, ns
	gap.Store(int64(50 * time.Millisecond)) // 20 packets a second: the primary carries it
	r.streamDown(t, 1000, &gap)
	if asked {
		stop := make(chan struct{})
		t.Cleanup(func() { close(stop) })
		every(stop, 200*time.Millisecond, func() {
			r.cliATun.Inject(udp4(inCliA, inSrv, 4000, 5000, []byte("more")))
		})
	}
	backup := func(d time.Duration) uint64 {
		b0 := txOn(r.srv, "a", 2)
		time.Sleep(d)
		return txOn(r.srv, "a", 2) - b0
	}

	time.Sleep(500 * time.Millisecond)
	if b := backup(1500 * time.Millisecond); b > 1536 {
		t.Fatalf("a load the primary carries: the backup sent %d B in 1.5 s, want only keepalives", b)
	}

	gap.Store(int64(2 * time.Millisecond)) // 500 a second: the primary is saturated
	time.Sleep(tierJoinAfter + 500*time.Millisecond)
	b := backup(time.Second)
	t.Logf("tier %d beside a saturated primary (flow asked for: %v): %d B/s", tier, asked, b)
	if !asked {
		if b > 1536 {
			t.Fatalf("a flood the client did not ask for spilled onto tier %d: %d B in 1 s", tier, b)
		}
		return
	}
	if tier >= backupTier {
		if b > 1536 {
			t.Fatalf("backup tier %d joined for saturation: %d B in 1 s", tier, b)
		}
		return
	}
	if b < 20000 {
		t.Fatalf("saturated primary: tier %d sent %d B in 1 s, want it joined (≥ 20 kB)", tier, b)
	}

	gap.Store(int64(time.Second)) // light again: the tier leaves after tierLeaveAfter
	time.Sleep(tierLeaveAfter + time.Second)
	if b := backup(time.Second); b > 1536 {
		t.Fatalf("%v after the load fell tier %d still sent %d B/s", tierLeaveAfter+time.Second, tier, b)
	}
}
