package sched

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func mustNew(t testing.TB, name string, opt Options) Scheduler {
	t.Helper()
	s, err := New(name, opt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// pick1 runs Pick and requires exactly one result.
func pick1(t testing.TB, s Scheduler, paths []PathInfo, size int, now time.Time) int {
	t.Helper()
	var buf [MaxPaths]int
	got := s.Pick(buf[:0], paths, size, 0, now)
	if len(got) != 1 {
		t.Fatalf("%s: Pick returned %v, want exactly one path", s.Name(), got)
	}
	return got[0]
}

func TestNewAndNames(t *testing.T) {
	want := []string{"roundrobin", "weighted", "minrtt", "rtt-aware", "earliest-arrival", "redundant"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	Names()[0] = "clobbered"
	if Names()[0] != "roundrobin" {
		t.Fatal("Names returned a slice aliasing package state")
	}
	for _, n := range want {
		s := mustNew(t, n, Options{Seed: 1})
		if s.Name() != n {
			t.Errorf("New(%q).Name() = %q", n, s.Name())
		}
	}
	if s := mustNew(t, "", Options{}); s.Name() != Default || Default != "earliest-arrival" {
		t.Errorf("New(\"\") = %q, want earliest-arrival", s.Name())
	}
	_, err := New("fastest", Options{})
	if err == nil {
		t.Fatal("unknown scheduler accepted")
	}
	for _, n := range want {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("error %q does not list %q", err, n)
		}
	}
	if !strings.Contains(err.Error(), `"fastest"`) {
		t.Errorf("error %q does not name the bad value", err)
	}
}

// usable returns a healthy usable path with plausible measurements.
func usable(id int, srtt time.Duration, rate float64) PathInfo {
	return PathInfo{ID: id, Usable: true, SRTT: srtt, MinRTT: srtt, OWD: srtt / 2, BaseOWD: srtt / 2, Rate: rate, CwndRoom: -1}
}

func TestUnusableNeverPicked(t *testing.T) {
	// The unusable and out-of-range paths are the most attractive by every measure
	// (lowest RTT, highest rate, largest weight), so a scheduler that ignored the
	// flag would pick them.
	paths := []PathInfo{
		{ID: 0, Usable: false, SRTT: time.Millisecond, MinRTT: time.Millisecond, Rate: 1e9, CwndRoom: -1, Weight: 100},
		usable(1, 50*time.Millisecond, 1e6),
		{ID: 2, Usable: false, Degraded: true, SRTT: time.Millisecond, Rate: 1e9, CwndRoom: -1, Weight: 100},
		usable(3, 80*time.Millisecond, 1e6),
		{ID: MaxPaths, Usable: true, SRTT: time.Millisecond, MinRTT: time.Millisecond, Rate: 1e9, CwndRoom: -1, Weight: 100},
		{ID: -1, Usable: true, SRTT: time.Millisecond, MinRTT: time.Millisecond, Rate: 1e9, CwndRoom: -1, Weight: 100},
	}
	paths[1].Weight, paths[3].Weight = 1, 1
	for _, n := range Names() {
		s := mustNew(t, n, Options{Seed: 7})
		seen := map[int]int{}
		now := t0
		for i := 0; i < 2000; i++ {
			for _, idx := range s.Pick(nil, paths, 1200, uint32(i), now) {
				seen[idx]++
			}
			now = now.Add(100 * time.Microsecond)
		}
		for idx := range seen {
			if idx != 1 && idx != 3 {
				t.Errorf("%s picked path index %d (%+v)", n, idx, paths[idx])
			}
		}
		if len(seen) == 0 {
			t.Errorf("%s picked nothing", n)
		}
		// Nothing usable: empty result.
		none := []PathInfo{paths[0], paths[2], paths[4], paths[5]}
		if got := s.Pick(nil, none, 1200, 0, now); len(got) != 0 {
			t.Errorf("%s picked %v from unusable paths", n, got)
		}
		if got := s.Pick(nil, nil, 1200, 0, now); len(got) != 0 {
			t.Errorf("%s picked %v from no paths", n, got)
		}
	}
}

func TestDegradedOnlyAsFallback(t *testing.T) {
	// The degraded path (index 0) is better on every measure.
	good := usable(0, 5*time.Millisecond, 1e8)
	good.Degraded = true
	poor := usable(1, 100*time.Millisecond, 1e5)
	for _, n := range Names() {
		if n == Weighted {
			continue // separate rules, TestWeightedTiers
		}
		s := mustNew(t, n, Options{Seed: 3})
		now := t0
		for i := 0; i < 500; i++ {
			got := s.Pick(nil, []PathInfo{good, poor}, 1000, 0, now)
			if !slices.Equal(got, []int{1}) {
				t.Fatalf("%s: picked %v with a healthy path available, want [1]", n, got)
			}
			now = now.Add(time.Millisecond)
		}
		off := poor
		off.Usable = false
		if got := s.Pick(nil, []PathInfo{good, off}, 1000, 0, now); !slices.Equal(got, []int{0}) {
			t.Errorf("%s: picked %v when only the degraded path is usable, want [0]", n, got)
		}
		// Two degraded, no healthy: both are candidates (redundant sends on both).
		d2 := poor
		d2.Degraded = true
		got := s.Pick(nil, []PathInfo{good, d2}, 1000, 0, now)
		if n == Redundant && !slices.Equal(got, []int{0, 1}) {
			t.Errorf("redundant over two degraded paths = %v, want [0 1]", got)
		}
		if len(got) == 0 {
			t.Errorf("%s: nothing picked among degraded paths", n)
		}
	}
}

func TestRoundRobinCyclesByID(t *testing.T) {
	s := mustNew(t, RoundRobin, Options{})
	// Slice order differs from ID order; the cycle follows IDs: 0,1,2 = indices 1,2,0.
	paths := []PathInfo{usable(2, time.Millisecond, 0), usable(0, 90*time.Millisecond, 0), usable(1, 9*time.Millisecond, 0)}
	var got []int
	for i := 0; i < 7; i++ {
		got = append(got, pick1(t, s, paths, 100, t0))
	}
	if want := []int{1, 2, 0, 1, 2, 0, 1}; !slices.Equal(got, want) {
		t.Fatalf("indices %v, want %v", got, want)
	}
	// Last pick was ID 0. ID 1 goes down: next is ID 2 (index 0), then wrap to ID 0.
	paths[2].Usable = false
	got = got[:0]
	for i := 0; i < 4; i++ {
		got = append(got, pick1(t, s, paths, 100, t0))
	}
	if want := []int{0, 1, 0, 1}; !slices.Equal(got, want) {
		t.Fatalf("after ID 1 went down: %v, want %v", got, want)
	}
	// A new path with a larger ID joins between picks; last was ID 0 → next ID 2, then 7.
	paths = append(paths, usable(7, time.Millisecond, 0))
	got = got[:0]
	for i := 0; i < 3; i++ {
		got = append(got, pick1(t, s, paths, 100, t0))
	}
	if want := []int{0, 3, 1}; !slices.Equal(got, want) {
		t.Fatalf("after ID 7 joined: %v, want %v", got, want)
	}
}

func TestRedundantReturnsAllUsable(t *testing.T) {
	s := mustNew(t, Redundant, Options{})
	paths := []PathInfo{usable(0, 10*time.Millisecond, 0), usable(1, 20*time.Millisecond, 0), usable(2, 30*time.Millisecond, 0), usable(3, 40*time.Millisecond, 0)}
	paths[2].Usable = false
	dst := make([]int, 1, 8)
	dst[0] = 42 // Pick appends, it does not overwrite
	got := s.Pick(dst, paths, 1000, 0, t0)
	if want := []int{42, 0, 1, 3}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// binomialCheck fails if count deviates from n·p by more than 4 standard deviations.
func binomialCheck(t *testing.T, what string, count, n int, p float64) {
	t.Helper()
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	if d := math.Abs(float64(count) - mean); d > 4*sd {
		t.Errorf("%s: %d of %d, want %.0f ± %.0f (4σ)", what, count, n, mean, 4*sd)
	}
}

func countPicks(t *testing.T, s Scheduler, paths []PathInfo, n int) []int {
	t.Helper()
	counts := make([]int, len(paths))
	var buf [4]int
	for i := 0; i < n; i++ {
		got := s.Pick(buf[:0], paths, 1000, uint32(i), t0)
		if len(got) != 1 {
			t.Fatalf("Pick = %v", got)
		}
		counts[got[0]]++
	}
	return counts
}

func TestWeightedSplitsConverge(t *testing.T) {
	const n = 20000
	for _, w := range [][2]float64{{50, 50}, {75, 25}, {90, 10}} {
		s := mustNew(t, Weighted, Options{Weights: w[:], Seed: 12345})
		// Slice order reversed vs. IDs: weights follow the ID, not the position.
		paths := []PathInfo{usable(1, 10*time.Millisecond, 0), usable(0, 10*time.Millisecond, 0)}
		c := countPicks(t, s, paths, n)
		p0 := w[0] / (w[0] + w[1])
		binomialCheck(t, "weighted ID 0", c[1], n, p0)
	}
	// Weights carried in PathInfo take precedence over Options.
	s := mustNew(t, Weighted, Options{Weights: []float64{1, 1, 1}, Seed: 99})
	paths := []PathInfo{usable(0, time.Millisecond, 0), usable(1, time.Millisecond, 0), usable(2, time.Millisecond, 0)}
	paths[0].Weight, paths[1].Weight, paths[2].Weight = 0.5, 0.3, 0.2
	c := countPicks(t, s, paths, n)
	binomialCheck(t, "info weight 0.5", c[0], n, 0.5)
	binomialCheck(t, "info weight 0.3", c[1], n, 0.3)
	binomialCheck(t, "info weight 0.2", c[2], n, 0.2)
}

func TestWeightedDefaultsAndStandby(t *testing.T) {
	const n = 9000
	three := []PathInfo{usable(0, time.Millisecond, 0), usable(1, time.Millisecond, 0), usable(2, time.Millisecond, 0)}
	// No weights at all: equal thirds.
	c := countPicks(t, mustNew(t, Weighted, Options{Seed: 5}), three, n)
	for i := range c {
		binomialCheck(t, "equal split", c[i], n, 1.0/3)
	}
	// Weights for IDs 0 and 1 only: ID 2 is on standby and never used...
	s := mustNew(t, Weighted, Options{Weights: []float64{3, 1}, Seed: 5})
	c = countPicks(t, s, three, n)
	if c[2] != 0 {
		t.Errorf("zero-weight path used %d times while weighted paths were usable", c[2])
	}
	binomialCheck(t, "3:1 with standby", c[0], n, 0.75)
	// ...until both weighted paths are unusable.
	down := slices.Clone(three)
	down[0].Usable, down[1].Usable = false, false
	if got := pick1(t, s, down, 1000, t0); got != 2 {
		t.Errorf("standby not used when weighted paths are down: %d", got)
	}
}

func TestWeightedTiers(t *testing.T) {
	s := mustNew(t, Weighted, Options{Weights: []float64{75, 25}, Seed: 8})
	paths := []PathInfo{usable(0, time.Millisecond, 0), usable(1, time.Millisecond, 0)}
	// ID 0 degraded: the healthy weighted path takes everything.
	paths[0].Degraded = true
	if c := countPicks(t, s, paths, 1000); c[1] != 1000 {
		t.Errorf("degraded weighted path used while a healthy weighted path exists: %v", c)
	}
	// Weights [100, 0]: a degraded weighted path beats a healthy standby path.
	s = mustNew(t, Weighted, Options{Weights: []float64{100, 0}, Seed: 8})
	if c := countPicks(t, s, paths, 1000); c[0] != 1000 {
		t.Errorf("healthy standby used instead of degraded weighted path: %v", c)
	}
}

func TestSeedDeterministic(t *testing.T) {
	paths := []PathInfo{usable(0, 20*time.Millisecond, 0), usable(1, 60*time.Millisecond, 0)}
	for _, n := range []string{Weighted, RTTAware} {
		a := mustNew(t, n, Options{Seed: 42})
		b := mustNew(t, n, Options{Seed: 42})
		c := mustNew(t, n, Options{Seed: 43})
		same, diff := true, false
		for i := 0; i < 200; i++ {
			x, y, z := pick1(t, a, paths, 1, t0), pick1(t, b, paths, 1, t0), pick1(t, c, paths, 1, t0)
			same = same && x == y
			diff = diff || x != z
		}
		if !same || !diff {
			t.Errorf("%s: same seed same sequence = %v, other seed differs = %v", n, same, diff)
		}
	}
}

func TestRTTAwareProportions(t *testing.T) {
	const n = 20000
	// 20ms vs 60ms: weights 1/20 : 1/60 = 3:1, the paper's 75/25 for RTT ratio 1:3.
	s := mustNew(t, RTTAware, Options{Seed: 2024})
	c := countPicks(t, s, []PathInfo{usable(0, 20*time.Millisecond, 0), usable(1, 60*time.Millisecond, 0)}, n)
	binomialCheck(t, "rtt-aware 20ms vs 60ms", c[0], n, 0.75)
	// 10/20/40ms: 4:2:1.
	c = countPicks(t, s, []PathInfo{usable(0, 10*time.Millisecond, 0), usable(1, 20*time.Millisecond, 0), usable(2, 40*time.Millisecond, 0)}, n)
	binomialCheck(t, "rtt-aware 10ms", c[0], n, 4.0/7)
	binomialCheck(t, "rtt-aware 20ms", c[1], n, 2.0/7)
	binomialCheck(t, "rtt-aware 40ms", c[2], n, 1.0/7)
}

func TestMinRTTRoom(t *testing.T) {
	s := mustNew(t, MinRTT, Options{})
	ms := time.Millisecond
	type tc struct {
		name string
		a, b PathInfo
		size int
		want int
	}
	cases := []tc{
		{"controller: fast path lacks room",
			PathInfo{ID: 0, Usable: true, SRTT: 10 * ms, CwndRoom: 1000},
			PathInfo{ID: 1, Usable: true, SRTT: 30 * ms, CwndRoom: 5000}, 1200, 1},
		{"controller: room exactly size",
			PathInfo{ID: 0, Usable: true, SRTT: 10 * ms, CwndRoom: 1200},
			PathInfo{ID: 1, Usable: true, SRTT: 30 * ms, CwndRoom: 5000}, 1200, 0},
		// No controller: W_A = 1.25e6 × 20ms(MinRTT) × 2 + 15000 = 65000; in flight 64000
		// leaves 1000 < 1200 (with SRTT 25ms W would be 77500: MinRTT matters).
		{"estimated window full",
			PathInfo{ID: 0, Usable: true, SRTT: 25 * ms, MinRTT: 20 * ms, Rate: 1.25e6, InFlight: 64000, CwndRoom: -1},
			PathInfo{ID: 1, Usable: true, SRTT: 50 * ms, MinRTT: 40 * ms, Rate: 1e6, InFlight: 0, CwndRoom: -1}, 1200, 1},
		{"estimated window has exactly room",
			PathInfo{ID: 0, Usable: true, SRTT: 25 * ms, MinRTT: 20 * ms, Rate: 1.25e6, InFlight: 63800, CwndRoom: -1},
			PathInfo{ID: 1, Usable: true, SRTT: 50 * ms, MinRTT: 40 * ms, Rate: 1e6, InFlight: 0, CwndRoom: -1}, 1200, 0},
		// Unknown rate: window = headroom 15000; 14000 in flight leaves 1000.
		{"unknown rate uses headroom",
			PathInfo{ID: 0, Usable: true, SRTT: 10 * ms, InFlight: 14000, CwndRoom: -1},
			PathInfo{ID: 1, Usable: true, SRTT: 50 * ms, CwndRoom: -1}, 1200, 1},
		// Both estimated windows full: A misses 1200+5000 = 6200 B at 1.25 MB/s =
		// 4.96ms; B (W = 1e6×40ms×2+15000 = 95000, 97000 in flight) misses 3200 B at
		// 1 MB/s = 3.2ms → B.
		{"estimated windows full, B frees first",
			PathInfo{ID: 0, Usable: true, SRTT: 25 * ms, MinRTT: 20 * ms, Rate: 1.25e6, InFlight: 70000, CwndRoom: -1},
			PathInfo{ID: 1, Usable: true, SRTT: 50 * ms, MinRTT: 40 * ms, Rate: 1e6, InFlight: 97000, CwndRoom: -1}, 1200, 1},
		{"SRTT tie goes to the first",
			PathInfo{ID: 5, Usable: true, SRTT: 10 * ms, CwndRoom: -1},
			PathInfo{ID: 1, Usable: true, SRTT: 10 * ms, CwndRoom: -1}, 1200, 0},
		{"lowest SRTT wins when both have room",
			PathInfo{ID: 0, Usable: true, SRTT: 11 * ms, CwndRoom: -1},
			PathInfo{ID: 1, Usable: true, SRTT: 10 * ms, CwndRoom: -1}, 1200, 1},
	}
	for _, c := range cases {
		if got := pick1(t, s, []PathInfo{c.a, c.b}, c.size, t0); got != c.want {
			t.Errorf("%s: picked %d, want %d", c.name, got, c.want)
		}
	}
}

// With a congestion controller a full window is not a candidate for any
// scheduler: when every usable path is full Pick returns nothing (the engine holds
// the packet), and a full healthy path does not send traffic to a degraded one.
func TestFullWindowsAreSkipped(t *testing.T) {
	full := func(id int) PathInfo {
		return PathInfo{ID: id, Usable: true, SRTT: 10 * time.Millisecond, Rate: 1e6, InFlight: 15000, CwndRoom: 100}
	}
	roomy := func(id int) PathInfo {
		return PathInfo{ID: id, Usable: true, SRTT: 30 * time.Millisecond, Rate: 1e6, InFlight: 0, CwndRoom: 1500}
	}
	for _, name := range Names() {
		s := mustNew(t, name, Options{Seed: 7})
		var buf [MaxPaths]int
		for i := 0; i < 50; i++ {
			got := s.Pick(buf[:0], []PathInfo{full(0), roomy(1), full(2)}, 1200, 0, t0)
			if len(got) != 1 || got[0] != 1 {
				t.Fatalf("%s: picked %v among full, roomy, full; want [1]", name, got)
			}
		}
		if got := s.Pick(buf[:0], []PathInfo{full(0), full(1)}, 1200, 0, t0); len(got) != 0 {
			t.Errorf("%s: picked %v with every window full, want nothing", name, got)
		}
		deg := roomy(1)
		deg.Degraded = true
		if got := s.Pick(buf[:0], []PathInfo{full(0), deg}, 1200, 0, t0); len(got) != 0 {
			t.Errorf("%s: picked %v: a full healthy path must not push traffic to a degraded one", name, got)
		}
	}
}

// allocScenarios are path sets Pick is exercised on for allocation checks.
func benchPaths(n int) []PathInfo {
	ps := make([]PathInfo, n)
	for i := range ps {
		ps[i] = PathInfo{
			ID: i, Usable: true,
			SRTT: time.Duration(10+7*i) * time.Millisecond, MinRTT: time.Duration(9+7*i) * time.Millisecond,
			OWD: time.Duration(5+4*i) * time.Millisecond, BaseOWD: time.Duration(4+4*i) * time.Millisecond,
			Rate: float64(1+i%3) * 1.25e6, InFlight: 20000 * i, CwndRoom: -1, Weight: float64(1 + i),
		}
	}
	return ps
}

// windowPaths is benchPaths with congestion windows: every other path full.
func windowPaths(n int) []PathInfo {
	ps := benchPaths(n)
	for i := range ps {
		ps[i].CwndRoom = 30000
		if i%2 == 1 {
			ps[i].CwndRoom = 500
		}
	}
	return ps
}

func TestPickDoesNotAllocate(t *testing.T) {
	for _, n := range Names() {
		for _, np := range []int{2, 8, -8} {
			s := mustNew(t, n, Options{Seed: 1, Weights: []float64{1, 2, 3}})
			var paths []PathInfo
			if np < 0 {
				paths = windowPaths(-np)
			} else {
				paths = benchPaths(np)
			}
			dst := make([]int, 0, MaxPaths)
			now := t0
			allocs := testing.AllocsPerRun(1000, func() {
				dst = s.Pick(dst[:0], paths, 1300, 7, now)
				now = now.Add(50 * time.Microsecond)
			})
			if allocs != 0 {
				t.Errorf("%s with %d paths: %v allocs per Pick", n, np, allocs)
			}
		}
	}
}

func BenchmarkPick(b *testing.B) {
	for _, n := range Names() {
		for _, np := range []int{2, 8} {
			b.Run(n+"/"+string(rune('0'+np))+"paths", func(b *testing.B) {
				s := mustNew(b, n, Options{Seed: 1})
				paths := benchPaths(np)
				dst := make([]int, 0, MaxPaths)
				now := t0
				b.ReportAllocs()
				for b.Loop() {
					dst = s.Pick(dst[:0], paths, 1300, 7, now)
					now = now.Add(10 * time.Microsecond)
				}
			})
			b.Run(n+"/"+string(rune('0'+np))+"paths-windows", func(b *testing.B) {
				s := mustNew(b, n, Options{Seed: 1})
				paths := windowPaths(np)
				dst := make([]int, 0, MaxPaths)
				now := t0
				b.ReportAllocs()
				for b.Loop() {
					dst = s.Pick(dst[:0], paths, 1300, 7, now)
					now = now.Add(10 * time.Microsecond)
				}
			})
		}
	}
}
