package runner

import (
	"math"
	"testing"

	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/lab/results"
)

func pathStat(id int, tx, lost uint64, rec *control.PathRecovery) control.PathStatus {
	return control.PathStatus{ID: id, TxPackets: tx, LostPackets: lost, Recovery: rec}
}

func peerOf(paths ...control.PathStatus) control.Status {
	return control.Status{Role: "server", Peers: []control.PeerStatus{{PublicKey: "K", Paths: paths}}}
}

func TestBulkOverhead(t *testing.T) {
	before := peerOf(
		pathStat(0, 100, 2, &control.PathRecovery{RetransmittedBytes: 1000, RepairSentBytes: 500}),
		// No recovery object yet: its recovery counts from zero, its
		// packets from 50 and 0.
		pathStat(1, 50, 0, nil),
	)
	after := peerOf(
		pathStat(0, 1100, 22, &control.PathRecovery{RetransmittedBytes: 21000, RepairSentBytes: 10500}),
		// 300 of its resent and 700 of its repair bytes were a probe's: the
		// latency-sensitive flows' budget, not the download's.
		pathStat(1, 550, 5, &control.PathRecovery{RetransmittedBytes: 4300, RepairSentBytes: 2700,
			RetransmittedLatencyBytes: 300, RepairSentLatencyBytes: 700}),
		// Appeared during the download: counts from zero.
		pathStat(2, 350, 3, &control.PathRecovery{RetransmittedBytes: 3000, RepairSentBytes: 1500}),
	)
	got := BulkOverhead(before, after, 1_000_000)
	if got == nil {
		t.Fatal("nil with recovery on")
	}
	// R = 20000 + (4300 - 300) + 3000, F = 10000 + (2700 - 700) + 1500, tx = 1000 + 500 +
	// 350, lost = 20 + 5 + 3; O = 40500 / 1e6; L = 28/1850 = 0.015135…;
	// B = 2L + 0.05 = 0.080270….
	want := results.BulkRecovery{ResentBytes: 27000, RepairBytes: 13500, TxPackets: 1850, LostPackets: 28}
	if got.ResentBytes != want.ResentBytes || got.RepairBytes != want.RepairBytes ||
		got.TxPackets != want.TxPackets || got.LostPackets != want.LostPackets {
		t.Errorf("counts %+v, want %+v", *got, want)
	}
	for _, f := range []struct {
		name      string
		got, want float64
	}{{"path loss", got.PathLossRate, 0.0151351351}, {"overhead", got.Overhead, 0.0405}, {"bound", got.Bound, 0.0802702703}} {
		if math.Abs(f.got-f.want) > 1e-9 {
			t.Errorf("%s %v, want %v", f.name, f.got, f.want)
		}
	}

	off := peerOf(pathStat(0, 1100, 22, nil), pathStat(1, 550, 5, nil))
	if r := BulkOverhead(before, off, 1_000_000); r != nil {
		t.Errorf("recovery off (no recovery object): %+v, want nil", *r)
	}
	if r := BulkOverhead(before, after, 0); r != nil {
		t.Errorf("nothing downloaded: %+v, want nil", *r)
	}
}

func TestSummarizeBulkRecovery(t *testing.T) {
	smp := []results.Sample{
		{BulkRecovery: &results.BulkRecovery{Overhead: 0.03, PathLossRate: 0.01, Bound: 0.07}},
		{BulkRecovery: &results.BulkRecovery{Overhead: 0.09, PathLossRate: 0.01, Bound: 0.07}},
		{}, // a download without the figures is left out
	}
	s := SummarizeBulkRecovery(smp)
	if s == nil || s.Overhead.N != 2 || math.Abs(s.Overhead.Mean-0.06) > 1e-12 || s.WithinBound != 1 || math.Abs(s.Bound.Mean-0.07) > 1e-12 {
		t.Errorf("summary %+v", s)
	}
	if SummarizeBulkRecovery(smp[2:]) != nil {
		t.Error("a summary without figures")
	}
}
