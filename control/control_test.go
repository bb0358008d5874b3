package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var (
	snapTime  = time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)
	handshake = time.Date(2026, 3, 1, 12, 0, 18, 0, time.UTC)
)

// sample is a client with one server peer and two paths, with numbers chosen
// so that every formatted value can be checked by hand.
func sample() Status {
	return Status{
		Role:      "client",
		Interface: "braid0",
		PublicKey: "CLIENTKEY=",
		Time:      snapTime,
		Uptime:    3723*time.Second + 400*time.Millisecond,
		Counters:  map[string]uint64{"drop_replay": 3, "drop_bad_mac": 1, "drop_no_session": 0, "handshakes": 2},
		Peers: []PeerStatus{{
			Name:          "server",
			PublicKey:     "SERVERKEY=",
			AllowedIPs:    []string{"0.0.0.0/0"},
			Established:   true,
			LastHandshake: handshake,
			SessionIndex:  0x1a2b3c4d,
			Scheduler:     "earliest-arrival",
			Reorder:       "adaptive",
			Congestion:    "none",
			TxBytes:       3 << 30,
			RxBytes:       1536,
			TxPackets:     1000,
			RxPackets:     20,
			ReorderStats:  ReorderStatus{HoldMs: 12.5, InOrder: 100, Bypassed: 6, Reordered: 3, Timeouts: 1, Late: 2, Duplicates: 4, Held: 5},
			Paths: []PathStatus{
				{ID: 0, Local: "198.18.1.1:40000", Remote: "198.18.1.2:7000", Device: "eth1", State: "active", MTU: 1472,
					SRTTMs: 20.04, RTTVarMs: 2, MinRTTMs: 18, LossRate: 0.001, DeliveryRateBps: 9_800_000, Share: 0.6,
					TxBytes: 2 << 20, RxBytes: 512, TxPackets: 600, RxPackets: 12, LostPackets: 1,
					InFlight: 7, QueueDelayMs: 1.5, OWDTrend: 0.25},
				{ID: 1, Local: "198.18.2.1:40001", Remote: "198.18.2.2:7000", Device: "wwan0", State: "probing",
					LossRate: 0.25},
			},
		}},
	}
}

func TestStatusJSON(t *testing.T) {
	b, err := json.Marshal(sample())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["uptime_seconds"] != 3723.4 {
		t.Errorf("uptime_seconds = %v, want 3723.4", m["uptime_seconds"])
	}
	if _, ok := m["Uptime"]; ok {
		t.Errorf("Uptime leaked into JSON as a Go field")
	}
	for _, key := range []string{`"public_key":"CLIENTKEY="`, `"session_index":439041101`, `"srtt_ms":20.04`,
		`"delivery_rate_bps":9800000`, `"reorder_stats":{"hold_ms":12.5`, `"last_handshake":"2026-03-01T12:00:18Z"`,
		`"owd_trend":0.25`, `"in_flight":7`, `"queue_delay_ms":1.5`, `"lost_packets":1`} {
		if !bytes.Contains(b, []byte(key)) {
			t.Errorf("JSON lacks %s:\n%s", key, b)
		}
	}
	var back Status
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, sample()) {
		t.Errorf("round trip changed the status:\n got %+v\nwant %+v", back, sample())
	}

	// Before the first handshake the time is left out rather than year 1.
	s := sample()
	s.Peers[0].LastHandshake = time.Time{}
	b, _ = json.Marshal(s)
	if bytes.Contains(b, []byte("last_handshake")) {
		t.Errorf("zero last_handshake present: %s", b)
	}
}

// serve starts a control socket in a fresh directory and returns its path and
// a function that stops it and reports Serve's result.
func serve(t *testing.T, provider func() Status) (string, func() error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sub", "braid0.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- ServeListener(ctx, ln, provider) }()
	var stopped bool
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-errc
	}
	t.Cleanup(func() { stop() })
	return path, stop
}

