//go:build linux

package linkemu

import (
	"encoding/binary"
	"math"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braid-vpn/braid/netns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Every test below builds its own topology:
//
//	h1 [eth0 198.18.0.1/24] ── veth ── [a] node [b] ── veth ── [eth0 198.18.0.2/24] h2
//
// The link node has no addresses; the Link forwards between a and b. IPv6
// is off everywhere and the hosts know each other's MAC statically, so the
// only frames crossing the link are the test's own: the emulator's counters
// and loss decisions can be compared frame for frame with what the hosts
// sent.

var (
	ip1 = netip.MustParseAddr("198.18.0.1")
	ip2 = netip.MustParseAddr("198.18.0.2")
)

const udpOverhead = 14 + 20 + 8 // Ethernet + IPv4 + UDP headers around a payload

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and AF_PACKET sockets")
	}
}

type topo struct {
	h1, node, h2 *netns.Namespace
}

func newNS(t testing.TB) *netns.Namespace {
	t.Helper()
	netns.Cleanup("braid-emu") // what a killed run left
	ns, err := netns.New("braid-emu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	for _, k := range []string{"net.ipv6.conf.default.disable_ipv6", "net.ipv6.conf.all.disable_ipv6"} {
		if err := ns.SetSysctl(k, "1"); err != nil {
			t.Logf("(ipv6 sysctl: %v)", err)
		}
	}
	return ns
}

func newTopo(t testing.TB) *topo {
	t.Helper()
	needRoot(t)
	tp := &topo{h1: newNS(t), node: newNS(t), h2: newNS(t)}
	must(t, netns.AddVeth(
		netns.VethEnd{NS: tp.h1, Name: "eth0", Addrs: []netip.Prefix{netip.PrefixFrom(ip1, 24)}},
		netns.VethEnd{NS: tp.node, Name: "a"}))
	must(t, netns.AddVeth(
		netns.VethEnd{NS: tp.node, Name: "b"},
		netns.VethEnd{NS: tp.h2, Name: "eth0", Addrs: []netip.Prefix{netip.PrefixFrom(ip2, 24)}}))
	must(t, DisableOffloads(tp.h1, "eth0"))
	must(t, DisableOffloads(tp.h2, "eth0"))
	mac := func(ns *netns.Namespace) net.HardwareAddr {
		l, err := ns.Netlink().LinkByName("eth0")
		must(t, err)
		return l.Attrs().HardwareAddr
	}
	neigh := func(ns *netns.Namespace, ip netip.Addr, hw net.HardwareAddr) {
		l, err := ns.Netlink().LinkByName("eth0")
		must(t, err)
		must(t, ns.Netlink().NeighAdd(&netlink.Neigh{
			LinkIndex: l.Attrs().Index, Family: unix.AF_INET, State: netlink.NUD_PERMANENT,
			IP: ip.AsSlice(), HardwareAddr: hw,
		}))
	}
	neigh(tp.h1, ip2, mac(tp.h2))
	neigh(tp.h2, ip1, mac(tp.h1))
	return tp
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (tp *topo) start(t *testing.T, ab, ba Shape) *Link {
	t.Helper()
	l, err := Start(Config{NS: tp.node, A: "a", B: "b", AtoB: ab, BtoA: ba})
	must(t, err)
	t.Cleanup(func() { l.Close() }) // runs before the namespaces close
	return l
}

// ---- UDP helpers ----

func listenUDP(t testing.TB, ns *netns.Namespace, ip netip.Addr, port uint16) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	must(t, ns.Do(func() error {
		var err error
		c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, port)))
		if err != nil {
			return err
		}
		rc, _ := c.SyscallConn()
		return rc.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 8<<20)
		})
	}))
	t.Cleanup(func() { c.Close() })
	return c
}

// arrival is one received datagram: its sequence number, when the sender
// stamped it and when it was read (both on the process's monotonic clock).
type arrival struct {
	seq      uint64
	sent, at time.Duration
	size     int
}

// collector reads datagrams into a preallocated slice until stopped.
type collector struct {
	c    *net.UDPConn
	got  []arrival
	done chan struct{}
}

