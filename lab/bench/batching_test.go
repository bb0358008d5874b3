package bench

import (
	"strings"
	"testing"

	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/lab/runner"
)

// The batching figures are the counters' growth over the download, per call:
// counts before the download (warm-up traffic) do not enter.
func TestBatching(t *testing.T) {
	cli0 := &control.Status{TUN: &control.TUNStatus{Reads: 5, ReadPackets: 5, Writes: 10, WritePackets: 30, WriteRuns: 2, WriteRunPackets: 8},
		Offload: &control.OffloadStatus{GRORuns: 4, GRODatagrams: 40}}
	cli1 := &control.Status{TUN: &control.TUNStatus{Reads: 105, ReadPackets: 105, Writes: 30, WritePackets: 1030, WriteRuns: 52, WriteRunPackets: 1008},
		Offload: &control.OffloadStatus{GRORuns: 104, GRODatagrams: 2040}}
	srv0 := &control.Status{TUN: &control.TUNStatus{Reads: 2, ReadPackets: 20}, Offload: &control.OffloadStatus{GSORuns: 1, GSODatagrams: 3}}
	srv1 := &control.Status{TUN: &control.TUNStatus{Reads: 42, ReadPackets: 1020}, Offload: &control.OffloadStatus{GSORuns: 101, GSODatagrams: 1603}}
	got := batchingOf(runner.Counters{Sender: srv0, Receiver: cli0}, runner.Counters{Sender: srv1, Receiver: cli1})
	// Server: 1000 packets in 40 reads, 1600 datagrams in 100 sends. Client:
	// 2000 datagrams in 100 GRO runs, 1000 packets in 20 writes, 1000 in 50 runs.
	want := Batching{ServerReadPackets: 25, ServerGSO: 16, ClientGRO: 20, ClientWritePackets: 50, ClientRunPackets: 20}
	if got == nil || *got != want {
		t.Errorf("batching = %+v, want %+v", got, want)
	}
	// Nothing happened (no offload): zeros, not NaN; a status without the
	// sections counts as zeros.
	if z := batchingOf(runner.Counters{Sender: srv0, Receiver: &control.Status{}}, runner.Counters{Sender: srv0, Receiver: &control.Status{}}); z == nil || *z != (Batching{}) {
		t.Errorf("no traffic: %+v", z)
	}
	// A tunnel without braid's daemons has none.
	if b := batchingOf(runner.Counters{}, runner.Counters{}); b != nil {
		t.Errorf("no daemons: %+v", b)
	}
}

// The reports show the batching table for the cases that have it, with its
// legend line, and not at all otherwise.
func TestBatchingTable(t *testing.T) {
	r := testReport()
	var plain strings.Builder
	r.Document().WriteText(&plain)
	if strings.Contains(plain.String(), "batching") {
		t.Fatalf("a report without batching shows it:\n%s", plain.String())
	}
	r.Cases[1].Samples[0].Batching = &Batching{ServerReadPackets: 30, ServerGSO: 16, ClientGRO: 20, ClientWritePackets: 50, ClientRunPackets: 20}
	r.Cases[1].Samples[1].Batching = &Batching{ServerReadPackets: 40, ServerGSO: 18, ClientGRO: 22, ClientWritePackets: 60, ClientRunPackets: 24}
	r.Summarize()
	var text, md strings.Builder
	r.Document().WriteText(&text)
	r.Document().WriteMarkdown(&md)
	if !strings.Contains(strings.Join(strings.Fields(text.String()), " "), "braid, 1 path 35.0 17.0 21.0 55.0 22.0") {
		t.Errorf("text lacks the mean batching row:\n%s", text.String())
	}
	if !strings.Contains(md.String(), "| braid, 1 path | 35.0 | 17.0 | 21.0 | 55.0 | 22.0 |") || !strings.Contains(md.String(), batchingLegend) {
		t.Errorf("markdown lacks the batching row or its legend:\n%s", md.String())
	}
	if strings.Contains(text.String(), "wireguard-go, 1 veth  0.0") {
		t.Error("a case without batching got a row")
	}
}
