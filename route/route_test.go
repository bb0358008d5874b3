package route

import (
	"errors"
	"slices"
	"testing"
)

// build makes a graph with nodes "0".."n-1" and the given unit links.
func build(t testing.TB, n int, edges [][2]int) *Graph {
	t.Helper()
	g := NewGraph()
	for i := range n {
		if _, err := g.AddNode(string(rune('0' + i))); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range edges {
		if _, err := g.AddEdge(e[0], e[1], 1); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

func paths(ps ...[]int) []Path {
	out := make([]Path, len(ps))
	for i, p := range ps {
		out[i] = Path(p)
	}
	return out
}

func equalPaths(a, b []Path) bool {
	return slices.EqualFunc(a, b, func(x, y Path) bool { return slices.Equal(x, y) })
}

// trap is the classic trap topology: the unique shortest path s-a-b-d
// (3 hops) blocks every other route once its links or nodes are gone, yet
// s-a-x1-x2-d and s-y1-y2-b-d are node-disjoint.
//
//	s=0 a=1 b=2 d=3 x1=4 x2=5 y1=6 y2=7
//
//	s ── a ── b ── d
//	│    │    │    │
//	│    x1 ─────── x2
//	y1 ── y2 ─┘
func trap(t testing.TB) *Graph {
	return build(t, 8, [][2]int{
		{0, 1}, {1, 2}, {2, 3}, // s-a-b-d
		{1, 4}, {4, 5}, {5, 3}, // a-x1-x2-d
		{0, 6}, {6, 7}, {7, 2}, // s-y1-y2-b
	})
}

func TestTrapTopology(t *testing.T) {
	g := trap(t)
	short := paths([]int{0, 1, 2, 3})
	for _, k := range []Disjointness{LinkDisjoint, NodeDisjoint, ZoneDisjoint} {
		got, err := Greedy(g, 0, 3, k, HopCount)
		if err != nil {
			t.Fatal(err)
		}
		if !equalPaths(got, short) {
			t.Errorf("greedy %s: %v, want only the shortest path %v", k, got, short)
		}
	}
	want := paths([]int{0, 1, 4, 5, 3}, []int{0, 6, 7, 2, 3})
	for _, k := range []Disjointness{LinkDisjoint, NodeDisjoint} {
		got, err := MaxDisjoint(g, 0, 3, k, HopCount)
		if err != nil {
			t.Fatal(err)
		}
		if !equalPaths(got, want) {
			t.Errorf("max %s: %v, want %v", k, got, want)
		}
		got, err = MinCostDisjoint(g, 0, 3, 2, k, HopCount)
		if err != nil {
			t.Fatal(err)
		}
		if !equalPaths(got, want) {
			t.Errorf("opt %s k=2: %v, want %v", k, got, want)
		}
		got, err = MinCostDisjoint(g, 0, 3, 1, k, HopCount)
		if err != nil || !equalPaths(got, short) {
			t.Errorf("opt %s k=1: %v %v, want %v", k, got, err, short)
		}
		_, err = MinCostDisjoint(g, 0, 3, 3, k, HopCount)
		if !errors.Is(err, ErrTooFewPaths) {
			t.Errorf("opt %s k=3: %v, want ErrTooFewPaths", k, err)
		}
	}
}

// bowtie has a cut node c: two link-disjoint paths, one node-disjoint.
//
//	s=0 c=1 e=2 f=3 d=4;  s-c, s-e, e-c, c-d, c-f, f-d
func bowtie(t testing.TB) *Graph {
	return build(t, 5, [][2]int{{0, 1}, {0, 2}, {2, 1}, {1, 4}, {1, 3}, {3, 4}})
}

func TestBowtie(t *testing.T) {
	g := bowtie(t)
	got, err := Greedy(g, 0, 4, LinkDisjoint, HopCount)
	if want := paths([]int{0, 1, 4}, []int{0, 2, 1, 3, 4}); err != nil || !equalPaths(got, want) {
		t.Errorf("LD: %v %v, want %v", got, err, want)
	}
	for _, k := range []Disjointness{NodeDisjoint, ZoneDisjoint} {
		got, err := Greedy(g, 0, 4, k, HopCount)
		if want := paths([]int{0, 1, 4}); err != nil || !equalPaths(got, want) {
			t.Errorf("greedy %s: %v %v, want %v", k, got, err, want)
		}
	}
	ml, err := MaxDisjoint(g, 0, 4, LinkDisjoint, HopCount)
	if err != nil || len(ml) != 2 {
		t.Fatalf("max-link: %v %v, want 2 paths", ml, err)
	}
	// Two pairs tie at 6 hops in total: {s-c-d, s-e-c-f-d} and
	// {s-c-f-d, s-e-c-d}; either is optimal.
	if c := g.PathCost(ml[0], HopCount) + g.PathCost(ml[1], HopCount); c != 6 {
		t.Errorf("max-link total %v hops, want 6", c)
	}
	if err := CheckDisjoint(g, ml, LinkDisjoint); err != nil {
		t.Error(err)
	}
	if err := CheckDisjoint(g, ml, NodeDisjoint); err == nil {
		t.Errorf("max-link paths %v pass as node-disjoint; both go through c", ml)
	}
	mn, err := MaxDisjoint(g, 0, 4, NodeDisjoint, HopCount)
	if want := paths([]int{0, 1, 4}); err != nil || !equalPaths(mn, want) {
		t.Errorf("max-node: %v %v, want %v", mn, err, want)
	}
	if _, err := MinCostDisjoint(g, 0, 4, 2, NodeDisjoint, HopCount); !errors.Is(err, ErrTooFewPaths) {
		t.Errorf("opt-node k=2 through a cut node: %v, want ErrTooFewPaths", err)
	}
}

// diamond: s=0 a=1 b=2 d=3 with s-a, a-d, s-b, b-d and a chord a-b. The
// two relays hear each other, so the routes are node- but not
// zone-disjoint.
func TestDiamondZone(t *testing.T) {
	g := build(t, 4, [][2]int{{0, 1}, {1, 3}, {0, 2}, {2, 3}, {1, 2}})
	two := paths([]int{0, 1, 3}, []int{0, 2, 3})
	for _, k := range []Disjointness{LinkDisjoint, NodeDisjoint} {
		got, err := Greedy(g, 0, 3, k, HopCount)
		if err != nil || !equalPaths(got, two) {
			t.Errorf("greedy %s: %v %v, want %v", k, got, err, two)
		}
	}
	got, err := Greedy(g, 0, 3, ZoneDisjoint, HopCount)
	if want := paths([]int{0, 1, 3}); err != nil || !equalPaths(got, want) {
		t.Errorf("ZD: %v %v, want %v (b is a's neighbour and goes with it)", got, err, want)
	}
	if err := CheckDisjoint(g, two, ZoneDisjoint); err == nil {
		t.Error("s-a-d and s-b-d pass as zone-disjoint though a and b are linked")
	}
	// Without the chord they are zone-disjoint, and ZD finds both.
	g2 := build(t, 4, [][2]int{{0, 1}, {1, 3}, {0, 2}, {2, 3}})
	got, err = Greedy(g2, 0, 3, ZoneDisjoint, HopCount)
	if err != nil || !equalPaths(got, two) {
		t.Errorf("ZD without chord: %v %v, want %v", got, err, two)
	}
}

// A direct source–destination link is a one-hop path that every
// algorithm uses exactly once.
func TestDirectLink(t *testing.T) {
	// s=0 d=1 a=2 b=3: s-d, s-a, a-d, s-b, b-d, a-b
	g := build(t, 4, [][2]int{{0, 1}, {0, 2}, {2, 1}, {0, 3}, {3, 1}, {2, 3}})
	cases := []struct {
		algo Algorithm
		want []Path
	}{
		{LD, paths([]int{0, 1}, []int{0, 2, 1}, []int{0, 3, 1})},
		{ND, paths([]int{0, 1}, []int{0, 2, 1}, []int{0, 3, 1})},
		// ZD: the direct link has no zone; s-a-d then takes b with a.
		{ZD, paths([]int{0, 1}, []int{0, 2, 1})},
		{MaxLink, paths([]int{0, 1}, []int{0, 2, 1}, []int{0, 3, 1})},
		{MaxNode, paths([]int{0, 1}, []int{0, 2, 1}, []int{0, 3, 1})},
	}
	for _, c := range cases {
		got, err := Find(g, 0, 1, c.algo, 0, HopCount)
		if err != nil || !equalPaths(got, c.want) {
			t.Errorf("%s: %v %v, want %v", c.algo, got, err, c.want)
		}
	}
	got, err := Find(g, 0, 1, OptNode, 2, HopCount)
	if want := paths([]int{0, 1}, []int{0, 2, 1}); err != nil || !equalPaths(got, want) {
		t.Errorf("opt-node k=2: %v %v, want %v", got, err, want)
	}
	if err := CheckDisjoint(g, paths([]int{0, 1}, []int{0, 1}), NodeDisjoint); err == nil {
		t.Error("the direct link twice passes as two node-disjoint paths")
	}
	// Only the direct link: one path, not an endless list of it.
	g1 := build(t, 2, [][2]int{{0, 1}})
	for _, a := range []Algorithm{LD, ND, ZD, MaxLink, MaxNode} {
		got, err := Find(g1, 0, 1, a, 0, HopCount)
		if err != nil || !equalPaths(got, paths([]int{0, 1})) {
			t.Errorf("%s on a single link: %v %v", a, got, err)
		}
	}
}

func TestThreeRelays(t *testing.T) {
	// s=0, relays 1 2 3, d=4: three node-disjoint two-hop paths.
	g := build(t, 5, [][2]int{{0, 1}, {0, 2}, {0, 3}, {1, 4}, {2, 4}, {3, 4}})
	three := paths([]int{0, 1, 4}, []int{0, 2, 4}, []int{0, 3, 4})
	for _, a := range []Algorithm{LD, ND, ZD, MaxLink, MaxNode} {
		got, err := Find(g, 0, 4, a, 0, HopCount)
		if err != nil || !equalPaths(got, three) {
			t.Errorf("%s: %v %v, want %v", a, got, err, three)
		}
	}
	// Relays 1 and 2 hear each other: ZD keeps one of them.
	if _, err := g.AddEdge(1, 2, 1); err != nil {
		t.Fatal(err)
	}
	got, err := Greedy(g, 0, 4, ZoneDisjoint, HopCount)
	if want := paths([]int{0, 1, 4}, []int{0, 3, 4}); err != nil || !equalPaths(got, want) {
		t.Errorf("ZD with 1-2 linked: %v %v, want %v", got, err, want)
	}
	got, err = Greedy(g, 0, 4, NodeDisjoint, HopCount)
	if err != nil || !equalPaths(got, three) {
		t.Errorf("ND with 1-2 linked: %v %v, want %v", got, err, three)
	}
}

// Among equally short paths the lexicographically smallest node sequence
// from the source wins, whatever order the links were added in.
func TestTieBreaking(t *testing.T) {
	// 0-2-3-5 and 0-1-4-5: both 3 hops. Walking back from the
	// destination would prefer 3 over 4; from the source, 1 beats 2.
	links := [][2]int{{0, 2}, {2, 3}, {3, 5}, {0, 1}, {1, 4}, {4, 5}}
	want := Path{0, 1, 4, 5}
	for _, order := range [][]int{{0, 1, 2, 3, 4, 5}, {5, 4, 3, 2, 1, 0}, {3, 0, 5, 1, 4, 2}} {
		var ls [][2]int
		for _, i := range order {
			ls = append(ls, links[i])
		}
		g := build(t, 6, ls)
		for _, m := range []Metric{HopCount, EdgeWeight} {
			p, err := ShortestPath(g, 0, 5, m)
			if err != nil || !slices.Equal(p, want) {
				t.Errorf("order %v, %s: %v %v, want %v", order, m, p, err, want)
			}
		}
		// The same under Dijkstra proper (non-unit weights, all equal).
		for e := range g.NumEdges() {
			g.SetWeight(e, 2.5)
		}
		p, err := ShortestPath(g, 0, 5, EdgeWeight)
		if err != nil || !slices.Equal(p, want) {
			t.Errorf("order %v, weights 2.5: %v %v, want %v", order, p, err, want)
		}
	}
}

func TestWeights(t *testing.T) {
	// s=0 a=1 b=2 d=3: s-d weight 5, s-a-d weights 1+1, s-b-d 0.5+0.5.
	g := NewGraph()
	for _, id := range []string{"s", "a", "b", "d"} {
		g.AddNode(id)
	}
	for _, e := range []struct {
		a, b int
		w    float64
	}{{0, 3, 5}, {0, 1, 1}, {1, 3, 1}, {0, 2, 0.5}, {2, 3, 0.5}} {
		if _, err := g.AddEdge(e.a, e.b, e.w); err != nil {
			t.Fatal(err)
		}
	}
	if p, _ := ShortestPath(g, 0, 3, HopCount); !slices.Equal(p, Path{0, 3}) {
		t.Errorf("min-hop: %v, want the direct link", p)
	}
	if p, _ := ShortestPath(g, 0, 3, EdgeWeight); !slices.Equal(p, Path{0, 2, 3}) {
		t.Errorf("min-weight: %v, want s-b-d (cost 1)", p)
	}
	got, err := MinCostDisjoint(g, 0, 3, 2, NodeDisjoint, EdgeWeight)
	if want := paths([]int{0, 2, 3}, []int{0, 1, 3}); err != nil || !equalPaths(got, want) {
		t.Errorf("opt-node k=2 by weight: %v %v, want %v", got, err, want)
	}
	got, err = MinCostDisjoint(g, 0, 3, 2, NodeDisjoint, HopCount)
	if want := paths([]int{0, 3}, []int{0, 1, 3}); err != nil || !equalPaths(got, want) {
		t.Errorf("opt-node k=2 by hops: %v %v, want %v", got, err, want)
	}
	got, err = Greedy(g, 0, 3, LinkDisjoint, EdgeWeight)
	if want := paths([]int{0, 2, 3}, []int{0, 1, 3}, []int{0, 3}); err != nil || !equalPaths(got, want) {
		t.Errorf("LD by weight: %v %v, want %v (in the order found)", got, err, want)
	}
	if c := g.PathCost(Path{0, 1, 3}, EdgeWeight); c != 2 {
		t.Errorf("cost of s-a-d = %v, want 2", c)
	}
}

// Suurballe's textbook case where the optimal pair must give up a link of
// the shortest path: s=0 a=1 b=2 d=3 c=4 e=5 with weights
//
//	s-a 1, a-b 1, b-d 1 (the shortest path, 3)
//	s-c 2, c-b 2        (a detour into b)
//	a-e 2, e-d 2        (a detour out of a)
//
// Greedy deletion of s-a-b-d leaves nothing; the optimum is s-a-e-d and
// s-c-b-d, 5 + 5 = 10.
func TestSuurballeInterlacing(t *testing.T) {
	g := NewGraph()
	for _, id := range []string{"s", "a", "b", "d", "c", "e"} {
		g.AddNode(id)
	}
	for _, e := range []struct {
		a, b int
		w    float64
	}{{0, 1, 1}, {1, 2, 1}, {2, 3, 1}, {0, 4, 2}, {4, 2, 2}, {1, 5, 2}, {5, 3, 2}} {
		g.AddEdge(e.a, e.b, e.w)
	}
	for _, k := range []Disjointness{LinkDisjoint, NodeDisjoint} {
		got, err := MinCostDisjoint(g, 0, 3, 2, k, EdgeWeight)
		want := paths([]int{0, 1, 5, 3}, []int{0, 4, 2, 3})
		if err != nil || !equalPaths(got, want) {
			t.Errorf("%s: %v %v, want %v", k, got, err, want)
		}
		gr, _ := Greedy(g, 0, 3, k, EdgeWeight)
		if len(gr) != 1 {
			t.Errorf("greedy %s found %v; the trap should leave one path", k, gr)
		}
	}
}

func TestErrors(t *testing.T) {
	g := trap(t)
	iso, _ := g.AddNode("z") // node 8, no links
	var s Solver
	for _, a := range Algorithms {
		if _, err := s.Find(g, 0, 3, a, 2, HopCount); err != nil {
			t.Errorf("%s on the trap: %v", a, err)
		}
		if _, err := s.Find(g, 0, 99, a, 2, HopCount); !errors.Is(err, ErrNoNode) {
			t.Errorf("%s to a missing node: %v, want ErrNoNode", a, err)
		}
		if _, err := s.Find(g, -1, 3, a, 2, HopCount); !errors.Is(err, ErrNoNode) {
			t.Errorf("%s from index -1: %v, want ErrNoNode", a, err)
		}
		if _, err := s.Find(g, 3, 3, a, 2, HopCount); !errors.Is(err, ErrSameNode) {
			t.Errorf("%s from a node to itself: %v, want ErrSameNode", a, err)
		}
		if _, err := s.Find(g, 0, iso, a, 2, HopCount); !errors.Is(err, ErrNoPath) {
			t.Errorf("%s to an isolated node: %v, want ErrNoPath", a, err)
		}
		if _, err := s.Find(g, 0, 3, a, 2, Metric(7)); !errors.Is(err, ErrBadParam) {
			t.Errorf("%s with metric 7: %v, want ErrBadParam", a, err)
		}
	}
	if _, err := s.Find(g, 0, 3, OptLink, 0, HopCount); !errors.Is(err, ErrBadParam) {
		t.Errorf("k = 0: %v, want ErrBadParam", err)
	}
	if _, err := s.Find(g, 0, 3, Algorithm("dijkstra"), 0, HopCount); !errors.Is(err, ErrBadParam) {
		t.Errorf("unknown algorithm: %v, want ErrBadParam", err)
	}
	if _, err := s.MaxDisjoint(g, 0, 3, ZoneDisjoint, HopCount); !errors.Is(err, ErrBadParam) {
		t.Errorf("optimal zone-disjoint: %v, want ErrBadParam", err)
	}
	if _, err := s.Greedy(g, 0, 3, Disjointness(9), HopCount); !errors.Is(err, ErrBadParam) {
		t.Errorf("disjointness 9: %v, want ErrBadParam", err)
	}
	if _, err := g.Index("nope"); !errors.Is(err, ErrNoNode) {
		t.Errorf("Index(nope): %v", err)
	}
	if i, err := g.Index("3"); err != nil || i != 3 {
		t.Errorf("Index(3) = %d, %v", i, err)
	}
	if _, err := g.AddNode("3"); !errors.Is(err, ErrBadParam) {
		t.Errorf("duplicate node id: %v", err)
	}
	if _, err := g.AddNode(""); !errors.Is(err, ErrBadParam) {
		t.Errorf("empty node id: %v", err)
	}
	for _, c := range []struct {
		a, b int
		w    float64
		want error
	}{
		{0, 0, 1, ErrBadParam},  // self-loop
		{0, 1, 1, ErrBadParam},  // duplicate
		{1, 0, 1, ErrBadParam},  // duplicate, reversed
		{0, 5, 0, ErrBadParam},  // zero weight
		{0, 5, -1, ErrBadParam}, // negative weight
		{0, 42, 1, ErrNoNode},
	} {
		if _, err := g.AddEdge(c.a, c.b, c.w); !errors.Is(err, c.want) {
			t.Errorf("AddEdge(%d, %d, %v): %v, want %v", c.a, c.b, c.w, err, c.want)
		}
	}
	if _, err := ParseMetric("furlongs"); !errors.Is(err, ErrBadParam) {
		t.Errorf("ParseMetric: %v", err)
	}
	if _, err := ParseAlgorithm("LD"); err != nil {
		t.Errorf("ParseAlgorithm(LD): %v", err)
	}
	if ps, err := s.Find(g, 0, 3, Algorithm("Max-Node"), 0, HopCount); err != nil || len(ps) != 2 {
		t.Errorf("Find(Max-Node): %v %v, want the two paths of max-node", ps, err)
	}
}

func TestCheckHelpers(t *testing.T) {
	g := trap(t)
	for _, c := range []struct {
		p  Path
		ok bool
	}{
		{Path{0, 1, 2, 3}, true},
		{Path{0, 1, 3}, false},          // no link a-d
		{Path{0, 1, 2, 1, 2, 3}, false}, // repeats
		{Path{1, 2, 3}, false},          // wrong start
		{Path{0}, false},
	} {
		if err := g.ValidPath(c.p, 0, 3); (err == nil) != c.ok {
			t.Errorf("ValidPath(%v) = %v, want ok=%v", c.p, err, c.ok)
		}
	}
	// Link-disjoint but crossing at node a.
	cross := paths([]int{0, 1, 4, 5, 3}, []int{0, 6, 7, 2, 1, 4}) // second is not to d but disjointness ignores that
	if err := CheckDisjoint(g, cross, LinkDisjoint); err == nil {
		t.Error("paths sharing link a-x1 pass as link-disjoint")
	}
}

func TestAllocations(t *testing.T) {
	g := trap(t)
	var s Solver
	for _, a := range Algorithms {
		s.Find(g, 0, 3, a, 2, HopCount) // grow the scratch memory
		n := testing.AllocsPerRun(100, func() { s.Find(g, 0, 3, a, 2, HopCount) })
		if n != 0 {
			t.Errorf("%s: %v allocations per call on a warm Solver, want 0", a, n)
		}
	}
}
