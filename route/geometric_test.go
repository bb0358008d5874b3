package route

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestRandomGeometric(t *testing.T) {
	cfg := DefaultGeoConfig(20)
	gen, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for run := range 30 {
		topo, err := gen.Next(rand.New(rand.NewPCG(42, uint64(run))))
		if err != nil {
			t.Fatal(err)
		}
		g := topo.Graph
		if g.Len() != 20 || topo.Attempts < 1 {
			t.Fatalf("run %d: %d nodes, %d attempts", run, g.Len(), topo.Attempts)
		}
		if !g.Connected() {
			t.Errorf("run %d: graph not connected", run)
		}
		// Every link joins nodes at most 20 m apart, every such pair is
		// linked, all positions lie in the square.
		links := 0
		for i := range g.Len() {
			p := g.Node(i).Pos
			if !g.Node(i).HasPos || p.X < 0 || p.X >= 100 || p.Y < 0 || p.Y >= 100 {
				t.Errorf("run %d: node %d at %v", run, i, p)
			}
			for j := i + 1; j < g.Len(); j++ {
				_, linked := g.EdgeBetween(i, j)
				if near := p.Dist(g.Node(j).Pos) <= 20; near != linked {
					t.Errorf("run %d: nodes %d, %d %.3f m apart, linked %v", run, i, j, p.Dist(g.Node(j).Pos), linked)
				}
				if linked {
					links++
				}
			}
		}
		if links != g.NumEdges() {
			t.Errorf("run %d: %d links by distance, graph has %d", run, links, g.NumEdges())
		}
		// Source and destination are the nodes nearest the reference
		// points.
		for _, c := range []struct {
			got int
			ref Point
		}{{topo.Src, Point{20, 50}}, {topo.Dst, Point{80, 50}}} {
			for i := range g.Len() {
				if g.Node(i).Pos.Dist(c.ref) < g.Node(c.got).Pos.Dist(c.ref) {
					t.Errorf("run %d: node %d is nearer %v than the chosen %d", run, i, c.ref, c.got)
				}
			}
		}
		if topo.Src == topo.Dst {
			t.Errorf("run %d: source = destination", run)
		}
		if g.ID(3) != "3" || g.Radius() != 20 {
			t.Errorf("run %d: node 3 has ID %q, radius %v", run, g.ID(3), g.Radius())
		}
	}
}

func TestRandomGeometricReproducible(t *testing.T) {
	layout := func(seed uint64) []Point {
		topo, err := RandomGeometric(rand.New(rand.NewPCG(seed, 1)), DefaultGeoConfig(16))
		if err != nil {
			t.Fatal(err)
		}
		var out []Point
		for i := range topo.Graph.Len() {
			out = append(out, topo.Graph.Node(i).Pos)
		}
		return out
	}
	a, b, c := layout(5), layout(5), layout(6)
	if !slices.Equal(a, b) {
		t.Error("the same seed gave two layouts")
	}
	if slices.Equal(a, c) {
		t.Error("seeds 5 and 6 gave the same layout")
	}
	// A reused Generator gives the same as a fresh one.
	gen, _ := NewGenerator(DefaultGeoConfig(16))
	gen.Next(rand.New(rand.NewPCG(9, 9)))
	topo, _ := gen.Next(rand.New(rand.NewPCG(5, 1)))
	for i := range topo.Graph.Len() {
		if topo.Graph.Node(i).Pos != a[i] {
			t.Fatalf("node %d: reused generator %v, fresh %v", i, topo.Graph.Node(i).Pos, a[i])
		}
	}
	// The layout is the first connected one drawn from the stream: the
	// first node's position is the stream's first two draws, scaled.
	r := rand.New(rand.NewPCG(5, 1))
	topo, _ = RandomGeometric(r, DefaultGeoConfig(16))
	r2 := rand.New(rand.NewPCG(5, 1))
	for range topo.Attempts - 1 {
		for range 32 {
			r2.Float64()
		}
	}
	if x, y := r2.Float64()*100, r2.Float64()*100; (Point{x, y}) != topo.Graph.Node(0).Pos {
		t.Errorf("node 0 at %v, the stream's draw %d gives (%v, %v)", topo.Graph.Node(0).Pos, topo.Attempts, x, y)
	}
}