func TestSocketRoundTrip(t *testing.T) {
	var calls atomic.Int32
	path, stop := serve(t, func() Status { calls.Add(1); return sample() })

	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode = %v, want socket 0660", fi.Mode())
	}
	di, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o750 {
		t.Errorf("directory mode = %v, want 0750", di.Mode().Perm())
	}

	got, err := Query(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sample()) {
		t.Errorf("Query:\n got %+v\nwant %+v", got, sample())
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("provider called %d times, want 1", n)
	}

	if err := stop(); err != nil {
		t.Errorf("Serve returned %v after cancel, want nil", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket still present after shutdown: %v", err)
	}
}

func TestSocketFillsTime(t *testing.T) {
	path, _ := serve(t, func() Status { return Status{Role: "server"} })
	before := time.Now()
	got, err := Query(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Time.Before(before.Add(-time.Second)) || got.Time.After(time.Now().Add(time.Second)) {
		t.Errorf("Time = %v, want about %v", got.Time, before)
	}
}

// rawRequest sends one request line and returns the raw reply.
func rawRequest(t *testing.T, path, req string) string {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return line
}

func TestSocketCommands(t *testing.T) {
	path, _ := serve(t, func() Status { return Status{Role: "server", Time: snapTime, Peers: []PeerStatus{}} })

	want := `{"error":"unknown command \"frobnicate\" (valid: status, status json)"}` + "\n"
	if got := rawRequest(t, path, "frobnicate\n"); got != want {
		t.Errorf("unknown command reply = %q, want %q", got, want)
	}
	wantStatus := `{"role":"server","interface":"","public_key":"","time":"2026-03-01T12:00:30Z","peers":[],"uptime_seconds":0}` + "\n"
	for _, req := range []string{"status\n", "status json\n", "  status   json \r\n"} {
		if got := rawRequest(t, path, req); got != wantStatus {
			t.Errorf("%q reply = %q, want %q", req, got, wantStatus)
		}
	}
}

func TestQueryErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "none.sock")
	_, err := Query(missing)
	if err == nil || err.Error() != "braid is not running? no control socket at "+missing {
		t.Errorf("missing socket: %v", err)
	}

	// A socket file with nobody listening, as a crashed daemon leaves behind.
	stale := filepath.Join(dir, "stale.sock")
	leaveStaleSocket(t, stale)
	_, err = Query(stale)
	if err == nil || err.Error() != "braid is not running? nothing answers on control socket "+stale {
		t.Errorf("stale socket: %v", err)
	}

	// A server that answers with an error.
	ln, err := net.Listen("unix", filepath.Join(dir, "err.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		bufio.NewReader(c).ReadString('\n')
		io.WriteString(c, `{"error":"busy"}`+"\n")
	}()
	_, err = Query(filepath.Join(dir, "err.sock"))
	if err == nil || err.Error() != "control socket "+filepath.Join(dir, "err.sock")+": busy" {
		t.Errorf("error reply: %v", err)
	}
}

func leaveStaleSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("stale socket not left behind: %v", err)
	}
}

func TestListenStaleAndBusy(t *testing.T) {
	dir := t.TempDir()

	stale := filepath.Join(dir, "stale.sock")
	leaveStaleSocket(t, stale)
	ln, err := Listen(stale)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	// The same path is now live: a second instance must not steal it.
	_, err = Listen(stale)
	if err == nil || !strings.Contains(err.Error(), "is in use") {
		t.Errorf("Listen on a live socket: %v", err)
	}
	ln.Close()

	regular := filepath.Join(dir, "file")
	if err := os.WriteFile(regular, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Listen(regular)
	if err == nil || err.Error() != "control socket: "+regular+" exists and is not a socket; refusing to remove it" {
		t.Errorf("Listen on a regular file: %v", err)
	}
	if b, _ := os.ReadFile(regular); string(b) != "keep me" {
		t.Errorf("regular file was touched")
	}
}

func TestServeRemovesSocketOnCancel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- Serve(ctx, path, sample) }()
	// Wait until the socket answers; Query fails fast until then.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := Query(path); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("socket never came up: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Serve = %v", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
}

