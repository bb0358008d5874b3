package tunnel

import (
	"fmt"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/aqm"
	"github.com/braid-vpn/braid/cc"
	"github.com/braid-vpn/braid/conn/conntest"
	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/fec"
	"github.com/braid-vpn/braid/internal/testenv"
	"github.com/braid-vpn/braid/path"
	"github.com/braid-vpn/braid/recovery"
)

// setDelays gives client A's two paths the one-way delays d1 (198.18.1.x) and d2
// (198.18.2.x), both directions.
func (r *rig) setDelays(d1, d2 time.Duration) {
	r.net.SetLink(cliAddr1, srvAddr1.Addr(), conntest.LinkOptions{Delay: d1})
	r.net.SetLink(srvAddr1.Addr(), cliAddr1, conntest.LinkOptions{Delay: d1})
	r.net.SetLink(cliAddr2, srvAddr2.Addr(), conntest.LinkOptions{Delay: d2})
	r.net.SetLink(srvAddr2.Addr(), cliAddr2, conntest.LinkOptions{Delay: d2})
}

// pathTx returns the bytes client A sent on each of its two data paths, by local
// address.
func pathTx(st control.Status) (p1, p2 uint64) {
	for _, pa := range st.Peers[0].Paths {
		lp, err := netip.ParseAddrPort(pa.Local)
		if err != nil {
			continue
		}
		switch lp.Addr() {
		case cliAddr1:
			p1 += pa.TxBytes
		case cliAddr2:
			p2 += pa.TxBytes
		}
	}
	return
}

// burstUp injects n packets of size bytes at client A at once and returns how
// many the server delivered within wait.
func (r *rig) burstUp(n, size int, wait time.Duration) int {
	for i := 0; i < n; i++ {
		payload := make([]byte, size)
		copy(payload, fmt.Appendf(nil, "b%d", i))
		r.cliATun.Inject(udp4(inCliA, inSrv, 4000, 5000, payload))
	}
	got := 0
	deadline := time.After(wait)
	for {
		select {
		case <-r.srvTun.Outbound():
			got++
			if got == n {
				return got
			}
		case <-deadline:
			return got
		}
	}
}

// A window that is slow to open carries proportionally less. Round robin splits
// 50/50 when nothing else matters; with congestion control the path whose acks
// come back 20 times sooner (4 ms vs 80 ms RTT) opens its window 20 times faster,
// and a burst of 600 packets mostly takes it. The same burst without a controller
// is the control: there the split stays even.
func TestEngineCongestionGatesPaths(t *testing.T) {
	testenv.SkipIfEmulated(t, "times wall-clock behaviour: a 600-packet burst must all arrive within 5 s, and an emulated CPU's queueing delay trips CoDel's 5 ms target (a drop seen under qemu-mips on a busy host)")
	share := func(congestion string) (float64, *rig) {
		r := newRig(t, rigOpts{params: Params{Scheduler: "roundrobin", Congestion: congestion}})
		r.setDelays(2*time.Millisecond, 40*time.Millisecond)
		waitUsable(t, r.cliA, "server", 2)
		waitUsable(t, r.srv, "a", 2)
		a0, b0 := pathTx(r.cliA.Status())
		if got := r.burstUp(600, 1000, 5*time.Second); got != 600 {
			t.Fatalf("%s: %d of 600 packets delivered; drops %v; server drops %v; server tun %+v", congestion, got, r.cliA.Drops(), r.srv.Drops(), r.srvTun.Stats())
		}
		a1, b1 := pathTx(r.cliA.Status())
		return float64(a1-a0) / float64(a1-a0+b1-b0), r
	}
	s, r := share("reno")
	t.Logf("reno: %.2f of the burst on the 4 ms path", s)
	if s < 0.8 {
		t.Errorf("with congestion control the short path carried %.2f of the burst, want ≥ 0.8", s)
	}
	// Status shows the windows on both ends (the server took the client's choice).
	for _, e := range []*Engine{r.cliA, r.srv} {
		ps := e.Status().Peers[0]
		if ps.Congestion != "reno" {
			t.Errorf("%s: congestion %q", e.role, ps.Congestion)
		}
		for _, pa := range ps.Paths {
			if pa.CC == nil || pa.CC.CwndBytes <= 0 {
				t.Errorf("%s path %d: no window in status: %+v", e.role, pa.ID, pa.CC)
			}
		}
	}
	s, _ = share("none")
	t.Logf("none: %.2f of the burst on the 4 ms path", s)
	if s < 0.4 || s > 0.6 {
		t.Errorf("round robin without congestion control carried %.2f on one path, want ≈ 0.5", s)
	}
}

