package runner

import (
	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/lab/results"
)

// BulkOverheadSlack is the target's fixed allowance: recovery may cost
// 2 × the path loss rate + 5 % of a bulk flow's payload.
const BulkOverheadSlack = 0.05

// pathKey names a path across two status snapshots: path ids are unique
// within a peer.
type pathKey struct {
	peer string
	id   int
}

// BulkOverhead is the recovery cost of one download of payload bytes from
// two snapshots of the sender's status, before and after it: the
// differences of the paths' counters, so that what the daemon sent before
// (handshakes, warm-up, earlier repetitions) does not count. A path missing
// from before (it appeared during the download) counts from zero. nil when
// after has no path with recovery counters (recovery off, or a daemon
// without them) or nothing was downloaded.
func BulkOverhead(before, after control.Status, payload int64) *results.BulkRecovery {
	old := map[pathKey]control.PathStatus{}
	for _, peer := range before.Peers {
		for _, ps := range peer.Paths {
			old[pathKey{peer.PublicKey, ps.ID}] = ps
		}
	}
	var r results.BulkRecovery
	on := false
	for _, peer := range after.Peers {
		for _, ps := range peer.Paths {
			if ps.Recovery == nil {
				continue
			}
			on = true
			was := old[pathKey{peer.PublicKey, ps.ID}]
			var wasRec control.PathRecovery
			if was.Recovery != nil {
				wasRec = *was.Recovery
			}
			// The bulk flows' share: a probe's repairs and resends come
			// from the latency-sensitive flows' own budget.
			r.ResentBytes += sub(ps.Recovery.RetransmittedBytes, wasRec.RetransmittedBytes) -
				sub(ps.Recovery.RetransmittedLatencyBytes, wasRec.RetransmittedLatencyBytes)
			r.RepairBytes += sub(ps.Recovery.RepairSentBytes, wasRec.RepairSentBytes) -
				sub(ps.Recovery.RepairSentLatencyBytes, wasRec.RepairSentLatencyBytes)
			r.TxPackets += sub(ps.TxPackets, was.TxPackets)
			r.LostPackets += sub(ps.LostPackets, was.LostPackets)
		}
	}
	if !on || payload <= 0 {
		return nil
	}
	if r.TxPackets > 0 {
		r.PathLossRate = float64(r.LostPackets) / float64(r.TxPackets)
	}
	r.Overhead = float64(r.ResentBytes+r.RepairBytes) / float64(payload)
	r.Bound = 2*r.PathLossRate + BulkOverheadSlack
	return &r
}

// SummarizeBulkRecovery is a point's recovery figures over its downloads
// (nil when none has them).
func SummarizeBulkRecovery(samples []results.Sample) *results.BulkRecoverySummary {
	get := func(s *results.Sample) *results.BulkRecovery { return s.BulkRecovery }
	s := results.BulkRecoverySummary{
		Overhead:     summarizeBy(samples, get, func(r *results.BulkRecovery) float64 { return r.Overhead }),
		PathLossRate: summarizeBy(samples, get, func(r *results.BulkRecovery) float64 { return r.PathLossRate }),
		Bound:        summarizeBy(samples, get, func(r *results.BulkRecovery) float64 { return r.Bound }),
	}
	if s.Overhead.N == 0 {
		return nil
	}
	for _, smp := range samples {
		if r := smp.BulkRecovery; r != nil && r.Overhead <= r.Bound {
			s.WithinBound++
		}
	}
	return &s
}