func TestFormatStatus(t *testing.T) {
	var b strings.Builder
	if err := FormatStatus(&b, sample()); err != nil {
		t.Fatal(err)
	}
	want := `interface braid0 (client)
  public key:  CLIENTKEY=
  uptime:      1h2m3s
  drops:       bad_mac 1, replay 3
  counters:    handshakes 2

peer server (SERVERKEY=)
  allowed ips: 0.0.0.0/0
  session:     established, index 0x1a2b3c4d, last handshake 12s ago
  scheduler:   earliest-arrival, reorder adaptive (hold 12.5 ms), congestion none
  transfer:    3.00 GiB sent (1000 packets), 1.50 KiB received (20 packets)
  reorder:     100 in order, 6 acks past gaps, 3 reordered, 1 timeouts, 2 late, 4 duplicates, 5 held

  PATH             LOCAL           REMOTE  DEVICE    STATE      RTT     LOSS         RATE   SHARE        TX     RX   MTU
     0  198.18.1.1:40000  198.18.1.2:7000    eth1   active  20.0 ms   0.10 %  9.80 Mbit/s  60.0 %  2.00 MiB  512 B  1472
     1  198.18.2.1:40001  198.18.2.2:7000   wwan0  probing        -  25.00 %  0.00 Mbit/s   0.0 %       0 B    0 B     -
`
	if got := b.String(); got != want {
		t.Errorf("FormatStatus:\n%s\nwant:\n%s", got, want)
	}
}

func TestFormatStatusServer(t *testing.T) {
	s := Status{Role: "server", Interface: "braid1", PublicKey: "K=", Listen: []string{"0.0.0.0:7000", "[::]:7000"},
		Peers: []PeerStatus{{PublicKey: "P=", Scheduler: "minrtt", Reorder: "off", Congestion: "none"}}}
	var b strings.Builder
	FormatStatus(&b, s)
	want := `interface braid1 (server)
  public key:  K=
  listening:   0.0.0.0:7000, [::]:7000
  uptime:      0s

peer P=
  session:     not established, last handshake never
  scheduler:   minrtt, reorder off (hold 0.0 ms), congestion none
  transfer:    0 B sent (0 packets), 0 B received (0 packets)
  reorder:     0 in order, 0 acks past gaps, 0 reordered, 0 timeouts, 0 late, 0 duplicates, 0 held
  no paths
`
	if got := b.String(); got != want {
		t.Errorf("FormatStatus:\n%s\nwant:\n%s", got, want)
	}
}