// When every window is full packets wait, but only so many (CCQueuePackets) and
// only so long (CCQueueDelay); the rest are dropped and counted, and every packet
// is accounted for: delivered, or dropped for one of the two reasons.
func TestEngineCongestionQueueBounds(t *testing.T) {
	r := newRig(t, rigOpts{params: Params{Congestion: "lia"}, tunables: func(tn *Tunables) {
		tn.CC = cc.Config{InitialWindow: 2, MaxWindow: 2}
		tn.CCQueuePackets = 32
		tn.CCQueueDelay = 60 * time.Millisecond
	}})
	// 100 ms round trips: two windows of 2 packets move 40 packets a second.
	r.setDelays(50*time.Millisecond, 50*time.Millisecond)
	waitUsable(t, r.cliA, "server", 2)
	const n = 400
	got := r.burstUp(n, 1000, 700*time.Millisecond)
	time.Sleep(200 * time.Millisecond) // let the queue empty, by sending or by age
	d := r.cliA.Drops()
	full, expired := d["cc_queue_full"], d["cc_queue_expired"]
	t.Logf("delivered %d, dropped %d (queue full) + %d (waited too long)", got, full, expired)
	// At most 32 wait; the 4 in flight and the 32 queued are all that can pass the
	// burst, the next few as acks open room.
	if full < n-100 {
		t.Errorf("only %d dropped for a full queue, want most of %d", full, n)
	}
	// 32 packets at 4 per 100 ms take 800 ms: most expire after 60 ms.
	if expired == 0 {
		t.Errorf("nothing expired from the queue")
	}
	if uint64(got)+full+expired != n {
		t.Errorf("delivered %d + dropped %d + %d != %d sent", got, full, expired, n)
	}
	if q := r.cliA.Status().Peers[0].CCQueued; q != 0 {
		t.Errorf("%d packets still queued", q)
	}
	// The status shows the drops like any other.
	st := r.cliA.Status()
	if st.Counters[control.DropPrefix+"cc_queue_full"] != full {
		t.Errorf("status counters %v", st.Counters)
	}
}

// An unknown algorithm is an error that names it and lists the valid ones.
func TestEngineUnknownCongestion(t *testing.T) {
	_, err := New(Config{Role: Client, PrivateKey: mustKey(t), TUN: newNullTUN(), Listen: conntest.NewNetwork().ListenOptions,
		ServerPublicKey: mustKey(t).Public(), Servers: []netip.AddrPort{srvAddr1}, Params: Params{Congestion: "bbr"}})
	if err == nil || !strings.Contains(err.Error(), `"bbr"`) || !strings.Contains(err.Error(), "valid: "+strings.Join(cc.Names(), ", ")) {
		t.Fatalf("err = %v, want one naming \"bbr\" and listing %v", err, cc.Names())
	}
}

// An overfull window (more in flight than it allows) is no room at all: a
// negative CwndRoom would read as "no controller" to the schedulers and let the
// path take everything.
func TestOverfullWindowHasNoRoom(t *testing.T) {
	bp := newBenchPairCC(t, 1, "reno")
	p := bp.cli.server
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.paths[0]
	for ps.sender.InFlight() <= ps.cc.Window()+10000 {
		seq := ps.sender.NextSeq()
		ps.sender.OnSent(seq, 1400, true, now)
	}
	if room := p.roomOf(ps, ps.sender.InFlight(), now); room != 0 {
		t.Fatalf("room %d with %d in flight over a %d-byte window, want 0", room, ps.sender.InFlight(), ps.cc.Window())
	}
	p.refreshInfos(now)
	if r := p.infos[0].CwndRoom; r != 0 {
		t.Fatalf("scheduler sees CwndRoom %d, want 0", r)
	}
}

// sharedLinkPeer returns a "rate" pair whose client's peer is locked, with three paths: b
// shares a's access link, c has its own; leads are elected.
func sharedLinkPeer(t *testing.T) (bp *benchPair, a, b, c *pathState, now time.Time) {
	t.Helper()
	bp = newBenchPairCC(t, 3, "rate")
	p := bp.cli.server
	now = time.Now()
	p.mu.Lock()
	a, b, c = p.paths[0], p.paths[1], p.paths[2]
	b.link = a.link
	if c.link == a.link {
		p.mu.Unlock()
		t.Fatal("test setup: c on a's link")
	}
	p.electLeads(now)
	return bp, a, b, c, now
}

