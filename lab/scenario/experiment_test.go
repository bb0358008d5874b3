package scenario

import (
	"slices"
	"testing"
	"time"
)

func TestRecoveryOption(t *testing.T) {
	s := mustParse(t, `
[[transports]]
name = "braid"
[[transports]]
name = "braid"
recovery = "off"
[[transports]]
name = "braid"
recovery = "retransmit"
label = "braid arq"
[[transports]]
name = "udp-tunnel"
recovery = "auto"
`)
	var got []string
	for _, tr := range s.Transports {
		got = append(got, tr.Label+"|"+tr.Recovery)
	}
	want := []string{"braid|", "braid recovery=off|off", "braid arq|retransmit", "udp-tunnel recovery=auto|auto"}
	if !slices.Equal(got, want) {
		t.Errorf("labels|recovery = %q, want %q", got, want)
	}
}

func TestLatencyAndRealtimeParse(t *testing.T) {
	s := mustParse(t, "[experiment]\nlatency = true\necn = true\n")
	e := s.Experiment
	if !e.Latency || e.LatencyInterval != DefaultLatencyInterval || e.LatencyIdle != DefaultLatencyIdle || e.Workload != WorkloadDownload {
		t.Errorf("latency defaults: %+v", e)
	}
	for _, n := range s.Topology.Nodes {
		if want := n.Role != RoleLink; n.TCP.ECN != want {
			t.Errorf("node %s: ECN %v, want %v", n.Name, n.TCP.ECN, want)
		}
	}
	if sc := s.Topology.Client().TCP.Sysctls(); sc[len(sc)-1] != (Sysctl{"net.ipv4.tcp_ecn", "1"}) {
		t.Errorf("client sysctls end with %v, want tcp_ecn = 1", sc[len(sc)-1])
	}
	if d := mustParse(t, ""); d.Experiment.Latency || d.Experiment.ECN || d.Topology.Client().TCP.ECN {
		t.Errorf("latency and ECN are on by default: %+v", d.Experiment)
	}

	s = mustParse(t, "[experiment]\nlatency = true\nlatency_interval = \"20ms\"\nlatency_idle = \"2s\"\n")
	if e := s.Experiment; e.LatencyInterval != 20*time.Millisecond || e.LatencyIdle != 2*time.Second {
		t.Errorf("latency: %+v", e)
	}

	s = mustParse(t, "[experiment]\nworkload = \"realtime\"\n")
	rt := s.Experiment.Realtime
	if rt != (Realtime{Rate: DefaultRealtimeRate, Size: DefaultRealtimeSize, Duration: DefaultRealtimeDuration, Deadline: DefaultRealtimeDeadline}) {
		t.Errorf("realtime defaults: %+v", rt)
	}
	// 1 Mbit/s of 200 bytes: 625 packets/s, one every 1.6 ms.
	if rt.Interval() != 1600*time.Microsecond || rt.Packets() != 6250 {
		t.Errorf("interval %v, packets %d", rt.Interval(), rt.Packets())
	}
	s = mustParse(t, "[experiment]\nworkload = \"realtime\"\nrealtime_rate = \"64kbit\"\nrealtime_size = 160\nrealtime_duration = \"2s\"\nrealtime_deadline = \"150ms\"\n")
	if rt := s.Experiment.Realtime; rt.Rate != 64*Kbit || rt.Size != 160 || rt.Duration != 2*time.Second || rt.Deadline != 150*time.Millisecond || rt.Packets() != 100 {
		t.Errorf("realtime: %+v", rt)
	}
}

func TestLatencyAndRealtimeErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"[[transports]]\nname = \"braid\"\nrecovery = \"FEC\"\n", `t.toml: line 3: transports[0].recovery: unknown recovery mode "FEC" (valid: auto, retransmit, fec, off)`},
		{"[[transports]]\nname = \"direct\"\nrecovery = \"off\"\n", `t.toml: line 3: transports[0].recovery: transport "direct" takes no recovery option (its options: path)`},
		{"[[transports]]\nname = \"tcp-tunnel\"\nrecovery = \"off\"\n", `t.toml: line 3: transports[0].recovery: transport "tcp-tunnel" takes no recovery option (its options: path)`},
		{"[experiment]\nlatency = \"10ms\"\n", `t.toml: line 2: experiment.latency: expected a boolean, found a string`},
		{"[experiment]\nlatency_interval = \"20ms\"\n", `t.toml: line 2: experiment.latency_interval: set without latency = true`},
		{"[experiment]\nlatency = true\nlatency_interval = \"0s\"\n", `t.toml: line 3: experiment.latency_interval: 0s out of range (1ms..1s)`},
		{"[experiment]\nlatency = true\nlatency_idle = \"1\"\n", `t.toml: line 3: experiment.latency_idle: "1" is not a duration (e.g. "10ms", "1s")`},
		{"[experiment]\nworkload = \"video\"\n", `t.toml: line 2: experiment.workload: unknown workload "video" (valid: download, realtime)`},
		{"[experiment]\nrealtime_rate = \"1mbit\"\n", `t.toml: line 2: experiment.realtime_rate: set without workload = "realtime"`},
		{"[experiment]\nworkload = \"realtime\"\nrealtime_rate = \"1mbps\"\n", `t.toml: line 3: experiment.realtime_rate: "1mbps" is ambiguous (tc reads "mbps" as bytes per second); write bits, e.g. "1mbit"`},
		{"[experiment]\nworkload = \"realtime\"\nrealtime_size = 20\n", `t.toml: line 3: experiment.realtime_size: 20 out of range (32..1200 bytes of UDP payload)`},
		{"[experiment]\nworkload = \"realtime\"\nrealtime_rate = \"1gbit\"\n", `t.toml: line 3: experiment.realtime_rate: 1Gbit/s of 200-byte packets is 625000 packets/s; at most 20000`},
		{"[experiment]\nworkload = \"realtime\"\nrealtime_duration = \"100ms\"\n", `t.toml: line 3: experiment.realtime_duration: 100ms out of range (1s..1h0m0s)`},
		{"[experiment]\nworkload = \"realtime\"\nrealtime_deadline = \"20s\"\n", `t.toml: line 3: experiment.realtime_deadline: 20s out of range (1ms..10s)`},
		{"[experiment]\nworkload = \"realtime\"\nlatency = true\n", `t.toml: line 3: experiment.latency: probes the delay under a download; workload = "realtime" measures its own packets' delay`},
		{"[experiment]\nworkload = \"realtime\"\ncompeting = 1\n", `t.toml: line 3: experiment.competing: competing flows run during downloads, not with workload = "realtime"`},
		{"[experiment]\nworkload = \"realtime\"\ncompeting = 1\ncompeting_transport = \"braid\"\n[[transports]]\nname = \"braid\"\n", `t.toml: line 3: experiment.competing: competing flows run during downloads, not with workload = "realtime"`},
		{"[experiment]\nworkload = \"realtime\"\ncompeting_transport = \"braid\"\n", `t.toml: line 3: experiment.competing_transport: set without competing flows (experiment.competing)`},
		{"[experiment]\necn = 1\n", `t.toml: line 2: experiment.ecn: expected a boolean, found an integer`},
	} {
		_, err := Parse("t.toml", []byte(tc.doc))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q:\n got %v\nwant %s", tc.doc, err, tc.want)
		}
	}
}

// braid's new congestion names parse for braid transports and the sweep.
func TestRateAndAutoCongestion(t *testing.T) {
	s := mustParse(t, "[[transports]]\nname = \"braid\"\ncongestion = \"rate\"\n[[transports]]\nname = \"braid\"\ncongestion = \"auto\"\n")
	if a, b := s.Transports[0], s.Transports[1]; a.Congestion != "rate" || b.Congestion != "auto" || a.Label != "braid cc=rate" {
		t.Errorf("transports %+v", s.Transports)
	}
	mustParse(t, "[[transports]]\nname = \"braid\"\n[sweep]\ncongestion = [\"auto\", \"rate\", \"none\"]\n")
}