func TestHumanBytes(t *testing.T) {
	for _, tc := range []struct {
		n    uint64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.00 KiB"}, {1536, "1.50 KiB"}, {5 << 20, "5.00 MiB"}, {3 << 40, "3.00 TiB"}, {1<<64 - 1, "16.00 EiB"}} {
		if got := HumanBytes(tc.n); got != tc.want {
			t.Errorf("HumanBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestCollector(t *testing.T) {
	c := NewCollector(sample)
	const want = `
# HELP braid_drops_total Packets dropped, by reason.
# TYPE braid_drops_total counter
braid_drops_total{reason="bad_mac"} 1
braid_drops_total{reason="no_session"} 0
braid_drops_total{reason="replay"} 3
# HELP braid_events_total Other instance-wide events, by name.
# TYPE braid_events_total counter
braid_events_total{event="handshakes"} 2
# HELP braid_path_srtt_seconds Smoothed round-trip time.
# TYPE braid_path_srtt_seconds gauge
braid_path_srtt_seconds{device="eth1",local="198.18.1.1:40000",name="server",path="0",peer="SERVERKEY=",remote="198.18.1.2:7000"} 0.02004
braid_path_srtt_seconds{device="wwan0",local="198.18.2.1:40001",name="server",path="1",peer="SERVERKEY=",remote="198.18.2.2:7000"} 0
# HELP braid_path_loss_ratio Recent fraction of packets lost.
# TYPE braid_path_loss_ratio gauge
braid_path_loss_ratio{device="eth1",local="198.18.1.1:40000",name="server",path="0",peer="SERVERKEY=",remote="198.18.1.2:7000"} 0.001
braid_path_loss_ratio{device="wwan0",local="198.18.2.1:40001",name="server",path="1",peer="SERVERKEY=",remote="198.18.2.2:7000"} 0.25
# HELP braid_path_delivery_rate_bits Recent delivery rate in bits per second.
# TYPE braid_path_delivery_rate_bits gauge
braid_path_delivery_rate_bits{device="eth1",local="198.18.1.1:40000",name="server",path="0",peer="SERVERKEY=",remote="198.18.1.2:7000"} 9.8e+06
braid_path_delivery_rate_bits{device="wwan0",local="198.18.2.1:40001",name="server",path="1",peer="SERVERKEY=",remote="198.18.2.2:7000"} 0
# HELP braid_path_tx_bytes_total Bytes sent on the path.
# TYPE braid_path_tx_bytes_total counter
braid_path_tx_bytes_total{device="eth1",local="198.18.1.1:40000",name="server",path="0",peer="SERVERKEY=",remote="198.18.1.2:7000"} 2.097152e+06
braid_path_tx_bytes_total{device="wwan0",local="198.18.2.1:40001",name="server",path="1",peer="SERVERKEY=",remote="198.18.2.2:7000"} 0
# HELP braid_path_state 1 for the path's current state (the state label); other states are absent.
# TYPE braid_path_state gauge
braid_path_state{device="eth1",local="198.18.1.1:40000",name="server",path="0",peer="SERVERKEY=",remote="198.18.1.2:7000",state="active"} 1
braid_path_state{device="wwan0",local="198.18.2.1:40001",name="server",path="1",peer="SERVERKEY=",remote="198.18.2.2:7000",state="probing"} 1
# HELP braid_peer_established 1 while the peer has a session with current keys, else 0.
# TYPE braid_peer_established gauge
braid_peer_established{name="server",peer="SERVERKEY="} 1
# HELP braid_peer_last_handshake_timestamp_seconds Unix time of the last completed handshake (absent before the first).
# TYPE braid_peer_last_handshake_timestamp_seconds gauge
braid_peer_last_handshake_timestamp_seconds{name="server",peer="SERVERKEY="} 1.772366418e+09
# HELP braid_peer_tx_bytes_total Bytes sent to the peer through the tunnel.
# TYPE braid_peer_tx_bytes_total counter
braid_peer_tx_bytes_total{name="server",peer="SERVERKEY="} 3.221225472e+09
# HELP braid_peer_reorder_packets_total Received packets by reorder outcome.
# TYPE braid_peer_reorder_packets_total counter
braid_peer_reorder_packets_total{name="server",outcome="bypassed",peer="SERVERKEY="} 6
braid_peer_reorder_packets_total{name="server",outcome="duplicate",peer="SERVERKEY="} 4
braid_peer_reorder_packets_total{name="server",outcome="in_order",peer="SERVERKEY="} 100
braid_peer_reorder_packets_total{name="server",outcome="late",peer="SERVERKEY="} 2
braid_peer_reorder_packets_total{name="server",outcome="reordered",peer="SERVERKEY="} 3
braid_peer_reorder_packets_total{name="server",outcome="timeout",peer="SERVERKEY="} 1
# HELP braid_peer_reorder_hold_seconds Current reorder hold time.
# TYPE braid_peer_reorder_hold_seconds gauge
braid_peer_reorder_hold_seconds{name="server",peer="SERVERKEY="} 0.0125
# HELP braid_uptime_seconds Seconds since the instance started.
# TYPE braid_uptime_seconds gauge
braid_uptime_seconds 3723.4
# HELP braid_info Always 1; labels identify the instance.
# TYPE braid_info gauge
braid_info{interface="braid0",public_key="CLIENTKEY=",role="client"} 1
`
	names := []string{"braid_drops_total", "braid_events_total", "braid_path_srtt_seconds", "braid_path_loss_ratio",
		"braid_path_delivery_rate_bits", "braid_path_tx_bytes_total", "braid_path_state", "braid_peer_established",
		"braid_peer_last_handshake_timestamp_seconds", "braid_peer_tx_bytes_total", "braid_peer_reorder_packets_total",
		"braid_peer_reorder_hold_seconds", "braid_uptime_seconds", "braid_info"}
	if err := compareMetrics(c, want, names...); err != nil {
		t.Error(err)
	}
	// Instance: info, uptime, 3 drop reasons, 1 event = 6. Peer: established,
	// handshake, 4 traffic counters, hold, held, 6 reorder outcomes = 14.
	// Path: state, 9 gauges, 5 counters, priority = 16, and the MTU of the
	// path that has one (path 1 is still probing).
	if n := countSamples(c); n != 6+14+2*16+1 {
		t.Errorf("collected %d metrics, want %d", n, 6+14+2*16+1)
	}
	for _, p := range lintMetrics(c) {
		// The one deliberate exception: delivery rate is in bits per second,
		// the unit link capacities are quoted in (and the status JSON uses).
		if p.Metric == "braid_path_delivery_rate_bits" && strings.Contains(p.Text, `"bits"`) {
			continue
		}
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	// A checked parse accepts the page: every metric matches a desc.
	if err := checkExposition(c); err != nil {
		t.Errorf("pedantic check: %v", err)
	}
}

func TestServeMetrics(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- ServeMetricsOn(ctx, ln, NewCollector(sample)) }()

	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	for _, line := range []string{
		`braid_drops_total{reason="replay"} 3`,
		`braid_path_state{device="eth1",local="198.18.1.1:40000",name="server",path="0",peer="SERVERKEY=",remote="198.18.1.2:7000",state="active"} 1`,
	} {
		if !bytes.Contains(body, []byte(line+"\n")) {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	// Private registry: no Go runtime metrics from the default one.
	if bytes.Contains(body, []byte("go_goroutines")) {
		t.Errorf("/metrics includes default registry metrics")
	}

	resp, err = http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET / = %d, want 404", resp.StatusCode)
	}

	cancel()
	if err := <-errc; err != nil {
		t.Errorf("ServeMetricsOn = %v after cancel", err)
	}
}

func TestServeMetricsBadAddr(t *testing.T) {
	err := ServeMetrics(context.Background(), "127.0.0.1:notaport", NewCollector(sample))
	if err == nil {
		t.Fatal("no error for a bad address")
	}
}

// ccSample is sample() with a congestion controller: path 0 past its first loss,
// path 1 still in initial slow start (ssthresh infinite).
func ccSample() Status {
	s := sample()
	p := &s.Peers[0]
	p.Congestion = "lia"
	p.CCQueued = 3
	p.Paths[0].CC = &PathCC{CwndBytes: 29440, SsthreshBytes: 14720, InRecovery: true, CongestionEvents: 4}
	p.Paths[0].InFlight = 28000
	p.Paths[1].CC = &PathCC{CwndBytes: 14720, SsthreshBytes: -1, SlowStart: true}
	return s
}

// recoverySample is a session with the rate model, CoDel and loss recovery.
func recoverySample() Status {
	s := ccSample()
	p := &s.Peers[0]
	p.Congestion = "rate"
	p.Queue = &QueueStatus{DelayMs: 4.25, Marks: 7, Drops: 2}
	p.Recovery = "retransmit"
	p.RecoveryStats = &RecoveryStatus{HoldMs: 61.5, Retained: 12, GiveUps: 3, BudgetOut: 1, Abandoned: 2, FEC: "32+2", Rebuilt: 9}
	p.Paths[0].CC.PacingRateBps = 12.5e6
	p.Paths[0].CC.Mode, p.Paths[0].CC.BandwidthBps = "contend", 9.6e6
	p.Paths[1].Priority, p.Paths[1].Budget, p.Paths[1].BudgetUsed, p.Paths[1].BudgetBytes = 1, "10GiB/month", 123456, 10<<30
	p.Paths[0].Recovery = &PathRecovery{Retransmitted: 5, RetransmittedBytes: 6900, Recovered: 40, Residual: 3, RepairSent: 70, RepairSentBytes: 96600, RepairUsed: 11}
	p.Paths[1].Recovery = &PathRecovery{Retransmitted: 38}
	return s
}

func TestFormatStatusRecovery(t *testing.T) {
	var b strings.Builder
	if err := FormatStatus(&b, recoverySample()); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, line := range []string{
		"  queue:       4.2 ms delay, 7 CoDel marks, 2 CoDel drops\n",
		// 5+38 resent, 40 recovered, 3 given up in all.
		"  recovery:    retransmit, hold 61.5 ms, 43 resent, 40 recovered, 3 given up (1 by budget), 2 gaps released\n",
		"  fec:         rate 32+2, 9 rebuilt here\n",
		"PACING  RESENT  RECOVERED  REPAIRS  REBUILT  RESIDUAL\n",
		"12.50 Mbit/s       5         40       70       11         3\n",
		"-      38          0        0        0         0\n",
	} {
		if !strings.Contains(got, line) {
			t.Errorf("status lacks %q:\n%s", line, got)
		}
	}
	j, err := json.Marshal(recoverySample())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"queue":{"delay_ms":4.25,"codel_marks":7,"codel_drops":2}`, `"recovery":"retransmit"`,
		`"recovery":{"retransmitted":5,"retransmitted_bytes":6900,"recovered":40,"residual":3,"rescued":0,"repair_sent":70,"repair_sent_bytes":96600,"repair_used":11,"retransmitted_latency_bytes":0,"repair_sent_latency_bytes":0}`, `"pacing_rate_bps":12500000`} {
		if !strings.Contains(string(j), key) {
			t.Errorf("JSON lacks %s:\n%s", key, j)
		}
	}
}

func TestFormatStatusCongestion(t *testing.T) {
	var b strings.Builder
	if err := FormatStatus(&b, ccSample()); err != nil {
		t.Fatal(err)
	}
	// 29440 B = 28.75 KiB, 14720 B = 14.38 KiB, 28000 B = 27.34 KiB.
	want := `interface braid0 (client)
  public key:  CLIENTKEY=
  uptime:      1h2m3s
  drops:       bad_mac 1, replay 3
  counters:    handshakes 2

peer server (SERVERKEY=)
  allowed ips: 0.0.0.0/0
  session:     established, index 0x1a2b3c4d, last handshake 12s ago
  scheduler:   earliest-arrival, reorder adaptive (hold 12.5 ms), congestion lia (3 queued)
  transfer:    3.00 GiB sent (1000 packets), 1.50 KiB received (20 packets)
  reorder:     100 in order, 6 acks past gaps, 3 reordered, 1 timeouts, 2 late, 4 duplicates, 5 held

  PATH             LOCAL           REMOTE  DEVICE    STATE      RTT     LOSS         RATE   SHARE        TX     RX   MTU       CWND   SSTHRESH   INFLIGHT  PACING
     0  198.18.1.1:40000  198.18.1.2:7000    eth1   active  20.0 ms   0.10 %  9.80 Mbit/s  60.0 %  2.00 MiB  512 B  1472  28.75 KiB  14.38 KiB  27.34 KiB       -
     1  198.18.2.1:40001  198.18.2.2:7000   wwan0  probing        -  25.00 %  0.00 Mbit/s   0.0 %       0 B    0 B     -  14.38 KiB        inf        0 B       -
`
	if got := b.String(); got != want {
		t.Errorf("FormatStatus:\n%s\nwant:\n%s", got, want)
	}
}

func TestCongestionJSONAndMetrics(t *testing.T) {
	b, err := json.Marshal(ccSample())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"cc_queued":3`, `"cc":{"cwnd_bytes":29440,"ssthresh_bytes":14720,"slow_start":false,"in_recovery":true,"congestion_events":4,"pacing_rate_bps":0}`,
		`"cc":{"cwnd_bytes":14720,"ssthresh_bytes":-1,"slow_start":true`} {
		if !bytes.Contains(b, []byte(key)) {
			t.Errorf("JSON lacks %s:\n%s", key, b)
		}
	}
	var back Status
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, ccSample()) {
		t.Errorf("round trip changed the status (%v)", err)
	}
	// Without a controller none of it appears.
	if b, _ := json.Marshal(sample()); bytes.Contains(b, []byte(`"cc`)) {
		t.Errorf("congestion fields present without a controller: %s", b)
	}

	c := NewCollector(ccSample)
	const want = `
# HELP braid_path_cwnd_bytes Congestion window (absent with congestion "none").
# TYPE braid_path_cwnd_bytes gauge
braid_path_cwnd_bytes{device="eth1",local="198.18.1.1:40000",name="server",path="0",peer="SERVERKEY=",remote="198.18.1.2:7000"} 29440
braid_path_cwnd_bytes{device="wwan0",local="198.18.2.1:40001",name="server",path="1",peer="SERVERKEY=",remote="198.18.2.2:7000"} 14720
# HELP braid_path_ssthresh_bytes Slow-start threshold (absent while infinite or with congestion "none").
# TYPE braid_path_ssthresh_bytes gauge
braid_path_ssthresh_bytes{device="eth1",local="198.18.1.1:40000",name="server",path="0",peer="SERVERKEY=",remote="198.18.1.2:7000"} 14720
# HELP braid_path_in_flight_bytes Bytes sent and neither acknowledged nor declared lost.
# TYPE braid_path_in_flight_bytes gauge
braid_path_in_flight_bytes{device="eth1",local="198.18.1.1:40000",name="server",path="0",peer="SERVERKEY=",remote="198.18.1.2:7000"} 28000
braid_path_in_flight_bytes{device="wwan0",local="198.18.2.1:40001",name="server",path="1",peer="SERVERKEY=",remote="198.18.2.2:7000"} 0
# HELP braid_path_congestion_events_total Congestion-window reductions (losses and timeouts).
# TYPE braid_path_congestion_events_total counter
braid_path_congestion_events_total{device="eth1",local="198.18.1.1:40000",name="server",path="0",peer="SERVERKEY=",remote="198.18.1.2:7000"} 4
braid_path_congestion_events_total{device="wwan0",local="198.18.2.1:40001",name="server",path="1",peer="SERVERKEY=",remote="198.18.2.2:7000"} 0
# HELP braid_peer_cc_queued_packets Packets waiting for congestion-window room now.
# TYPE braid_peer_cc_queued_packets gauge
braid_peer_cc_queued_packets{name="server",peer="SERVERKEY="} 3
`
	if err := compareMetrics(c, want, "braid_path_cwnd_bytes", "braid_path_ssthresh_bytes",
		"braid_path_in_flight_bytes", "braid_path_congestion_events_total", "braid_peer_cc_queued_packets"); err != nil {
		t.Error(err)
	}
	// 53 as without a controller, plus cwnd ×2, ssthresh ×1, events ×2, queued ×1.
	if n := countSamples(c); n != 6+14+2*16+1+6 {
		t.Errorf("collected %d metrics, want %d", n, 6+14+2*16+1+6)
	}
	if err := checkExposition(c); err != nil {
		t.Errorf("pedantic check: %v", err)
	}
}

// The TUN line shows the batching and the runs laid out for the device to
// coalesce (tunnel: tundev.Stager).
func TestFormatStatusTUN(t *testing.T) {
	st := sample()
	st.TUN = &TUNStatus{Reads: 10, ReadPackets: 175, Writes: 4, WritePackets: 200, WriteRuns: 8, WriteRunPackets: 196}
	var b strings.Builder
	if err := FormatStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	want := "  tun:         10 reads (17.5 packets each), 4 writes (50.0 packets each), 8 runs to coalesce (24.5 packets each)\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("FormatStatus:\n%s\nwant a line\n%s", b.String(), want)
	}
}