// With "rate", of the paths that cross one access link only one, the lead,
// carries data; the others stand by (room 0) until it is unusable. Every
// path the scheduler could have used but did not is marked app-limited after a
// direct send, so its delivery rate measures no spare capacity as its own.
func TestRateOnePathPerLink(t *testing.T) {
	bp, a, b, c, now := sharedLinkPeer(t)
	p := bp.cli.server
	defer p.mu.Unlock()
	if a.id >= b.id {
		t.Fatalf("path ids %d, %d: want the first configured first", a.id, b.id)
	}
	if r := p.roomOf(a, 0, now); r <= 0 {
		t.Fatalf("first path of the link: room %d, want > 0", r)
	}
	if r := p.roomOf(b, 0, now); r != 0 {
		t.Fatalf("second path of the link: room %d, want 0 (standby)", r)
	}
	if r := p.roomOf(c, 0, now); r <= 0 {
		t.Fatalf("path on its own link: room %d, want > 0", r)
	}
	a.validated = false
	p.electLeads(now)
	if r := p.roomOf(b, 0, now); r <= 0 {
		t.Fatalf("with the first path unusable the standby has room %d, want > 0", r)
	}
	a.validated = true
	p.electLeads(now)
	if r := p.roomOf(a, 0, now); r != 0 {
		t.Fatalf("a back: room %d, want 0 (b keeps the lead at an equal min RTT)", r)
	}

	// A direct send with nothing queued marks every path with room, picked or not.
	// Fresh Senders: the handshake's probes into empty pipes marked them already.
	for _, ps := range []*pathState{a, b, c} {
		ps.sender = path.NewSender(p.e.tn.Path, now.Add(-time.Second))
		ps.sender.OnSent(1, 100, true, now.Add(-50*time.Millisecond))
		ps.sender.OnAck(path.Ack{Largest: 1}, now) // first rate interval opens unmarked
		if !ps.sender.Usable() || ps.sender.AppLimited() {
			t.Fatalf("test setup: usable %v, app-limited %v; want a usable path, unmarked", ps.sender.Usable(), ps.sender.AppLimited())
		}
	}
	p.mu.Unlock()
	bp.send(now)
	p.mu.Lock()
	if !b.sender.AppLimited() || !c.sender.AppLimited() {
		t.Errorf("after a direct send: app-limited b=%v c=%v, want both (room left)", b.sender.AppLimited(), c.sender.AppLimited())
	}
}

// A Degraded lead gives the lead to a healthy path of its link: the schedulers
// use a Degraded path only when no healthy one is usable, and a healthy one on
// standby has no room — the link would carry nothing.
func TestRateDegradedLeadYields(t *testing.T) {
	bp := newBenchPairCC(t, 2, "rate")
	p := bp.cli.server
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	a, b := p.paths[0], p.paths[1]
	b.link = a.link
	p.electLeads(now)
	if p.roomOf(a, 0, now) <= 0 || p.roomOf(b, 0, now) != 0 {
		t.Fatal("test setup: a should lead")
	}
	// a loses every other packet: Degraded.
	s := a.sender
	at := now
	for i := 0; i < 200 && s.State() != path.Degraded; i++ {
		at = at.Add(time.Millisecond)
		seq := s.NextSeq()
		s.OnSent(seq, 1000, true, at)
		if i%2 == 1 {
			s.OnAck(path.Ack{Largest: seq}, at.Add(time.Millisecond))
		}
		s.OnTimer(at)
	}
	if s.State() != path.Degraded {
		t.Fatalf("test setup: a is %v, want degraded", s.State())
	}
	p.electLeads(at)
	if r := p.roomOf(b, 0, at); r <= 0 {
		t.Fatalf("healthy b beside a Degraded lead: room %d, want > 0", r)
	}
	if r := p.roomOf(a, 0, at); r != 0 {
		t.Fatalf("Degraded a: room %d, want 0 (b leads)", r)
	}
}

// When no path's model has room, a block's repairs still go out, on a path
// that carries data (not a standby path of the same access link); skipped,
// their block's losses would be left to resends.
func TestRepairsWhenWindowsFull(t *testing.T) {
	bp, a, b, c, now := sharedLinkPeer(t)
	p := bp.cli.server
	defer p.mu.Unlock()
	if !p.standby(b) || p.standby(a) || p.standby(c) {
		t.Fatalf("standby a %v b %v c %v, want b only", p.standby(a), p.standby(b), p.standby(c))
	}
	p.refreshInfos(now)
	for i := range p.infos {
		p.infos[i].CwndRoom = 0 // every window full
	}
	seen := map[*pathState]int{}
	for range 6 {
		i := p.nextRepairPath()
		if i < 0 {
			t.Fatal("no path for a repair while every window is full")
		}
		seen[p.infoP[i]]++
	}
	if seen[b] != 0 || seen[a] == 0 || seen[c] == 0 {
		t.Errorf("repairs on a %d, b (standby) %d, c %d: want a and c only", seen[a], seen[b], seen[c])
	}
}

