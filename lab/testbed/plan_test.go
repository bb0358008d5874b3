package testbed

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/lab/linkemu"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/netns"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func addr(s string) netip.Addr  { return netip.MustParseAddr(s) }

func TestPlanDefaultTopology(t *testing.T) {
	p, err := NewPlan(scenario.DefaultTopology(), 42)
	if err != nil {
		t.Fatal(err)
	}
	// Two emulated paths make two veth pairs each; the LAN one plain pair.
	wantVeths := []Veth{
		{NodeA: "client", IfA: "a-primary", AddrA: pfx("198.18.1.1/24"), NodeB: "primary", IfB: "la-primary", NoOffloads: true},
		{NodeA: "primary", IfA: "lb-primary", NodeB: "server", IfB: "b-primary", AddrB: pfx("198.18.1.2/24"), NoOffloads: true},
		{NodeA: "client", IfA: "a-secondary", AddrA: pfx("198.18.2.1/24"), NodeB: "secondary", IfB: "la-secondary", NoOffloads: true},
		{NodeA: "secondary", IfA: "lb-secondary", NodeB: "server", IfB: "b-secondary", AddrB: pfx("198.18.2.2/24"), NoOffloads: true},
		{NodeA: "server", IfA: "a-lan", AddrA: pfx("198.18.3.1/24"), NodeB: "web", IfB: "b-lan", AddrB: pfx("198.18.3.2/24")},
	}
	if !slices.Equal(p.Veths, wantVeths) {
		t.Errorf("veths:\n got %+v\nwant %+v", p.Veths, wantVeths)
	}
	if len(p.Emulated) != 2 || p.Emulated[0].Node != "primary" || p.Emulated[0].A != "la-primary" || p.Emulated[0].B != "lb-primary" {
		t.Fatalf("emulated: %+v", p.Emulated)
	}
	// The default path: 10 Mbit/s, 10 ms each way, 1000-frame queue.
	want := linkemu.Shape{Rate: 10_000_000, Delay: 10 * time.Millisecond, QueuePackets: 1000, Seed: p.Emulated[0].AtoB.Seed}
	if p.Emulated[0].AtoB != want || p.Emulated[0].BtoA != want {
		t.Errorf("primary shape %+v / %+v, want %+v", p.Emulated[0].AtoB, p.Emulated[0].BtoA, want)
	}
	if p.Emulated[0].AtoB.Seed == p.Emulated[1].AtoB.Seed {
		t.Error("both links got the same emulator seed")
	}
	// The LAN: tbf at 1 Gbit/s on both ends, 1000 full frames of queue.
	wantShaped := []Shaped{
		{Node: "server", If: "a-lan", TBF: netns.TBF{Rate: 1_000_000_000, Limit: 1514000}},
		{Node: "web", If: "b-lan", TBF: netns.TBF{Rate: 1_000_000_000, Limit: 1514000}},
	}
	if !slices.Equal(p.Shaped, wantShaped) {
		t.Errorf("shaped %+v, want %+v", p.Shaped, wantShaped)
	}

	wantClient := []netns.Route{
		{Dst: pfx("198.18.3.0/24"), Via: addr("198.18.1.2"), Dev: "a-primary", Metric: DirectMetric},
		{Dst: pfx("198.18.1.0/24"), Dev: "a-primary", Src: addr("198.18.1.1"), Table: 100},
		{Dst: pfx("198.18.3.0/24"), Via: addr("198.18.1.2"), Dev: "a-primary", Table: 100},
		{Dst: pfx("198.18.2.0/24"), Dev: "a-secondary", Src: addr("198.18.2.1"), Table: 101},
		{Dst: pfx("198.18.3.0/24"), Via: addr("198.18.2.2"), Dev: "a-secondary", Table: 101},
	}
	if !slices.Equal(p.Routes["client"], wantClient) {
		t.Errorf("client routes:\n got %+v\nwant %+v", p.Routes["client"], wantClient)
	}
	wantRules := []netns.Rule{
		{Src: pfx("198.18.1.1/32"), Table: 100, Priority: 1000},
		{Src: pfx("198.18.2.1/32"), Table: 101, Priority: 1001},
	}
	if !slices.Equal(p.Rules["client"], wantRules) {
		t.Errorf("client rules %+v, want %+v", p.Rules["client"], wantRules)
	}
	wantWeb := []netns.Route{
		{Dst: pfx("198.18.1.0/24"), Via: addr("198.18.3.1"), Dev: "b-lan"},
		{Dst: pfx("198.18.2.0/24"), Via: addr("198.18.3.1"), Dev: "b-lan"},
		{Dst: pfx("100.64.0.0/24"), Via: addr("198.18.3.1"), Dev: "b-lan"},
	}
	if !slices.Equal(p.Routes["web"], wantWeb) {
		t.Errorf("web routes %+v, want %+v", p.Routes["web"], wantWeb)
	}
	if len(p.Routes["server"]) != 0 || len(p.Rules["server"]) != 0 {
		t.Errorf("server needs no routes (all connected), got %+v %+v", p.Routes["server"], p.Rules["server"])
	}
	if p.WebAddr != addr("198.18.3.2") || p.ServerLANAddr != addr("198.18.3.1") {
		t.Errorf("web %v server %v", p.WebAddr, p.ServerLANAddr)
	}
	wantPaths := []Path{
		{Name: "primary", Index: 0, ClientIf: "a-primary", ServerIf: "b-primary", ClientAddr: addr("198.18.1.1"), ServerAddr: addr("198.18.1.2"), Subnet: pfx("198.18.1.0/24"), Table: 100},
		{Name: "secondary", Index: 1, ClientIf: "a-secondary", ServerIf: "b-secondary", ClientAddr: addr("198.18.2.1"), ServerAddr: addr("198.18.2.2"), Subnet: pfx("198.18.2.0/24"), Table: 101},
	}
	if !slices.Equal(p.Paths, wantPaths) {
		t.Errorf("paths %+v, want %+v", p.Paths, wantPaths)
	}
}

