package mesh

import (
	"errors"
	"math"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/lab/testbed"
	"github.com/braid-vpn/braid/netns"
	"github.com/braid-vpn/braid/route"
)

func mustAdd(t *testing.T, g *route.Graph, id string, x, y float64) int {
	t.Helper()
	i, err := g.AddNodeAt(id, route.Point{X: x, Y: y})
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func mustLink(t *testing.T, g *route.Graph, a, b int) {
	t.Helper()
	if _, err := g.AddEdge(a, b, 1); err != nil {
		t.Fatal(err)
	}
}

// diamond is s(0) a(1) b(2) d(3) with links s–a, a–d, s–b, b–d, radius
// 20 m; lengths s–a 10 m, a–d 20 m, s–b 5 m, b–d 30.4 m (longer than the
// radius: explicit links need not respect it).
func diamond(t *testing.T) *route.Graph {
	g := route.NewGraph()
	s := mustAdd(t, g, "s", 0, 0)
	a := mustAdd(t, g, "a", 10, 0)
	b := mustAdd(t, g, "b", 0, -5)
	d := mustAdd(t, g, "d", 30, 0)
	mustLink(t, g, s, a)
	mustLink(t, g, a, d)
	mustLink(t, g, s, b)
	mustLink(t, g, b, d)
	g.SetRadius(20)
	return g
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func addr(s string) netip.Addr  { return netip.MustParseAddr(s) }

func TestPlanDiamond(t *testing.T) {
	g := diamond(t)
	p, err := NewPlan(g, 0, 3, []route.Path{{0, 1, 3}, {0, 2, 3}}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Hop{
		{Path: 0, Index: 0, From: 0, To: 1, FromAddr: addr("198.18.0.1"), ToAddr: addr("198.18.0.2"), Length: 10, Delay: 1500 * time.Microsecond},
		{Path: 0, Index: 1, From: 1, To: 3, FromAddr: addr("198.18.0.5"), ToAddr: addr("198.18.0.6"), Length: 20, Delay: 2 * time.Millisecond},
		{Path: 1, Index: 0, From: 0, To: 2, FromAddr: addr("198.18.0.9"), ToAddr: addr("198.18.0.10"), Length: 5, Delay: 1250 * time.Microsecond},
		{Path: 1, Index: 1, From: 2, To: 3, FromAddr: addr("198.18.0.13"), ToAddr: addr("198.18.0.14"), Length: math.Hypot(30, 5), Delay: 2 * time.Millisecond},
	}
	if !reflect.DeepEqual(p.Hops, want) {
		t.Errorf("hops:\n got %+v\nwant %+v", p.Hops, want)
	}
	ln := "link node of hop 0"
	wantVeths := []testbed.Veth{
		{NodeA: "s", IfA: "hop0", AddrA: pfx("198.18.0.1/30"), NodeB: ln, IfB: "hop0-a", NoOffloads: true},
		{NodeA: ln, IfA: "hop0-b", NodeB: "a", IfB: "hop0", AddrB: pfx("198.18.0.2/30"), NoOffloads: true},
	}
	if len(p.Testbed.Veths) != 8 || !reflect.DeepEqual(p.Testbed.Veths[:2], wantVeths) {
		t.Errorf("veths of hop 0:\n got %+v\nwant %+v", p.Testbed.Veths, wantVeths)
	}
	if e := p.Testbed.Emulated[0]; e.Link != "hop 0" || e.Node != ln || e.A != "hop0-a" || e.B != "hop0-b" || e.AtoB.Delay != 1500*time.Microsecond || e.BtoA != e.AtoB {
		t.Errorf("emulated link of hop 0: %+v", e)
	}
	if got := []netip.Addr{p.Paths[0].ClientAddr, p.Paths[1].ClientAddr}; got[0] != addr("198.18.0.1") || got[1] != addr("198.18.0.9") {
		t.Errorf("client addresses %v, want 198.18.0.1 and 198.18.0.9", got)
	}
	if !reflect.DeepEqual(p.Paths[0].Hops, []int{0, 1}) || !reflect.DeepEqual(p.Paths[1].Hops, []int{2, 3}) {
		t.Errorf("path hops %v %v", p.Paths[0].Hops, p.Paths[1].Hops)
	}
	if p.Paths[0].Table != 100 || p.Paths[1].Table != 101 || p.Paths[0].Priority != 1000 || p.Paths[1].Priority != 1001 {
		t.Errorf("tables/priorities %+v", p.Paths)
	}
	var nodes []string
	for _, n := range p.Testbed.Nodes {
		nodes = append(nodes, n.Name)
	}
	if !reflect.DeepEqual(nodes, []string{"s", "a", "b", "d", "link node of hop 0", "link node of hop 1", "link node of hop 2", "link node of hop 3"}) {
		t.Errorf("nodes %v", nodes)
	}
	svc := pfx("198.19.0.1/32")
	wantRoutes := map[string][]netns.Route{
		"s": {
			{Dst: svc, Via: addr("198.18.0.2"), Dev: "hop0", Table: 100},
			{Dst: svc, Via: addr("198.18.0.2"), Dev: "hop0", Metric: 100},
			{Dst: svc, Via: addr("198.18.0.10"), Dev: "hop2", Table: 101},
		},
		"a": {
			{Dst: pfx("198.18.0.1/32"), Via: addr("198.18.0.1"), Dev: "hop0"},
			{Dst: svc, Via: addr("198.18.0.6"), Dev: "hop1", Table: 100},
		},
		"b": {
			{Dst: pfx("198.18.0.9/32"), Via: addr("198.18.0.9"), Dev: "hop2"},
			{Dst: svc, Via: addr("198.18.0.14"), Dev: "hop3", Table: 101},
		},
		"d": {
			{Dst: pfx("198.18.0.1/32"), Via: addr("198.18.0.5"), Dev: "hop1", Src: addr("198.19.0.1")},
			{Dst: pfx("198.18.0.9/32"), Via: addr("198.18.0.13"), Dev: "hop3", Src: addr("198.19.0.1")},
		},
	}
	if !reflect.DeepEqual(p.Testbed.Routes, wantRoutes) {
		t.Errorf("routes:\n got %+v\nwant %+v", p.Testbed.Routes, wantRoutes)
	}
	wantRules := map[string][]netns.Rule{
		"s": {{Src: pfx("198.18.0.1/32"), Table: 100, Priority: 1000}, {Src: pfx("198.18.0.9/32"), Table: 101, Priority: 1001}},
		"a": {{Src: pfx("198.18.0.1/32"), Table: 100, Priority: 1000}},
		"b": {{Src: pfx("198.18.0.9/32"), Table: 101, Priority: 1001}},
	}
	if !reflect.DeepEqual(p.Testbed.Rules, wantRules) {
		t.Errorf("rules:\n got %+v\nwant %+v", p.Testbed.Rules, wantRules)
	}
	for v, fwd := range map[string]string{"s": "0", "a": "1", "b": "1", "d": "0"} {
		got := ""
		for _, s := range p.Testbed.Sysctls[v] {
			if s.Key == "net.ipv4.ip_forward" {
				got = s.Value
			}
		}
		if got != fwd {
			t.Errorf("node %s: ip_forward %q, want %q", v, got, fwd)
		}
	}

	one, err := p.MediaGroups(SingleChannel)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(one, [][]int{{0, 1, 2, 3}}) {
		t.Errorf("single channel groups %v, want every hop in one", one)
	}
	two, err := p.MediaGroups(TwoChannels)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(two, [][]int{{0, 1}, {2, 3}}) {
		t.Errorf("two-channel groups %v, want one per path", two)
	}
	if _, err := p.MediaGroups(3); err == nil {
		t.Error("3 channels accepted")
	}
}

// shared is a mesh whose LD pair crosses at m while ND and ZD take a third
// way: s–a–m–c–d, s–b–m–e–d, s–x–y–z–d, nodes listed so that greedy LD
// picks the first two (every path has 4 hops; ties go to the lower
// indices).
func shared(t *testing.T) (*route.Graph, int, int) {
	g := route.NewGraph()
	ids := []string{"s", "a", "b", "m", "c", "e", "x", "y", "z", "d"}
	idx := map[string]int{}
	for _, id := range ids {
		i, err := g.AddNode(id)
		if err != nil {
			t.Fatal(err)
		}
		idx[id] = i
	}
	for _, l := range [][2]string{{"s", "a"}, {"a", "m"}, {"m", "c"}, {"c", "d"}, {"s", "b"}, {"b", "m"}, {"m", "e"}, {"e", "d"},
		{"s", "x"}, {"x", "y"}, {"y", "z"}, {"z", "d"}} {
		mustLink(t, g, idx[l[0]], idx[l[1]])
	}
	return g, idx["s"], idx["d"]
}

func TestSharedGraphPairs(t *testing.T) {
	g, s, d := shared(t)
	for algo, want := range map[route.Algorithm][][]string{
		route.LD: {{"s", "a", "m", "c", "d"}, {"s", "b", "m", "e", "d"}, {"s", "x", "y", "z", "d"}},
		route.ND: {{"s", "a", "m", "c", "d"}, {"s", "x", "y", "z", "d"}},
		route.ZD: {{"s", "a", "m", "c", "d"}, {"s", "x", "y", "z", "d"}},
	} {
		ps, err := route.Find(g, s, d, algo, 0, route.HopCount)
		if err != nil {
			t.Fatal(err)
		}
		var got [][]string
		for _, p := range ps {
			got = append(got, g.IDs(p))
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", algo, got, want)
		}
	}
}

// TestPlanSharedNode: where two link-disjoint paths cross, the node has
// one rule and table per path, each table sending on along its own path,
// and routes both path addresses back the way each came.
func TestPlanSharedNode(t *testing.T) {
	g, s, d := shared(t)
	ps, err := route.Find(g, s, d, route.LD, 0, route.HopCount)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(g, s, d, ps[:2], Config{})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := g.Index("m")
	// Hops: path 0 s–a 0, a–m 1, m–c 2, c–d 3; path 1 s–b 4, b–m 5, m–e 6, e–d 7.
	h := func(i int) Hop { return p.Hops[i] }
	if h(2).From != m || h(6).From != m || h(1).To != m || h(5).To != m {
		t.Fatalf("hop layout unexpected:\n%+v", p.Hops)
	}
	svc := pfx("198.19.0.1/32")
	want := []netns.Route{
		{Dst: pfx("198.18.0.1/32"), Via: addr("198.18.0.5"), Dev: "hop1"},
		{Dst: svc, Via: addr("198.18.0.10"), Dev: "hop2", Table: 100},
		{Dst: pfx("198.18.0.17/32"), Via: addr("198.18.0.21"), Dev: "hop5"},
		{Dst: svc, Via: addr("198.18.0.26"), Dev: "hop6", Table: 101},
	}
	if !reflect.DeepEqual(p.Testbed.Routes["m"], want) {
		t.Errorf("routes at m:\n got %+v\nwant %+v", p.Testbed.Routes["m"], want)
	}
	wantRules := []netns.Rule{{Src: pfx("198.18.0.1/32"), Table: 100, Priority: 1000}, {Src: pfx("198.18.0.17/32"), Table: 101, Priority: 1001}}
	if !reflect.DeepEqual(p.Testbed.Rules["m"], wantRules) {
		t.Errorf("rules at m: %+v, want %+v", p.Testbed.Rules["m"], wantRules)
	}
	// No positions: delays are the midpoint.
	for _, hop := range p.Hops {
		if hop.Delay != 1500*time.Microsecond || !math.IsNaN(hop.Length) {
			t.Errorf("hop %d: delay %v, length %v; want 1.5 ms and NaN", hop.Index, hop.Delay, hop.Length)
		}
	}
	two, err := p.MediaGroups(TwoChannels)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(two, [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}) {
		t.Errorf("two-channel groups %v", two)
	}
}

func TestPlanDirectLink(t *testing.T) {
	g := route.NewGraph()
	s, _ := g.AddNode("s")
	d, _ := g.AddNode("d")
	mustLink(t, g, s, d)
	p, err := NewPlan(g, s, d, []route.Path{{s, d}}, Config{Rate: 1e6, MinDelay: time.Millisecond, MaxDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Hops) != 1 || p.Hops[0].Delay != time.Millisecond || p.Paths[0].ClientAddr != addr("198.18.0.1") {
		t.Fatalf("plan:\n%+v", p.Hops)
	}
	want := map[string][]netns.Route{
		"s": {
			{Dst: pfx("198.19.0.1/32"), Via: addr("198.18.0.2"), Dev: "hop0", Table: 100},
			{Dst: pfx("198.19.0.1/32"), Via: addr("198.18.0.2"), Dev: "hop0", Metric: 100},
		},
		"d": {{Dst: pfx("198.18.0.1/32"), Via: addr("198.18.0.1"), Dev: "hop0", Src: addr("198.19.0.1")}},
	}
	if !reflect.DeepEqual(p.Testbed.Routes, want) {
		t.Errorf("routes %+v, want %+v", p.Testbed.Routes, want)
	}
	if p.Config.Rate != 1e6 || p.Config.QueuePackets != DefaultQueuePackets {
		t.Errorf("config %+v", p.Config)
	}
}

func TestPlanErrors(t *testing.T) {
	g := diamond(t)
	for _, c := range []struct {
		name     string
		src, dst int
		paths    []route.Path
		cfg      Config
		want     string
	}{
		{"same ends", 0, 0, []route.Path{{0, 1, 3}}, Config{}, "same node"},
		{"no paths", 0, 3, nil, Config{}, "0 paths"},
		{"shared link", 0, 3, []route.Path{{0, 1, 3}, {0, 1, 3}}, Config{}, "link-disjoint"},
		{"wrong start", 0, 3, []route.Path{{1, 3}}, Config{}, "path 0"},
		{"no such link", 0, 3, []route.Path{{0, 3}}, Config{}, "no link"},
		{"delay range", 0, 3, []route.Path{{0, 1, 3}}, Config{MinDelay: 2 * time.Millisecond, MaxDelay: time.Millisecond}, "delay range"},
		{"negative queue", 0, 3, []route.Path{{0, 1, 3}}, Config{QueuePackets: -1}, "queue"},
	} {
		_, err := NewPlan(g, c.src, c.dst, c.paths, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	_, err := NewPlan(g, 1, 1, []route.Path{{1}}, Config{})
	if !errors.Is(err, route.ErrSameNode) {
		t.Errorf("same node: %v, want ErrSameNode", err)
	}
}

func TestHopSubnet(t *testing.T) {
	for h, want := range map[int]string{0: "198.18.0.0/30", 1: "198.18.0.4/30", 64: "198.18.1.0/30", maxHops - 1: "198.18.255.252/30"} {
		if got := HopSubnet(h); got != pfx(want) {
			t.Errorf("HopSubnet(%d) = %v, want %s", h, got, want)
		}
	}
	if HopBase.Contains(Service) || !pfx("198.18.0.0/15").Contains(Service) {
		t.Errorf("service %v must be in 198.18.0.0/15 and outside the hop block %v", Service, HopBase)
	}
}
