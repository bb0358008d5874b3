package control

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func streamStatus() Status {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	return Status{
		Role: "client", Interface: "braid0", Transport: "mptcp", Time: now,
		Peers: []PeerStatus{{
			Name: "server", PublicKey: "k", Established: true,
			Paths: []PathStatus{
				{ID: 0, Local: "0.0.0.0:0", Remote: "198.18.1.2:7000", State: "active",
					Stream: &StreamStatus{
						Kind: "mptcp", Connected: true, Local: "198.18.1.1:40000", Remote: "198.18.1.2:7000",
						Since: now.Add(-90 * time.Second), Connects: 2, TxBytes: 3 << 20, RxBytes: 1 << 10,
						ExtraSubflows: 1, ExtraSubflowsMax: 8,
						Subflows: []SubflowStatus{
							{Local: "198.18.1.1:40000", Remote: "198.18.1.2:7000", RTTMs: 21.5, CwndSegments: 30, TxBytes: 2 << 20, AckedBytes: 2 << 20},
							{Local: "198.18.2.1:40001", Remote: "198.18.1.2:7000", RTTMs: 40, CwndSegments: 12, TxBytes: 1 << 20, AckedBytes: 1 << 20, RetransBytes: 1500},
						},
					}},
				{ID: 1, Remote: "198.18.2.2:7000", State: "down",
					Stream: &StreamStatus{Kind: "tcp", Connects: 3, LastError: "connection refused"}},
			},
		}},
	}
}

func TestFormatStream(t *testing.T) {
	var b bytes.Buffer
	if err := FormatStatus(&b, streamStatus()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"  transport:   mptcp\n",
		"  path 0: mptcp 198.18.1.1:40000 → 198.18.1.2:7000 connected for 1m30s (2 connects), 3.00 MiB sent, 1.00 KiB received\n",
		"    2 subflows (limit 8 more than the first)\n",
		"198.18.2.1:40001",
		"40.0 ms",
		"1.46 KiB", // retransmitted bytes of subflow 1
		"  path 1: tcp connection down (3 connects): connection refused\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Without streams nothing of this shows.
	st := streamStatus()
	st.Transport = ""
	for i := range st.Peers[0].Paths {
		st.Peers[0].Paths[i].Stream = nil
	}
	b.Reset()
	FormatStatus(&b, st)
	if strings.Contains(b.String(), "transport") || strings.Contains(b.String(), "subflows") {
		t.Errorf("UDP status mentions streams:\n%s", b.String())
	}
}

func TestStreamJSON(t *testing.T) {
	in := streamStatus()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"transport":"mptcp"`, `"stream":{"kind":"mptcp","connected":true`, `"extra_subflows":1`, `"retrans_bytes":1500`, `"last_error":"connection refused"`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("JSON lacks %s:\n%s", want, b)
		}
	}
	var out Status
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	got := out.Peers[0].Paths[0].Stream
	if got == nil || len(got.Subflows) != 2 || got.Subflows[1].RTTMs != 40 || !got.Since.Equal(in.Peers[0].Paths[0].Stream.Since) {
		t.Fatalf("round trip: %+v", got)
	}
}