func TestNodeSysctls(t *testing.T) {
	get := func(ss []scenario.Sysctl, k string) string {
		for _, s := range ss {
			if s.Key == k {
				return s.Value
			}
		}
		return "<absent>"
	}
	tcp := scenario.DefaultTCP()
	srv := NodeSysctls(scenario.Node{Name: "server", Role: scenario.RoleServer, TCP: tcp})
	cli := NodeSysctls(scenario.Node{Name: "client", Role: scenario.RoleClient, TCP: tcp})
	for _, c := range []struct{ got, want string }{
		{get(srv, "net.ipv4.ip_forward"), "1"},
		{get(cli, "net.ipv4.ip_forward"), "0"},
		{get(cli, "net.mptcp.enabled"), "1"},
		{get(cli, "net.ipv4.conf.default.rp_filter"), "0"},
		{get(cli, "net.ipv4.tcp_rmem"), "4096 87380 6291456"},
		{get(cli, "net.ipv4.tcp_no_metrics_save"), "1"},
		{get(cli, "net.ipv4.tcp_congestion_control"), "cubic"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	// rp_filter's default must be written before the veths exist (they take
	// it when created), which Build does by setting sysctls first; and it
	// must precede nothing that depends on it here.
	if srv[1].Key != "net.ipv4.conf.default.rp_filter" {
		t.Errorf("unexpected order: %v", srv)
	}
}

func TestShapeForConvertsPercent(t *testing.T) {
	ge, err := scenario.ParseLoss("gemodel 1% 75% 50% 0.5%")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ShapeFor(scenario.Shaping{Rate: 5 * scenario.Mbit, Delay: 30 * time.Millisecond, Jitter: 2 * time.Millisecond, Loss: ge, QueueLimit: 50}, 7, 8)
	if err != nil {
		t.Fatal(err)
	}
	want := linkemu.Shape{Rate: 5_000_000, Delay: 30 * time.Millisecond, Jitter: 2 * time.Millisecond,
		Loss: linkemu.GELoss(0.01, 0.75, 0.5, 0.005), QueuePackets: 50, Seed: 7}
	if s != want {
		t.Errorf("got %+v, want %+v", s, want)
	}
	u, _ := scenario.ParseLoss("1%")
	if got, _ := ShapeFor(scenario.Shaping{Loss: u}, 0, 0); got.Loss != linkemu.UniformLoss(0.01) {
		t.Errorf("uniform 1%%: %+v", got)
	}
	if got, _ := ShapeFor(scenario.Shaping{}, 0, 0); got.Loss != (linkemu.Loss{}) {
		t.Errorf("no loss: %+v", got)
	}
}

func TestIfNamesFit(t *testing.T) {
	long := strings.Repeat("x", scenario.MaxNameLen)
	for _, side := range []string{SideA, SideB, SideViaA, SideViaB} {
		if n := IfName(side, long); len(n) > 15 {
			t.Errorf("%q is %d bytes, over the kernel's 15", n, len(n))
		}
	}
}

func TestPlanRejectsIncompleteTopology(t *testing.T) {
	top := scenario.DefaultTopology()
	top.Links = top.Links[:2] // no server–web link
	if _, err := NewPlan(top, 1); err == nil {
		t.Error("a topology without a web link was accepted")
	}
}

func TestShapeForTraces(t *testing.T) {
	steady := scenario.Shaping{Delay: 25 * time.Millisecond, QueueLimit: 500, QueueBytes: 3000, Trace: scenario.Capacity{Profile: "steady", Mean: 10 * scenario.Mbit}}
	a, err := ShapeFor(steady, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if a.Trace == nil || a.Schedule != nil || a.Rate != 0 || a.QueueBytes != 3000 || a.QueuePackets != 500 {
		t.Fatalf("steady: %+v", a)
	}
	if r := a.Trace.MeanRate(); r < 9e6 || r > 11e6 {
		t.Errorf("steady 10 Mbit/s: mean rate %v", r)
	}
	if a.Trace.Period() != TraceLength {
		t.Errorf("period %v, want %v", a.Trace.Period(), TraceLength)
	}
	// The trace seed alone decides the trace: the loss seed does not.
	b, _ := ShapeFor(steady, 99, 2)
	c, _ := ShapeFor(steady, 1, 3)
	if a.Trace.OfferedBytes(time.Minute) != b.Trace.OfferedBytes(time.Minute) {
		t.Errorf("the loss seed changed the trace")
	}
	if a.Trace.OfferedBytes(time.Minute) == c.Trace.OfferedBytes(time.Minute) {
		t.Errorf("another trace seed gave the same trace")
	}
	sat, err := ShapeFor(scenario.Shaping{Trace: scenario.Capacity{Profile: "satellite"}}, 1, 2)
	if err != nil || sat.Schedule == nil || len(sat.Schedule.Steps) == 0 {
		t.Errorf("satellite: schedule %+v, %v", sat.Schedule, err)
	}
	if _, err := ShapeFor(scenario.Shaping{Trace: scenario.Capacity{File: filepath.Join(t.TempDir(), "none")}}, 1, 2); err == nil {
		t.Errorf("a missing trace file gave no error")
	}
	if TraceSeed(1, 0, linkemu.AtoB) == TraceSeed(1, 0, linkemu.BtoA) || TraceSeed(1, 0, linkemu.BtoA) == TraceSeed(1, 1, linkemu.BtoA) {
		t.Errorf("directions or links share a trace seed")
	}
}