func TestRandomGeometricErrors(t *testing.T) {
	for _, c := range []GeoConfig{
		{Nodes: 1, Side: 100, Radius: 20},
		{Nodes: 10, Side: 0, Radius: 20},
		{Nodes: 10, Side: 100, Radius: -1},
		{Nodes: 10, Side: 100, Radius: math.NaN()},
		{Nodes: 10, Side: 100, Radius: 20, MaxAttempts: -5},
		{Nodes: 10, Side: 100, Radius: 20, Src: Point{math.Inf(1), 0}},
	} {
		if _, err := NewGenerator(c); !errors.Is(err, ErrBadParam) {
			t.Errorf("%+v: %v, want ErrBadParam", c, err)
		}
	}
	c := GeoConfig{Nodes: 5, Side: 100, Radius: 0.5, MaxAttempts: 1000}
	_, err := RandomGeometric(rand.New(rand.NewPCG(1, 1)), c)
	if !errors.Is(err, ErrNoLayout) {
		t.Errorf("5 nodes with a 0.5 m range: %v, want ErrNoLayout", err)
	}
}

func TestGeneratorAllocations(t *testing.T) {
	gen, _ := NewGenerator(DefaultGeoConfig(32))
	r := rand.New(rand.NewPCG(1, 2))
	gen.Next(r)
	gen.Next(r)
	n := testing.AllocsPerRun(20, func() { gen.Next(r) })
	// Link lists may still grow on a denser layout than any before;
	// that settles within a few calls.
	if n > 1 {
		t.Errorf("%v allocations per topology, want ≤ 1", n)
	}
}

func TestInterference(t *testing.T) {
	// A line of nodes 10 m apart: 0 1 2 3 4 5, links between neighbours,
	// plus node 6 far away linked to 5.
	g := NewGraph()
	for i := range 6 {
		g.AddNodeAt(string(rune('a'+i)), Point{float64(10 * i), 0})
	}
	g.AddNodeAt("g", Point{200, 0})
	for i := range 5 {
		g.AddEdge(i, i+1, 1)
	}
	g.AddEdge(5, 6, 1)
	g.SetRadius(15)
	near, err := g.NodesWithin(2, 20)
	if err != nil || !slices.Equal(near, []int{0, 1, 3, 4}) {
		t.Errorf("NodesWithin(2, 20) = %v %v", near, err)
	}
	if z := g.Zone(Path{1, 2, 3, 4}); !slices.Equal(z, []int{2, 3}) {
		t.Errorf("Zone(1-2-3-4) = %v, want [2 3] (relays and their neighbours, not the ends)", z)
	}
	if z := g.Zone(Path{0, 1}); z != nil {
		t.Errorf("Zone of a one-hop path = %v, want none", z)
	}
	cases := []struct {
		a, b Link
		rng  float64
		want bool
	}{
		{Link{0, 1}, Link{1, 2}, 0, true},   // share node 1
		{Link{0, 1}, Link{2, 3}, 0, true},   // 1 and 2 are linked
		{Link{0, 1}, Link{3, 4}, 0, false},  // two hops apart
		{Link{0, 1}, Link{3, 4}, 20, true},  // 1 and 3 are 20 m apart
		{Link{0, 1}, Link{3, 4}, 19, false}, // ... not 19
		{Link{4, 5}, Link{5, 6}, 1, true},   // share node 5
	}
	for _, c := range cases {
		got, err := g.Interferes(c.a, c.b, c.rng)
		if err != nil || got != c.want {
			t.Errorf("Interferes(%v, %v, %v) = %v %v, want %v", c.a, c.b, c.rng, got, err, c.want)
		}
	}
	groups, err := g.ContentionGroups([]Path{{0, 1}, {3, 4}, {5, 6}}, 0)
	want := [][]Link{{{0, 1}}, {{3, 4}, {5, 6}}}
	if err != nil || !slices.EqualFunc(groups, want, slices.Equal) {
		t.Errorf("ContentionGroups = %v %v, want %v", groups, err, want)
	}
	if n := PathNodes([]Path{{5, 1, 3}, {0, 1}, {3}}); !slices.Equal(n, []int{0, 1, 3, 5}) {
		t.Errorf("PathNodes = %v, want [0 1 3 5]", n)
	}
	c, err := g.PathsContend(Path{0, 1}, Path{3, 4}, 0)
	if err != nil || c {
		t.Errorf("PathsContend(0-1, 3-4) = %v %v", c, err)
	}
	if _, err := trap(t).Interferes(Link{0, 1}, Link{2, 3}, 10); !errors.Is(err, ErrBadParam) {
		t.Errorf("distance range without positions: %v", err)
	}
}
