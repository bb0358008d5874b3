package ccsim

import "testing"

// Property tests of the congestion controllers' known behaviour (spec §10,
// RFC 6356 §2's goals, the seeds' flappiness observation). Bounds are generous,
// but each separates the coupled algorithms from uncoupled ones: a controller
// that ignored its coupling, or coupled too hard, fails them. The measured
// values are logged (go test -v) and quoted in docs/congestion.md.

// Goal 2, "do no harm": one multipath flow and one TCP through one bottleneck.
func TestSharedBottleneck(t *testing.T) {
	type bound struct{ lo, hi float64 }
	for _, tc := range []struct {
		alg, comp string
		n         int
		want      bound
	}{
		// Uncoupled: each subflow is one more TCP, so the flow takes ≈ N shares.
		{"reno", "reno", 2, bound{1.6, 2.4}},
		{"reno", "reno", 3, bound{2.5, 3.5}},
		{"cubic", "cubic", 2, bound{1.6, 2.4}},
		// Coupled: ≈ one share whatever N (spec: accept 0.7–1.3).
		{"lia", "reno", 2, bound{0.7, 1.3}},
		{"olia", "reno", 2, bound{0.7, 1.3}},
		{"balia", "reno", 2, bound{0.7, 1.3}},
		{"coupled", "reno", 2, bound{0.7, 1.3}},
		{"ewtcp", "reno", 2, bound{0.7, 1.3}},
		{"lia", "reno", 3, bound{0.7, 1.5}},
		{"olia", "reno", 3, bound{0.7, 1.5}},
		{"balia", "reno", 3, bound{0.7, 1.5}},
		// Delay-based against loss-based: clearly less than the TCP.
		{"wvegas", "reno", 2, bound{0.2, 0.8}},
	} {
		r, util := sharedRatio(t, tc.alg, tc.n, tc.comp)
		t.Logf("%-7s ×%d vs %-5s: multipath/TCP goodput %.2f (link utilization %.2f)", tc.alg, tc.n, tc.comp, r, util)
		if r < tc.want.lo || r > tc.want.hi {
			t.Errorf("%s with %d subflows vs one %s: ratio %.2f, want %.1f..%.1f", tc.alg, tc.n, tc.comp, r, tc.want.lo, tc.want.hi)
		}
		if util < 0.9 {
			t.Errorf("%s: link utilization %.2f", tc.alg, util)
		}
	}
}

// Goal 1, "improve throughput": disjoint paths of 20 ms and 100 ms RTT, each
// shared with one Reno. The coupled flow gets at least what one TCP gets on the
// best path (RTT compensation: LIA must not fall below it), and well below two TCPs.
func TestDisjointPathsBeatBestPath(t *testing.T) {
	for _, alg := range []string{"lia", "olia", "balia"} {
		mp, onA, onB := disjoint(t, alg)
		best := max(onA, onB)
		t.Logf("%-6s multipath %.2f Mbit/s; one Reno instead: %.2f on A (20 ms), %.2f on B (100 ms)", alg, mp/1e6, onA/1e6, onB/1e6)
		if mp < 0.95*best {
			t.Errorf("%s: %.2f Mbit/s, below the best single path's %.2f", alg, mp/1e6, best/1e6)
		}
		if mp > 0.8*(onA+onB) {
			t.Errorf("%s: %.2f Mbit/s, as much as two TCPs (%.2f): not coupled", alg, mp/1e6, (onA+onB)/1e6)
		}
	}
}

// Goal 3, "balance congestion": path A carries six background Renos, path B one.
// Coupled algorithms put much less of their traffic on A than uncoupled Reno
// does; fully coupled almost none; EWTCP (no pooling) about as much as Reno.
func TestTrafficMovesOffCongestedPath(t *testing.T) {
	reno, _ := congested(t, "reno", 6, 1)
	t.Logf("reno    share on the congested path %.3f", reno)
	for _, alg := range []string{"lia", "olia", "balia", "coupled", "ewtcp"} {
		share, total := congested(t, alg, 6, 1)
		t.Logf("%-7s share on the congested path %.3f (total %.2f Mbit/s)", alg, share, total/1e6)
		switch alg {
		case "ewtcp":
			if share < 0.75*reno {
				t.Errorf("ewtcp moved traffic off the congested path (%.3f vs reno %.3f): it has no resource pooling", share, reno)
			}
		default:
			if share > 0.7*reno {
				t.Errorf("%s: %.3f of its traffic on the congested path, uncoupled reno %.3f: want at most 70 %% of that", alg, share, reno)
			}
			if alg == "coupled" && share > 0.1 {
				t.Errorf("fully coupled: %.3f on the congested path, want almost none", share)
			}
		}
	}
}

// Seed 003 §3, §5.1: fully coupled "flaps" on two equal lossy paths — one
// subflow starves for long stretches and the dominant one changes — while LIA,
// OLIA and BALIA stay near 50/50. Metric: fraction of 100 ms samples in which one
// subflow holds less than 10 % of the total window, and the number of switches of
// the dominant (> 90 %) subflow.
func TestFullyCoupledFlaps(t *testing.T) {
	const loss = 0.005
	st, share, flips := flappiness(t, "coupled", loss)
	t.Logf("coupled starved %.3f of the time, mean share %.2f, %.1f flips per 80 s", st, share, flips)
	if st < 0.12 || flips < 2 {
		t.Errorf("fully coupled starved %.3f of the time with %.1f flips per run; want ≥ 0.12 and ≥ 2", st, flips)
	}
	for _, alg := range []string{"lia", "olia", "balia"} {
		st, share, flips := flappiness(t, alg, loss)
		t.Logf("%-7s starved %.3f of the time, mean share %.2f, %.1f flips per 80 s", alg, st, share, flips)
		if st > 0.06 || share < 0.4 || share > 0.6 {
			t.Errorf("%s: starved %.3f of the time, mean share %.2f; want ≤ 0.06 near 0.5", alg, st, share)
		}
	}
}

// wVegas keeps about TotalAlpha (10) packets queued for the whole flow, without
// loss, and still fills the link; Reno fills the 200-packet buffer instead.
func TestWVegasSmallQueue(t *testing.T) {
	q, util, drops := vegasQueue(t, "wvegas")
	t.Logf("wvegas: mean queue %.1f packets, utilization %.3f, %d drops after warmup", q, util, drops)
	if q < 3 || q > 25 || util < 0.9 || drops != 0 {
		t.Errorf("wvegas: queue %.1f packets, utilization %.2f, %d drops; want 3..25, ≥ 0.9, 0", q, util, drops)
	}
	rq, _, _ := vegasQueue(t, "reno")
	t.Logf("reno:   mean queue %.1f packets", rq)
	if rq < 5*q {
		t.Errorf("reno's queue %.1f is not much larger than wvegas's %.1f: the scenario does not discriminate", rq, q)
	}
}
