package sched

import (
	"slices"
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

// owdPath is a path with the given relative base one-way delay, extra measured
// queueing and delivery rate.
func owdPath(id int, base, queue time.Duration, rate float64) PathInfo {
	return PathInfo{ID: id, Usable: true, SRTT: 2*base + 20*ms, MinRTT: 2*base + 20*ms,
		BaseOWD: base, OWD: base + queue, Rate: rate, CwndRoom: -1}
}

// burst picks n packets of size bytes at one instant and returns the picks as a
// string of path letters (index 0 = "A", 1 = "B", ...).
func burst(t *testing.T, s Scheduler, paths []PathInfo, n, size int, now time.Time) string {
	t.Helper()
	var sb strings.Builder
	for i := 0; i < n; i++ {
		sb.WriteByte(byte('A' + pick1(t, s, paths, size, now)))
	}
	return sb.String()
}

func TestEDPFBurstUnequalDelays(t *testing.T) {
	// A: OWD 10ms, B: OWD 40ms, both 1.25 MB/s, no queue measured (below 5ms), so
	// both are charged 1.25×1.25 MB/s = 1.5625 MB/s: a 1250-byte packet takes 0.8ms.
	// The k-th packet on A arrives at 10+0.8k ms, the j-th on B at 40+0.8j ms.
	// A wins while 10+0.8k < 40.8, i.e. k ≤ 38 (38th arrives 40.4ms). Then:
	//   39th: A 41.2 vs B 40.8 → B;  40th: A 41.2 vs B 41.6 → A;
	//   41st: A 42.0 vs B 41.6 → B;  42nd: A 42.0 vs B 42.4 → A; ... alternating.
	// (No ties: 0.8(k-j) = 30 has no integer solution.)
	s := mustNew(t, EarliestArrival, Options{})
	paths := []PathInfo{owdPath(0, 10*ms, 0, 1.25e6), owdPath(1, 40*ms, 0, 1.25e6)}
	got := burst(t, s, paths, 50, 1250, t0)
	want := strings.Repeat("A", 38) + strings.Repeat("BA", 6)
	if got != want {
		t.Fatalf("burst:\n got %s\nwant %s", got, want)
	}
	if a := strings.Count(got, "A"); a != 44 {
		t.Fatalf("A carried %d, want 44", a)
	}
	// 100ms later both virtual queues have drained: the short path wins again.
	if got := pick1(t, s, paths, 1250, t0.Add(100*ms)); got != 0 {
		t.Errorf("after idle: picked %d, want 0", got)
	}
	// Only 20ms later A still holds 44×0.8 = 35.2ms of queue (15.2ms left): A's next
	// arrival is 15.2+0.8+10 = 26ms, B's (4.8ms left) 4.8+0.8+40 = 45.6ms → A.
	// 30 ms after the burst: A 5.2+0.8+10 = 16 → A as well; the long path is used
	// only when the short one's queue exceeds the 30ms delay difference.
	s2 := mustNew(t, EarliestArrival, Options{})
	burst(t, s2, paths, 50, 1250, t0)
	if got := pick1(t, s2, paths, 1250, t0.Add(20*ms)); got != 0 {
		t.Errorf("20ms after burst: picked %d, want 0", got)
	}
}

func TestEDPFMeasuredQueue(t *testing.T) {
	// A: base 10ms but 35ms of measured queue (≥ 5ms: no probe gain, 1ms per
	// 1250 B at 1.25 MB/s); B: base 40ms, idle (0.8ms per packet).
	// A's k-th packet: 35 (queue lifts the virtual queue) + k + 10 = 45+k ms.
	// B's j-th: 40+0.8j ms.  B until 40+0.8j > 46 → j ≤ 7; then
	//   A 46 vs B 46.4 → A; A 47 vs B 46.4 → B; A 47 vs B 47.2 → A; A 48 vs B 47.2 → B.
	s := mustNew(t, EarliestArrival, Options{})
	paths := []PathInfo{owdPath(0, 10*ms, 35*ms, 1.25e6), owdPath(1, 40*ms, 0, 1.25e6)}
	if got, want := burst(t, s, paths, 11, 1250, t0), "BBBBBBBABAB"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestEDPFUnequalRates(t *testing.T) {
	// Equal delays (B 0.1ms longer to avoid ties), B four times faster:
	// A 1.25 MB/s → charged 1.5625 MB/s → 0.8ms per 1250 B: arrivals 10+0.8k.
	// B 5 MB/s → charged 6.25 MB/s → 0.2ms: arrivals 10.1+0.2j.
	// Merged: 10.3B 10.5B 10.7B 10.8A 10.9B 11.1B 11.3B 11.5B 11.6A 11.7B 11.9B 12.1B 12.3B 12.4A
	s := mustNew(t, EarliestArrival, Options{})
	paths := []PathInfo{owdPath(0, 10*ms, 0, 1.25e6), owdPath(1, 10*ms+100*time.Microsecond, 0, 5e6)}
	if got, want := burst(t, s, paths, 14, 1250, t0), "BBBABBBBABBBBA"; got != want {
		t.Fatalf("first 14: got %s, want %s", got, want)
	}
	// 50 packets: A's ≤ 18.0ms are k ≤ 10, B's ≤ 18.1ms are j ≤ 40 (10.1+8.0); A's
	// 11th would arrive at 18.8 → 10 on A, 40 on B: the 1:4 rate ratio.
	s = mustNew(t, EarliestArrival, Options{})
	got := burst(t, s, paths, 50, 1250, t0)
	if a, b := strings.Count(got, "A"), strings.Count(got, "B"); a != 10 || b != 40 {
		t.Fatalf("50 packets: A %d B %d, want 10/40 (%s)", a, b, got)
	}
}

func TestEDPFProbeGain(t *testing.T) {
	// Same rate (1 MB/s) and base delay; A shows no queue (probe gain 1.25: 0.8ms per
	// 1000 B), B shows 5ms of queue (≥ ProbeQueue: charged 1ms per packet, and its
	// virtual queue starts at 5ms). A's k-th arrives at 0.8k, B's j-th at 5+j.
	// 100 packets: by 47ms A has 58 (46.4), B 42 (47); next are A 47.2, B 48.
	// With gain 1, A's k-th arrives at k: by 52ms A 52, B 47 (=99), then A 53 and B 53
	// tie → first path (A): 53/47.
	// InitialRate is lowered so that A's measured 1 MB/s is believed (by default an
	// unsaturated path is charged at least InitialRate, 1.25 MB/s).
	paths := []PathInfo{owdPath(0, 0, 0, 1e6), owdPath(1, 0, 5*ms, 1e6)}
	got := burst(t, mustNew(t, EarliestArrival, Options{Config: Config{InitialRate: 1e5}}), paths, 100, 1000, t0)
	if a := strings.Count(got, "A"); a != 58 {
		t.Errorf("with probe gain: A carried %d of 100, want 58", a)
	}
	got = burst(t, mustNew(t, EarliestArrival, Options{Config: Config{ProbeGain: 1, InitialRate: 1e5}}), paths, 100, 1000, t0)
	if a := strings.Count(got, "A"); a != 53 {
		t.Errorf("without probe gain: A carried %d of 100, want 53", a)
	}
}

func TestEDPFUnknownRate(t *testing.T) {
	// Rate 0 is charged InitialRate (1.25 MB/s) like a measured 1.25 MB/s path, so
	// two such paths with equal delays tie on every second packet and alternate.
	s := mustNew(t, EarliestArrival, Options{})
	paths := []PathInfo{owdPath(0, 5*ms, 0, 0), owdPath(1, 5*ms, 0, 1.25e6)}
	if got, want := burst(t, s, paths, 8, 1250, t0), "ABABABAB"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	// A lower configured InitialRate (100 kB/s, charged 125 kB/s with the probe gain:
	// 10ms per 1250 B) makes the unknown path look slow: its first packet would arrive
	// at 5+10 = 15ms, B's j-th at 5+0.8j, so B carries 12 (14.6ms) before A's first
	// beats B's 13th (15.4ms); then B again (A's second would be 25ms).
	s = mustNew(t, EarliestArrival, Options{Config: Config{InitialRate: 100e3}})
	if got, want := burst(t, s, paths, 14, 1250, t0), "BBBBBBBBBBBBAB"; got != want {
		t.Fatalf("low initial rate: got %s, want %s", got, want)
	}
}

func TestEDPFCongestionRoom(t *testing.T) {
	// A: base 0, 125 kB/s (charged 156.25 kB/s: 6.4ms per 1000 B); B: base 10ms,
	// 1.25 MB/s (0.8ms). Without a controller A arrives at 6.4 < 10.8.
	// (InitialRate lowered so A's measured rate is believed despite its empty queue.)
	a := owdPath(0, 0, 0, 125e3)
	b := owdPath(1, 10*ms, 0, 1.25e6)
	low := Options{Config: Config{InitialRate: 1e5}}
	if got := pick1(t, mustNew(t, EarliestArrival, low), []PathInfo{a, b}, 1000, t0); got != 0 {
		t.Fatalf("no controller: picked %d, want 0", got)
	}
	// A's window is full: A is no candidate.
	a.CwndRoom = 999
	b.CwndRoom = 50000
	if got := pick1(t, mustNew(t, EarliestArrival, low), []PathInfo{a, b}, 1000, t0); got != 1 {
		t.Fatalf("full window: picked %d, want 1", got)
	}
	// With controllers the rate charged is capped by cwnd/SRTT. A: measured 125 kB/s,
	// no queue ⇒ ×1.25 = 156.25 kB/s, window 6000 B per 20 ms = 300 kB/s does not bind
	// ⇒ 6.4 ms per 1000 B; B: 1.25 MB/s ×1.25 = 1.5625 MB/s, window 50000 B per 40 ms
	// = 1.25 MB/s binds ⇒ 0.8 ms, base 10 ms. Arrivals: A 6.4, 12.8, 19.2; B 10.8,
	// 11.6, 12.4, 13.2, 14.0, 14.8 → ABBBABBB.
	a.CwndRoom = 6000
	if got, want := burst(t, mustNew(t, EarliestArrival, low), []PathInfo{a, b}, 8, 1000, t0), "ABBBABBB"; got != want {
		t.Fatalf("window caps: got %s, want %s", got, want)
	}
	// A's window 1000 B per 20 ms = 50 kB/s binds ⇒ 20 ms per packet: B carries
	// 10.8 … 19.6 (12 packets) before A's first (20.0) beats B's 13th (20.4).
	a.CwndRoom = 1000
	if got, want := burst(t, mustNew(t, EarliestArrival, low), []PathInfo{a, b}, 13, 1000, t0), "BBBBBBBBBBBBA"; got != want {
		t.Fatalf("small window: got %s, want %s", got, want)
	}
}

func TestEDPFMaxBacklog(t *testing.T) {
	// 10000 packets on a single path queue 8s at 0.8ms each; the predicted wait is
	// capped at 500ms. A second path 400ms longer then wins (0+500+0.8 > 400+0.8);
	// without the cap A would be predicted at ~8s — also B, so check the cap with a
	// path at 600ms: capped A (500.8) still beats it.
	s := mustNew(t, EarliestArrival, Options{})
	a := owdPath(0, 0, 0, 1.25e6)
	for i := 0; i < 10000; i++ {
		pick1(t, s, []PathInfo{a}, 1250, t0)
	}
	if got := pick1(t, s, []PathInfo{a, owdPath(1, 600*ms, 0, 1.25e6)}, 1250, t0); got != 0 {
		t.Fatalf("capped backlog: picked %d, want 0", got)
	}
	if got := pick1(t, s, []PathInfo{a, owdPath(1, 400*ms, 0, 1.25e6)}, 1250, t0); got != 1 {
		t.Fatalf("capped backlog vs 400ms path: picked %d, want 1", got)
	}
}

func TestEDPFStateFollowsID(t *testing.T) {
	// Virtual queues belong to path IDs, not slice positions: after loading ID 0 the
	// same path listed second must still look busy.
	s := mustNew(t, EarliestArrival, Options{})
	a, b := owdPath(0, 0, 0, 1.25e6), owdPath(1, 5*ms, 0, 1.25e6)
	// 0.8ms per packet: A takes packets while 0.8k < 5.8 → 7 packets.
	got := burst(t, s, []PathInfo{a, b}, 7, 1250, t0)
	if got != "AAAAAAA" {
		t.Fatalf("got %s", got)
	}
	// Reversed slice: A (now index 1) is busy until 5.6ms → 6.4 vs B 5.8 → B (index 0).
	var buf [2]int
	if r := s.Pick(buf[:0], []PathInfo{b, a}, 1250, 0, t0); !slices.Equal(r, []int{0}) {
		t.Fatalf("reversed slice picked %v, want [0] (path B)", r)
	}
}

// Two paths over one access link and a third path over a link of its own, all with
// equal delay and rate: the shared link must get half the packets, not two thirds.
// Hand computation: every path has mq = 0 < ProbeQueue, so each link is charged
// 1.25 × 1.25 MB/s; a 1250-byte packet occupies a link for 0.8 ms. The two links
// alternate (ties go to the first candidate), so of 60 packets 30 cross each link.
func TestEDPFSharedLink(t *testing.T) {
	s, _ := New(EarliestArrival, Options{})
	paths := []PathInfo{
		{ID: 0, Usable: true, Rate: 1.25e6, Link: 1, CwndRoom: -1},
		{ID: 1, Usable: true, Rate: 1.25e6, Link: 1, CwndRoom: -1},
		{ID: 2, Usable: true, Rate: 1.25e6, CwndRoom: -1},
	}
	now := time.Unix(100, 0)
	var count [3]int
	var dst []int
	for i := 0; i < 60; i++ {
		dst = s.Pick(dst[:0], paths, 1250, 0, now)
		count[dst[0]]++
	}
	if shared := count[0] + count[1]; shared != 30 || count[2] != 30 {
		t.Fatalf("shared link got %d (%d+%d), own link %d; want 30/30", shared, count[0], count[1], count[2])
	}
	// Without the Link annotation each path is its own link: 20 each.
	s, _ = New(EarliestArrival, Options{})
	for i := range paths {
		paths[i].Link = 0
	}
	count = [3]int{}
	for i := 0; i < 60; i++ {
		dst = s.Pick(dst[:0], paths, 1250, 0, now)
		count[dst[0]]++
	}
	if count != [3]int{20, 20, 20} {
		t.Fatalf("independent paths: %v, want 20 each", count)
	}
}

// An idle path whose delivery rate is only what its probes carried must not be
// charged that rate: with no queue it is charged at least InitialRate, so a burst
// spills onto it once the busy path's queue exceeds one packet time there.
func TestEDPFIdlePathNotStarved(t *testing.T) {
	busy := owdPath(0, 0, 40*ms, 1.25e6) // saturated: 40ms of queue
	idle := owdPath(1, 0, 0, 2e3)        // probes only: 2 kB/s "delivered"
	if got := pick1(t, mustNew(t, EarliestArrival, Options{}), []PathInfo{busy, idle}, 1250, t0); got != 1 {
		t.Fatalf("picked %d, want the idle path", got)
	}
}

// TestEDPFBurstSlack: two equal 1 Gbit/s paths (125 MB/s, with the probe gain
// 156.25 MB/s: a 1250-byte packet takes 8 µs). Per packet the choice alternates;
// with BurstSlack 1 ms a path keeps taking packets until its predicted arrival
// is more than 1 ms behind the other's. At 10 Mbit/s
// (0.8 ms a packet, 16 of them do not fit in 1 ms) the slack changes nothing.
func TestEDPFBurstSlack(t *testing.T) {
	fast := []PathInfo{owdPath(0, 10*ms, 0, 125e6), owdPath(1, 10*ms, 0, 125e6)}
	off := mustNew(t, EarliestArrival, Options{Config: Config{BurstSlack: -1}})
	if got := burst(t, off, fast, 8, 1250, t0); got != "ABABABAB" {
		t.Fatalf("slack off: got %s, want per-packet alternation", got)
	}
	s := mustNew(t, EarliestArrival, Options{})
	got := burst(t, s, fast, 600, 1250, t0)
	// The first run: A until A's arrival is more than 1 ms after B's (B's first
	// would arrive at 10 ms + 8 µs): A's k-th arrives at 10 ms + 8k µs, so A takes
	// 126. Then B, whose j-th arrives at 10 ms + 8j µs, runs until it is more than
	// 1 ms behind A's next (10 ms + 1016 µs): j ≤ 252. From then on the paths take
	// runs of 252 (each catches up 1 ms and runs 1 ms ahead), and no packet is
	// predicted to arrive more than 1 ms after the per-packet choice.
	want := strings.Repeat("A", 126) + strings.Repeat("B", 252) + strings.Repeat("A", 222)
	if got != want {
		t.Errorf("runs: got %d A, %d B; first switch at %d, want runs of 126, 252, 252", strings.Count(got, "A"), strings.Count(got, "B"), strings.Index(got, "B"))
	}
	slow := []PathInfo{owdPath(0, 10*ms, 0, 1.25e6), owdPath(1, 10*ms, 0, 1.25e6)}
	if got := burst(t, mustNew(t, EarliestArrival, Options{}), slow, 8, 1250, t0); got != "ABABABAB" {
		t.Errorf("10 Mbit/s: got %s, want per-packet alternation as without the slack", got)
	}
}