func collect(c *net.UDPConn, capacity int) *collector {
	c.SetReadDeadline(time.Time{}) // a previous collector's stop set one
	k := &collector{c: c, got: make([]arrival, 0, capacity), done: make(chan struct{})}
	go func() {
		defer close(k.done)
		buf := make([]byte, 65536)
		for {
			n, _, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			now := monoNow()
			if n >= 16 && len(k.got) < cap(k.got) {
				k.got = append(k.got, arrival{
					seq:  binary.BigEndian.Uint64(buf),
					sent: time.Duration(binary.BigEndian.Uint64(buf[8:])),
					at:   now, size: n,
				})
			}
		}
	}()
	return k
}

// stop waits for the link to drain for linger, then ends the collector.
func (k *collector) stop(linger time.Duration) []arrival {
	time.Sleep(linger)
	k.c.SetReadDeadline(time.Now())
	<-k.done
	return k.got
}

// sendPaced sends n datagrams of size bytes at pps datagrams per second,
// starting at sequence number first, in small bursts (Go sleeps in
// millisecond steps). It does not allocate per datagram.
func sendPaced(t *testing.T, c *net.UDPConn, dst netip.AddrPort, first uint64, n, size int, pps float64) {
	t.Helper()
	buf := make([]byte, size)
	start := monoNow()
	for i := 0; i < n; {
		due := int(float64(monoNow()-start) / float64(time.Second) * pps)
		for ; i < n && i <= due; i++ {
			binary.BigEndian.PutUint64(buf, first+uint64(i))
			binary.BigEndian.PutUint64(buf[8:], uint64(monoNow()))
			if _, err := c.WriteToUDPAddrPort(buf, dst); err != nil {
				t.Errorf("send: %v", err)
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// ---- tests ----

func TestStartErrors(t *testing.T) {
	if _, err := Start(Config{A: "a", B: "b"}); err == nil {
		t.Error("nil namespace accepted")
	}
	needRoot(t)
	ns := newNS(t)
	must(t, netns.AddVeth(netns.VethEnd{NS: ns, Name: "a"}, netns.VethEnd{NS: ns, Name: "b"}))
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{NS: ns, A: "a", B: "nope"}, `"nope"`},
		{Config{NS: ns, A: "a", B: "a"}, "two different interfaces"},
		{Config{NS: ns, A: "a", B: "b", AtoB: Shape{Loss: GELoss(2, 0, 0, 0)}}, "A→B"},
		{Config{NS: ns, A: "a", B: "b", BtoA: Shape{Delay: -1}}, "B→A"},
	} {
		l, err := Start(c.cfg)
		if err == nil {
			l.Close()
			t.Errorf("%+v: no error", c.cfg)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %q does not mention %s", err, c.want)
		}
	}
	// A failed Start leaves no socket behind: a good one still works and
	// closes cleanly, twice.
	l, err := Start(Config{NS: ns, A: "a", B: "b"})
	must(t, err)
	must(t, l.Close())
	must(t, l.Close())
	if err := l.socks[0].rc.Control(func(uintptr) {}); err == nil {
		t.Error("socket still open after Close")
	}
}

func TestOffloads(t *testing.T) {
	needRoot(t)
	ns := newNS(t)
	must(t, netns.AddVeth(netns.VethEnd{NS: ns, Name: "x"}, netns.VethEnd{NS: ns, Name: "y"}))
	on, err := ActiveOffloads(ns, "x")
	must(t, err)
	t.Logf("veth offloads on by default: %v", on)
	if len(on) == 0 {
		t.Fatal("a fresh veth reports no offloads: the feature check cannot see anything")
	}
	must(t, DisableOffloads(ns, "x"))
	if on, _ := ActiveOffloads(ns, "x"); len(on) != 0 {
		t.Errorf("still on after DisableOffloads: %v", on)
	}
	l, err := Start(Config{NS: ns, A: "x", B: "y"})
	must(t, err)
	defer l.Close()
	if on, _ := ActiveOffloads(ns, "y"); len(on) != 0 {
		t.Errorf("Start left offloads on its interface: %v", on)
	}
}

// TestRate saturates both directions with UDP (1.3× the rate, so the queue
// stays full) and measures the delivered rate at each receiver, counting
// whole Ethernet frames, over the last 1.75 s of 2 s.
func TestRate(t *testing.T) {
	tp := newTopo(t)
	const payload = 1200
	frame := payload + udpOverhead
	rates := [2]uint64{10_000_000, 4_000_000}
	l := tp.start(t,
		Shape{Rate: rates[0], QueuePackets: 64},
		Shape{Rate: rates[1], QueuePackets: 64})
	c1 := listenUDP(t, tp.h1, ip1, 5001)
	c2 := listenUDP(t, tp.h2, ip2, 5002)
	dur := 2 * time.Second
	k2, k1 := collect(c2, 10000), collect(c1, 10000)
	var wg sync.WaitGroup
	for i, c := range []struct {
		from *net.UDPConn
		to   netip.AddrPort
	}{{c1, netip.AddrPortFrom(ip2, 5002)}, {c2, netip.AddrPortFrom(ip1, 5001)}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pps := 1.3 * float64(rates[i]) / float64(8*frame)
			sendPaced(t, c.from, c.to, 0, int(pps*dur.Seconds()), payload, pps)
		}()
	}
	wg.Wait()
	got := [2][]arrival{k2.stop(100 * time.Millisecond), k1.stop(0)}
	for d := AtoB; d <= BtoA; d++ {
		a := got[d]
		if len(a) < 100 {
			t.Fatalf("%v: only %d datagrams", d, len(a))
		}
		for i := 1; i < len(a); i++ {
			if a[i].seq <= a[i-1].seq {
				t.Fatalf("%v: seq %d after %d: reordered without jitter", d, a[i].seq, a[i-1].seq)
			}
		}
		// Skip the first 250 ms (queue filling), then rate = bits after
		// the first datagram of the window / time between first and last.
		w := 0
		for w < len(a) && a[w].at-a[0].at < 250*time.Millisecond {
			w++
		}
		win := a[w:]
		bits := float64(8 * frame * (len(win) - 1))
		rate := bits / (win[len(win)-1].at - win[0].at).Seconds()
		st := l.Stats(d)
		t.Logf("%v: set %.3f Mbit/s, delivered %.4f Mbit/s (%+.3f%%) over %d frames; forwarded %d, queue drops %d, mean frame %d B",
			d, float64(rates[d])/1e6, rate/1e6, 100*(rate/float64(rates[d])-1), len(win), st.Forwarded, st.DroppedQueue, st.BytesForwarded/max(st.Forwarded, 1))
		if math.Abs(rate/float64(rates[d])-1) > 0.02 {
			t.Errorf("%v: delivered %.4f Mbit/s, want %.3f ± 2%%", d, rate/1e6, float64(rates[d])/1e6)
		}
		if st.DroppedQueue == 0 {
			t.Errorf("%v: no queue drops: the link was not saturated, the measurement shows the offered rate", d)
		}
		if st.BytesForwarded != uint64(frame)*st.Forwarded {
			t.Errorf("%v: forwarded %d B in %d frames, not %d B each: other traffic crossed", d, st.BytesForwarded, st.Forwarded, frame)
		}
	}
}

// probeDelay sends n small probes h1→h2 every 5 ms and returns the mean
// one-way delay (receive time minus send stamp, one clock).
func probeDelay(t *testing.T, src, dstConn *net.UDPConn, dst netip.AddrPort, first uint64, n int) (time.Duration, int) {
	k := collect(dstConn, n)
	buf := make([]byte, 64)
	for i := 0; i < n; i++ {
		binary.BigEndian.PutUint64(buf, first+uint64(i))
		binary.BigEndian.PutUint64(buf[8:], uint64(monoNow()))
		if _, err := src.WriteToUDPAddrPort(buf, dst); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	got := k.stop(300 * time.Millisecond)
	var sum time.Duration
	seen := make(map[uint64]bool)
	for _, a := range got {
		sum += a.at - a.sent
		seen[a.seq] = true
	}
	for i := 0; i < n; i++ {
		if !seen[first+uint64(i)] {
			t.Logf("probe %d (#%d of this round) missing", first+uint64(i), i)
		}
	}
	if len(got) == 0 {
		t.Fatal("no probe arrived")
	}
	return sum / time.Duration(len(got)), len(got)
}

// TestDelay: mean added one-way delay of low-rate probes at 10 Mbit/s and
// 20 ms, minus the unshaped baseline through the same emulator, must be
// within 0.2 ms of 20 ms plus the probe's serialization time
// (106-byte frame at 10 Mbit/s = 84.8 µs), plus the emulator's own
// lateness measured over the same probes (wake-ups on a busy 2-core
// machine); the delay it schedules must be exact to 20 µs.
func TestDelay(t *testing.T) {
	tp := newTopo(t)
	l := tp.start(t, Shape{}, Shape{})
	c1 := listenUDP(t, tp.h1, ip1, 6001)
	c2 := listenUDP(t, tp.h2, ip2, 6002)
	dst := netip.AddrPortFrom(ip2, 6002)
	// Warm-up: in a run of the whole suite the very first frame after the links
	// came up was seen missing at the receiver once in a while (never in the
	// emulator's counters); it is not what this test measures.
	probeDelay(t, c1, c2, dst, 1_000_000, 5)
	const n = 150
	base, nb := probeDelay(t, c1, c2, dst, 0, n)
	before, lateBefore := l.Stats(AtoB).Delay, l.Stats(AtoB).Lateness

	must(t, l.SetShape(AtoB, Shape{Rate: 10_000_000, Delay: 20 * ms}))
	shaped, ns := probeDelay(t, c1, c2, dst, n, n)
	after, lateAfter := l.Stats(AtoB).Delay, l.Stats(AtoB).Lateness

	ser := time.Duration(float64((64+udpOverhead)*8) / 10e6 * float64(time.Second))
	want := 20*ms + ser
	added := shaped - base
	own := (after.Sum - before.Sum) / time.Duration(after.Count-before.Count)
	late := (lateAfter.Sum - lateBefore.Sum) / time.Duration(lateAfter.Count-lateBefore.Count)
	scheduled := own - late
	t.Logf("baseline %v (%d probes), shaped %v (%d probes): added %v, want %v (error %v); emulator's own mean %v (error %v), of which late %v (max so far %v)",
		base, nb, shaped, ns, added, want, added-want, own, own-want, late, lateAfter.Max)
	// A lossless link: at most one probe in a hundred may go missing in the hosts'
	// stacks (counted above by name); more means the emulator loses frames.
	if nb < n-n/100 || ns < n-n/100 {
		t.Errorf("lost probes: %d and %d of %d arrived; emulator %+v", nb, ns, n, l.Stats(AtoB))
	}
	if d := added - want - late; d > 200*time.Microsecond || d < -200*time.Microsecond {
		t.Errorf("mean added delay %v, want %v + %v late ± 0.2ms", added, want, late)
	}
	if d := scheduled - want; d > 20*time.Microsecond || d < -20*time.Microsecond {
		t.Errorf("emulator's scheduled mean delay %v, want %v ± 20µs", scheduled, want)
	}
}

// TestGELoss sends 20000 datagrams through netem's `loss gemodel 1% 30% 50%
// 0%` and checks (a) the emulator saw exactly them, (b) exactly the frames
// a reference chain with the same seed drops are missing, and (c) the loss
// rate is within four standard deviations of the stationary 1.613%.
func TestGELoss(t *testing.T) {
	tp := newTopo(t)
	loss := GELoss(0.01, 0.3, 0.5, 0)
	const seed = 2024
	l := tp.start(t, Shape{Loss: loss, Seed: seed}, Shape{})
	c1 := listenUDP(t, tp.h1, ip1, 7001)
	c2 := listenUDP(t, tp.h2, ip2, 7002)
	const n = 20000
	k := collect(c2, n)
	sendPaced(t, c1, netip.AddrPortFrom(ip2, 7002), 0, n, 32, 20000)
	got := k.stop(100 * time.Millisecond)

	st := l.Stats(AtoB)
	if st.FramesIn != n {
		t.Fatalf("emulator saw %d frames, sent %d", st.FramesIn, n)
	}
	ref := lossChain{Loss: loss}
	rng := newRNG(seed, streamLoss, AtoB)
	wantKept := make([]bool, n)
	drops := 0
	for i := range wantKept {
		wantKept[i] = !ref.drop(rng)
		if !wantKept[i] {
			drops++
		}
	}
	gotKept := make([]bool, n)
	for _, a := range got {
		if a.seq < n {
			gotKept[a.seq] = true
		}
	}
	mismatch := 0
	for i := range gotKept {
		if gotKept[i] != wantKept[i] {
			if mismatch < 5 {
				t.Errorf("datagram %d: delivered=%v, reference chain says %v", i, gotKept[i], wantKept[i])
			}
			mismatch++
		}
	}
	rate := 1 - float64(len(got))/n
	sd := math.Sqrt(geVariance(loss) / n)
	t.Logf("sent %d, delivered %d, emulator drops %d, reference drops %d, mismatches %d; loss %.4f, stationary %.4f ± %.4f (4σ)",
		n, len(got), st.DroppedLoss, drops, mismatch, rate, loss.MeanLoss(), 4*sd)
	if st.DroppedLoss != uint64(drops) {
		t.Errorf("emulator dropped %d, reference %d", st.DroppedLoss, drops)
	}
	if math.Abs(rate-loss.MeanLoss()) > 4*sd {
		t.Errorf("loss %.4f, want %.4f ± %.4f", rate, loss.MeanLoss(), 4*sd)
	}
}

// TestOrderAndAllocs pushes bursts through a 10 Mbit/s, 5 ms link with a
// queue deep enough to drop nothing: every datagram must arrive, in order.
// The second round runs with the frame pool already grown and must not
// allocate per frame anywhere in the process (sender and receiver here do
// not allocate either).
func TestOrderAndAllocs(t *testing.T) {
	tp := newTopo(t)
	l := tp.start(t, Shape{Rate: 10_000_000, Delay: 5 * ms, QueuePackets: 2000}, Shape{})
	c1 := listenUDP(t, tp.h1, ip1, 8001)
	c2 := listenUDP(t, tp.h2, ip2, 8002)
	const n, size = 1200, 1000
	var ms0, ms1 runtime.MemStats
	for round := 0; round < 2; round++ {
		k := collect(c2, n)
		runtime.GC()
		runtime.ReadMemStats(&ms0)
		sendPaced(t, c1, netip.AddrPortFrom(ip2, 8002), uint64(round*n), n, size, 2000) // ~17 Mbit/s offered
		time.Sleep(time.Duration(n*(size+udpOverhead)*8/10) * time.Microsecond / 2)     // let the queue drain
		runtime.ReadMemStats(&ms1)
		got := k.stop(50 * time.Millisecond)
		if len(got) != n {
			t.Fatalf("round %d: %d of %d delivered (stats %+v)", round, len(got), n, l.Stats(AtoB))
		}
		for i, a := range got {
			if a.seq != uint64(round*n+i) {
				t.Fatalf("round %d: position %d holds datagram %d: order not preserved", round, i, a.seq)
			}
		}
		perFrame := float64(ms1.Mallocs-ms0.Mallocs) / n
		t.Logf("round %d: %d delivered in order; %d heap allocations in the process (%.3f per frame)", round, n, ms1.Mallocs-ms0.Mallocs, perFrame)
		if round == 1 && perFrame > 0.05 {
			t.Errorf("%.3f allocations per frame in steady state", perFrame)
		}
	}
}

// TestJitter: ±4 ms uniform jitter on 10 ms reorders back-to-back frames
// (as netem does) and keeps every added delay in [6 ms, 14 ms] plus the
// emulator's lateness.
func TestJitter(t *testing.T) {
	tp := newTopo(t)
	l := tp.start(t, Shape{Delay: 10 * ms, Jitter: 4 * ms, Seed: 5}, Shape{})
	c1 := listenUDP(t, tp.h1, ip1, 9001)
	c2 := listenUDP(t, tp.h2, ip2, 9002)
	const n = 1000
	k := collect(c2, n)
	sendPaced(t, c1, netip.AddrPortFrom(ip2, 9002), 0, n, 64, 5000)
	got := k.stop(50 * time.Millisecond)
	if len(got) != n {
		t.Fatalf("%d of %d delivered", len(got), n)
	}
	late, top := 0, uint64(0)
	for i, a := range got {
		if i > 0 && a.seq < top {
			late++
		}
		top = max(top, a.seq)
	}
	all := l.Stats(AtoB)
	st, lt := all.Delay, all.Lateness
	// Each frame's delay is its scheduled delay plus its lateness, so the
	// scheduled (model) delays have mean (ΣDelay-ΣLateness)/n whatever the
	// machine's load, and none exceeds Max-0 while Max ≤ 14 ms + max lateness.
	sched := (st.Sum - lt.Sum) / time.Duration(st.Count)
	tol := time.Duration(4 * float64(4*ms) / math.Sqrt(3) / math.Sqrt(n)) // 4σ of a uniform ±4 ms mean
	t.Logf("%d of %d datagrams overtaken; emulator delay min %v mean %v max %v; scheduled mean %v (want 10ms ± %v); lateness mean %v p99 %v max %v",
		late, n, st.Min, st.Mean, st.Max, sched, tol, lt.Mean, lt.P99, lt.Max)
	if late == 0 {
		t.Error("no reordering with 4 ms jitter on back-to-back frames")
	}
	if st.Count != n {
		t.Errorf("emulator forwarded %d frames, want %d", st.Count, n)
	}
	if st.Min < 6*ms {
		t.Errorf("a frame left after %v, below delay-jitter = 6ms", st.Min)
	}
	if st.Max > 14*ms+lt.Max {
		t.Errorf("a frame took %v, more than delay+jitter = 14ms plus the worst lateness %v", st.Max, lt.Max)
	}
	if d := sched - 10*ms; d < -tol || d > tol {
		t.Errorf("mean scheduled delay %v, want 10ms ± %v", sched, tol)
	}
}

// The clock the timer is armed with must be the kernel's CLOCK_MONOTONIC:
// a clock_gettime reading must fall between two readings of the
// emulator's clock taken around it (best of a few tries, in case the
// thread is preempted in between).
func TestClockBase(t *testing.T) {
	best := time.Duration(math.MaxInt64)
	for i := 0; i < 20; i++ {
		var ts unix.Timespec
		a := monoNow()
		must(t, unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts))
		b := monoNow()
		k := time.Duration(ts.Nano() - clockBase)
		off := time.Duration(0)
		if k < a {
			off = a - k
		} else if k > b {
			off = k - b
		}
		best = min(best, off+(b-a))
	}
	if best > 20*time.Microsecond {
		t.Errorf("CLOCK_MONOTONIC and the emulator's clock disagree by up to %v", best)
	}
}

// BenchmarkLinkForward measures the live forwarding path: 1000-byte UDP
// datagrams h1→h2 through an unshaped Link, at most 256 in flight so no
// buffer overflows. ns/op is per forwarded datagram; allocs/op counts the
// whole process (sender and receiver here do not allocate).
func BenchmarkLinkForward(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: creates network namespaces and AF_PACKET sockets")
	}
	tp := newTopo(b)
	l, err := Start(Config{NS: tp.node, A: "a", B: "b"})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	c1 := listenUDP(b, tp.h1, ip1, 4001)
	c2 := listenUDP(b, tp.h2, ip2, 4002)
	var got atomic.Int64
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := c2.ReadFromUDPAddrPort(buf); err != nil {
				return
			}
			got.Add(1)
		}
	}()
	dst := netip.AddrPortFrom(ip2, 4002)
	buf := make([]byte, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	var lost int64 // written off: the window waits for no datagram that is gone
	for i := 0; i < b.N; i++ {
		for since := time.Now(); int64(i)-got.Load()-lost >= 256; runtime.Gosched() {
			if time.Since(since) > 100*time.Millisecond {
				lost = int64(i) - got.Load()
			}
		}
		if _, err := c1.WriteToUDPAddrPort(buf, dst); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Second)
	for got.Load() < int64(b.N) && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	b.StopTimer()
	st := l.Stats(AtoB)
	if lost := int64(b.N) - got.Load(); lost > 0 {
		b.Logf("%d of %d lost; emulator: in %d, forwarded %d, send errors %d", lost, b.N, st.FramesIn, st.Forwarded, st.SendErrors)
	}
	b.ReportMetric(float64(st.Lateness.Mean)/1e3, "µs-late")
}