// A lost payload's resend waits for a REBUILT report as long as its block can
// take to close: a TCP packet's 25 ms (plus a tick each side); another flow's
// is resent at once (a real-time packet cannot wait); nothing waits while no
// repairs are sent.
func TestResendWaitByClass(t *testing.T) {
	bp := newBenchPairCC(t, 1, "rate")
	p := bp.cli.server
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rec = recovery.Auto
	p.setFEC(recovery.Auto)
	tcp, udp := make([]byte, 60), make([]byte, 60)
	tcp[0], tcp[9] = 0x45, 6
	udp[0], udp[9] = 0x45, 17
	if w := p.fecWait(tcp); w != 0 {
		t.Fatalf("no repairs: wait %v, want 0", w)
	}
	p.fecEnc.SetRate(fec.FixedRate(32, 2))
	tick := 2 * p.e.tn.Tick
	if w, want := p.fecWait(tcp), fec.DefaultBulkDelay+tick; w != want {
		t.Errorf("TCP: wait %v, want %v", w, want)
	}
	if w := p.fecWait(udp); w != 0 {
		t.Errorf("UDP: wait %v, want 0", w)
	}
}

// The repair-rate controller's cap is on user payload: a full-size repair
// (repair header 11, one run 7, length prefix 2, DATA header 9, the inner
// packet) against a full-size TCP packet's payload (MTU less 40): 1409/1340 at
// the default MTU of 1380.
func TestRepairCost(t *testing.T) {
	if got, want := repairCost(1380), 1409.0/1340; math.Abs(got-want) > 1e-12 {
		t.Errorf("repairCost(1380) = %v, want %v", got, want)
	}
	bp := newBenchPairCC(t, 1, "rate")
	p := bp.cli.server
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setFEC(recovery.Auto)
	if got, want := p.fecCtl.Cost, repairCost(p.e.mtu); got != want || got <= 1 {
		t.Errorf("controller cost %v, want %v (> 1)", got, want)
	}
}

// The queue's CoDel target: the tunables' 20 ms on paths up to 67 ms, 3/10 of
// the SRTT above, and the SRTT less 60 ms above 86 ms.
func TestQueueTarget(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, tc := range []struct{ srtt, want int }{{0, 20}, {40, 20}, {66, 20}, {80, 24}, {86, 26}, {100, 40}, {120, 60}, {200, 140}} {
		if got := queueTarget(ms(20), ms(tc.srtt)); got != ms(tc.want) {
			t.Errorf("SRTT %d ms: target %v, want %d ms", tc.srtt, got, tc.want)
		}
	}
}

// TestQueueFitContending: beside a competitor's standing queue the CoDel target
// is one SRTT and the interval two (a 130 ms path: 130 and 260 ms, where it
// would be 70 and 130 ms otherwise); short paths keep the tunables' floor.
func TestQueueFitContending(t *testing.T) {
	ms := time.Millisecond
	cfg := aqm.Config{Target: 20 * ms, Interval: 100 * ms}
	for _, tc := range []struct {
		srtt             time.Duration
		contending       bool
		target, interval time.Duration
	}{
		{130 * ms, false, 70 * ms, 130 * ms},
		{130 * ms, true, 130 * ms, 260 * ms},
		{30 * ms, false, 20 * ms, 100 * ms},
		{10 * ms, true, 20 * ms, 100 * ms},
		{40 * ms, true, 40 * ms, 100 * ms},
	} {
		target, interval := queueFit(cfg, tc.srtt, tc.contending)
		if target != tc.target || interval != tc.interval {
			t.Errorf("queueFit(SRTT %v, contending %v) = %v, %v; want %v, %v", tc.srtt, tc.contending, target, interval, tc.target, tc.interval)
		}
	}
}

// TestFlowRTTCapsBloatedPath: the queue's CoDel fits to each path's SRTT, but
// not beyond twice its min RTT, so one path whose buffer filled (800 ms over a
// 50 ms path) does not stretch the target and the expiry age for all; a long
// path (170 ms over 160), a path without a min RTT and a path contending with a
// competitor's standing queue (130 ms over 25) keep their SRTT.
func TestFlowRTTCapsBloatedPath(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		srtt, minRTT time.Duration
		contending   bool
		want         time.Duration
	}{
		{800 * ms, 50 * ms, false, 100 * ms},
		{170 * ms, 160 * ms, false, 170 * ms},
		{80 * ms, 0, false, 80 * ms},
		{130 * ms, 25 * ms, true, 130 * ms},
	} {
		if got := flowRTT(tc.srtt, tc.minRTT, tc.contending); got != tc.want {
			t.Errorf("flowRTT(%v, %v, contending %v) = %v, want %v", tc.srtt, tc.minRTT, tc.contending, got, tc.want)
		}
	}
}
