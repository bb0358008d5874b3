package linktrace

import (
	"bytes"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/lab/linkemu"
)

var seeds = []uint64{1, 2, 3}

func profile(t *testing.T, name string) Profile {
	t.Helper()
	p, err := ProfileByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func generate(t *testing.T, p Profile, length time.Duration, seed uint64) (*linkemu.Trace, *linkemu.Schedule) {
	t.Helper()
	tr, sc, err := Generate(p, length, seed)
	if err != nil {
		t.Fatal(err)
	}
	return tr, sc
}

// quantum is one opportunity in a window, in bit/s: how far a window's
// rate may be off the process's because opportunities are whole.
func quantum(window time.Duration) float64 { return linkemu.TraceMTU * 8 / window.Seconds() }

func TestProfileByName(t *testing.T) {
	for _, n := range []string{"fixed", "steady", "fading", "satellite"} {
		if p := profile(t, n); p.Name != n || p.Validate() != nil {
			t.Errorf("%s: %+v, %v", n, p, p.Validate())
		}
	}
	_, err := ProfileByName("wifi")
	if err == nil || !strings.Contains(err.Error(), `"wifi"`) || !strings.Contains(err.Error(), "fading, fixed, satellite, steady") {
		t.Errorf("unknown profile: %v", err)
	}
}

func TestProfileValidate(t *testing.T) {
	for _, p := range []Profile{
		{Rate: -1},
		{Rate: math.NaN()},
		{Rate: 1, Spread: 1.5},
		{MinRate: 0, MaxRate: 10},
		{MinRate: 20, MaxRate: 10},
		{},
		{Rate: 1, HoldMin: 0, HoldMax: time.Second},
		{Rate: 1, HoldMin: 2 * time.Second, HoldMax: time.Second},
		{Rate: 1, OutageEvery: time.Second},
		{Rate: 1, Handover: time.Second, DelayMin: 2, DelayMax: 1},
		{Rate: 1, Handover: time.Second, BurstMax: 2 * time.Second},
	} {
		if p.Validate() == nil {
			t.Errorf("%+v accepted", p)
		}
		if _, _, err := Generate(p, time.Second, 1); err == nil {
			t.Errorf("Generate accepted %+v", p)
		}
	}
	if _, _, err := Generate(profile(t, "fixed"), 0, 1); err == nil {
		t.Error("Generate accepted length 0")
	}
}

func traceText(t *testing.T, tr *linkemu.Trace) []byte {
	var b bytes.Buffer
	if _, err := tr.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestDeterminism(t *testing.T) {
	for _, n := range []string{"steady", "fading", "satellite"} {
		p := profile(t, n)
		a, sa := generate(t, p, 60*time.Second, 7)
		b, sb := generate(t, p, 60*time.Second, 7)
		c, sc := generate(t, p, 60*time.Second, 8)
		if !bytes.Equal(traceText(t, a), traceText(t, b)) {
			t.Errorf("%s: same seed, different traces", n)
		}
		if bytes.Equal(traceText(t, a), traceText(t, c)) {
			t.Errorf("%s: seeds 7 and 8 gave the same trace", n)
		}
		if sa != nil && (!slices.Equal(sa.Steps, sb.Steps) || slices.Equal(sa.Steps, sc.Steps)) {
			t.Errorf("%s: schedules: same seed equal %v, different seeds equal %v", n, slices.Equal(sa.Steps, sb.Steps), slices.Equal(sa.Steps, sc.Steps))
		}
	}
}

// The opportunities add up to the rate exactly (to one), and the period is
// the length rounded up to a ms.
func TestFixedRate(t *testing.T) {
	p := profile(t, "fixed")
	for _, rate := range []float64{3e6, 20e6, 0.05e6} {
		p.Rate = rate
		tr, sc := generate(t, p, 10*time.Second+500*time.Microsecond, 1)
		want := rate * 10.001 / (linkemu.TraceMTU * 8)
		if tr.Period() != 10001*time.Millisecond || sc != nil {
			t.Errorf("%v: period %v, schedule %v", rate, tr.Period(), sc)
		}
		if got := float64(tr.Opportunities()); math.Abs(got-want) > 1 {
			t.Errorf("%v bit/s: %v opportunities in 10.001 s, want %.2f", rate, got, want)
		}
		if rate < 1e6 {
			continue // 0.05 Mbit/s: 2 opportunities a second, no windows to compare
		}
		// The first window misses the opportunities of its last ms (they
		// are at its end); the others are whole to one opportunity.
		st := Stats(tr, 500*time.Millisecond)
		for w, r := range st.Rates[1:] {
			if math.Abs(r-rate) > quantum(st.Window) {
				t.Errorf("%v bit/s: window %d at %v bit/s", rate, w+1, r)
			}
		}
		if first := st.Rates[0]; first > rate || first < rate*0.998-quantum(st.Window) {
			t.Errorf("%v bit/s: first window at %v bit/s", rate, first)
		}
	}
}

func TestSteady(t *testing.T) {
	p := profile(t, "steady")
	for _, seed := range seeds {
		tr, _ := generate(t, p, 600*time.Second, seed)
		st := Stats(tr, 500*time.Millisecond)
		q := quantum(st.Window)
		t.Logf("seed %d: mean %.2f Mbit/s, windows %.2f–%.2f, CV %.3f", seed, st.Mean/mbit, st.Min/mbit, st.Max/mbit, st.CV)
		if st.Min < 0.7*p.Rate-q || st.Max > 1.3*p.Rate+q {
			t.Errorf("seed %d: windows %.3f–%.3f Mbit/s, want within 20 ± 30 %%", seed, st.Min/mbit, st.Max/mbit)
		}
		// Levels uniform in ±30 % have CV 0.3/√3 = 0.17 (less over windows
		// straddling two levels), mean within a few % over ~480 levels.
		if st.CV < 0.1 || st.CV > 0.2 || math.Abs(tr.MeanRate()/p.Rate-1) > 0.05 {
			t.Errorf("seed %d: CV %.3f, mean %.3f Mbit/s", seed, st.CV, tr.MeanRate()/mbit)
		}
		if st.Max < 1.25*p.Rate || st.Min > 0.75*p.Rate {
			t.Errorf("seed %d: windows %.3f–%.3f Mbit/s do not reach the ends of the range", seed, st.Min/mbit, st.Max/mbit)
		}
		// Holding times uniform in 0.5–2 s (the last one cut at the end).
		lv := p.levels(600_000, seed)
		var sum int64
		for i, s := range lv[:len(lv)-1] {
			if d := s.to - s.from; d < 500 || d > 2000 {
				t.Fatalf("seed %d: level %d held %d ms", seed, i, d)
			}
			sum += s.to - s.from
		}
		if mean := float64(sum) / float64(len(lv)-1); math.Abs(mean-1250) > 60 {
			t.Errorf("seed %d: mean holding time %.0f ms, want 1250", seed, mean)
		}
	}
}

func TestFading(t *testing.T) {
	p := profile(t, "fading")
	const length = 600 * time.Second
	var runs, gaps int
	var gapSum, below float64
	var rates []float64
	for _, seed := range seeds {
		tr, _ := generate(t, p, length, seed)
		st := Stats(tr, 500*time.Millisecond)
		q := quantum(st.Window)
		t.Logf("seed %d: mean %.2f Mbit/s, windows %.3f–%.3f, CV %.2f, %.1f %% below %.1f Mbit/s in %d runs",
			seed, st.Mean/mbit, st.Min/mbit, st.Max/mbit, st.CV, 100*st.Below, OutageThreshold/mbit, len(st.Outages))
		in := make([]bool, len(st.Rates)) // in an outage run or next to one
		for i, r := range st.Outages {
			if r.Length < 500*time.Millisecond || r.Length > 3500*time.Millisecond {
				t.Errorf("seed %d: outage at %v lasts %v, want 1–3 s (± a window)", seed, r.Start, r.Length)
			}
			first, last := int(r.Start/st.Window), int((r.Start+r.Length)/st.Window)-1
			for w := max(first-1, 0); w <= min(last+1, len(in)-1); w++ {
				in[w] = true
			}
			if i > 0 {
				gaps++
				gapSum += (r.Start - st.Outages[i-1].Start).Seconds()
			}
		}
		for w, r := range st.Rates {
			if !in[w] && (r < 0.5*mbit-q || r > 30*mbit+q) {
				t.Errorf("seed %d: window at %v: %.3f Mbit/s outside an outage, want 0.5–30", seed, time.Duration(w)*st.Window, r/mbit)
			}
			if !in[w] {
				rates = append(rates, r)
			}
		}
		runs += len(st.Outages)
		below += st.Below
		// The process itself: outages 1–3 s at 0.1 Mbit/s.
		for _, o := range p.outages(int64(length/time.Millisecond), seed) {
			if d := o.to - o.from; (d < 1000 || d > 3000) && o.to != int64(length/time.Millisecond) {
				t.Errorf("seed %d: outage of %d ms", seed, d)
			}
		}
	}
	// One outage every 22 s on average (20 s up + 2 s down): ~82 in 1800 s.
	perRun := float64(len(seeds)) * length.Seconds() / float64(runs)
	meanGap := gapSum / float64(gaps)
	below /= float64(len(seeds))
	t.Logf("%d outages: one per %.1f s, mean gap between starts %.1f s, %.1f %% of the time", runs, perRun, meanGap, 100*below)
	if meanGap < 17 || meanGap > 28 {
		t.Errorf("outages start every %.1f s on average, want ≈ 22", meanGap)
	}
	if below < 0.05 || below > 0.14 {
		t.Errorf("%.1f %% of windows in outages, want ≈ 9 %%", 100*below)
	}
	// Log-uniform in [0.5, 30]: median √(0.5·30) ≈ 3.9 Mbit/s, a quarter
	// below 0.5·60^¼ ≈ 1.4, a quarter above 10.9.
	slices.Sort(rates)
	if m := rates[len(rates)/2] / mbit; m < 3 || m > 5 {
		t.Errorf("median rate outside outages %.2f Mbit/s, want ≈ 3.9", m)
	}
	if rates[len(rates)/100] > 0.7*mbit || rates[len(rates)*99/100] < 25*mbit {
		t.Errorf("1st and 99th percentiles %.2f and %.2f Mbit/s: the range is not used", rates[len(rates)/100]/mbit, rates[len(rates)*99/100]/mbit)
	}
}

func TestSatellite(t *testing.T) {
	p := profile(t, "satellite")
	const length = 300 * time.Second
	for _, seed := range seeds[:2] {
		tr, sc := generate(t, p, length, seed)
		st := Stats(tr, 500*time.Millisecond)
		q := quantum(st.Window)
		t.Logf("seed %d: mean %.1f Mbit/s, windows %.1f–%.1f", seed, st.Mean/mbit, st.Min/mbit, st.Max/mbit)
		if st.Min < 50*mbit-q || st.Max > 200*mbit+q {
			t.Errorf("seed %d: windows %.2f–%.2f Mbit/s, want 50–200", seed, st.Min/mbit, st.Max/mbit)
		}
		// The level holds between handovers: 30 windows of one rate (but
		// the first, whose first ms holds the previous level's
		// opportunities: they come at the end of each ms).
		for w, r := range st.Rates {
			if second := st.Rates[w/30*30+1]; w%30 != 0 && math.Abs(r-second) > q {
				t.Errorf("seed %d: window at %v: %.3f Mbit/s, %.3f just after the handover", seed, time.Duration(w)*st.Window, r/mbit, second/mbit)
				break
			}
		}
		if sc == nil || sc.Validate() != nil || sc.Period != length || len(sc.Steps) != 20 {
			t.Fatalf("seed %d: schedule %+v", seed, sc)
		}
		delays := map[time.Duration]bool{}
		for k, s := range sc.Steps {
			at := time.Duration(k) * 15 * time.Second
			wantBurst := k > 0
			if s.At != at || s.Delay < 10*ms || s.Delay > 40*ms || wantBurst != (s.DropFor > 0) || wantBurst && (s.DropFor < 50*ms || s.DropFor > 200*ms) {
				t.Errorf("seed %d: step %d %+v, want at %v, delay 10–40 ms, burst 50–200 ms after the start", seed, k, s, at)
			}
			if sc.DelayAt(at+s.DropFor) != s.Delay || sc.DroppingAt(at) != wantBurst || sc.DroppingAt(at+s.DropFor) {
				t.Errorf("seed %d: schedule at handover %d does not follow its step", seed, k)
			}
			delays[s.Delay] = true
		}
		if len(delays) < 15 {
			t.Errorf("seed %d: only %d different delays in 20 handovers", seed, len(delays))
		}
	}
}

func TestWriteFile(t *testing.T) {
	tr, _ := generate(t, profile(t, "steady"), 5*time.Second, 3)
	path := filepath.Join(t.TempDir(), "steady.trace")
	if err := WriteFile(path, tr); err != nil {
		t.Fatal(err)
	}
	back, err := linkemu.ReadTraceFile(path)
	if err != nil || !bytes.Equal(traceText(t, back), traceText(t, tr)) {
		t.Errorf("read back: %v", err)
	}
	if err := WriteFile(filepath.Join(t.TempDir(), "no", "such", "dir"), tr); err == nil || !strings.Contains(err.Error(), "no/such/dir") {
		t.Errorf("unwritable path: %v", err)
	}
}

func TestStats(t *testing.T) {
	// 1 opportunity per ms for 1 s, then nothing for 1.5 s, then one at
	// 2.5 s (the period): windows of 0.5 s = 12.032, 12.032, 0, 0, 0.
	ms := make([]uint32, 0, 1001)
	for i := range 1000 {
		ms = append(ms, uint32(i+1))
	}
	tr, err := linkemu.NewTrace(append(ms, 2500))
	if err != nil {
		t.Fatal(err)
	}
	st := Stats(tr, 500*time.Millisecond)
	// Window [0.5, 1) holds the opportunities at 500–999 ms, [1, 1.5) the
	// one at 1000 ms, [2, 2.5) none: the one at 2.5 s is the next's.
	want := []float64{499 * 1504 * 16, 500 * 1504 * 16, 1504 * 16, 0, 0}
	if !slices.Equal(st.Rates, want) {
		t.Fatalf("rates %v, want %v", st.Rates, want)
	}
	if st.Min != 0 || st.Max != want[1] || st.Below != 0.6 || len(st.Outages) != 1 || st.Outages[0] != (Run{time.Second, 1500 * time.Millisecond}) {
		t.Errorf("%+v", st)
	}
	if mean := (want[0] + want[1] + want[2]) / 5; math.Abs(st.Mean-mean) > 1e-6 || st.CV < 1 {
		t.Errorf("mean %v (want %v), CV %v", st.Mean, mean, st.CV)
	}
}

func TestScaled(t *testing.T) {
	for _, name := range []string{"fixed", "steady", "fading", "satellite"} {
		p, err := ProfileByName(name)
		if err != nil {
			t.Fatal(err)
		}
		s := p.Scaled(5e6)
		if got := s.LevelMean(); math.Abs(got-5e6) > 1 {
			t.Errorf("%s scaled to 5 Mbit/s: level mean %v", name, got)
		}
		if p.MaxRate > 0 && math.Abs(s.MaxRate/s.MinRate-p.MaxRate/p.MinRate) > 1e-9 {
			t.Errorf("%s: scaling changed the ratio of its rates", name)
		}
		if err := s.Validate(); err != nil {
			t.Error(err)
		}
	}
	// A generated steady trace at 5 Mbit/s averages about that.
	p, _ := ProfileByName("steady")
	tr, _, err := Generate(p.Scaled(5e6), 5*time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r := tr.MeanRate(); r < 4.5e6 || r > 5.5e6 {
		t.Errorf("steady 5 Mbit/s: mean %v", r)
	}
}
