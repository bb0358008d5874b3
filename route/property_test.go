package route

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// checkSet checks that ps is a non-empty set of valid, simple src→dst
// paths of g, disjoint in the given sense.
func checkSet(t *testing.T, name string, g *Graph, src, dst int, ps []Path, kind Disjointness) {
	t.Helper()
	if len(ps) == 0 {
		t.Errorf("%s: no paths", name)
	}
	for _, p := range ps {
		if err := g.ValidPath(p, src, dst); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := CheckDisjoint(g, ps, kind); err != nil {
		t.Errorf("%s: %v (paths %v)", name, err, ps)
	}
}

func totalCost(g *Graph, ps []Path, m Metric) float64 {
	c := 0.0
	for _, p := range ps {
		c += g.PathCost(p, m)
	}
	return c
}

// TestRandomGeometricProperties runs every algorithm on a few hundred of
// the seed's topologies and checks what must hold on each of them, then
// the averages the seed reports.
func TestRandomGeometricProperties(t *testing.T) {
	var s Solver
	sum := map[Algorithm]int{}
	graphs := 0
	trapsND := 0
	for _, n := range []int{8, 16, 24, 32, 40} {
		gen, err := NewGenerator(DefaultGeoConfig(n))
		if err != nil {
			t.Fatal(err)
		}
		for run := range 60 {
			r := rand.New(rand.NewPCG(uint64(n), uint64(run)))
			topo, err := gen.Next(r)
			if err != nil {
				t.Fatal(err)
			}
			g, src, dst := topo.Graph, topo.Src, topo.Dst
			name := fmt.Sprintf("n=%d run=%d", n, run)
			graphs++
			count := map[Algorithm]int{}
			first := map[Algorithm][]Path{}
			for _, a := range []Algorithm{LD, ND, ZD, MaxLink, MaxNode} {
				ps, err := s.Find(g, src, dst, a, 0, HopCount)
				if err != nil {
					t.Fatalf("%s %s: %v", name, a, err)
				}
				checkSet(t, name+" "+string(a), g, src, dst, ps, a.Disjointness())
				count[a] = len(ps)
				sum[a] += len(ps)
				first[a] = ClonePaths(ps[:min(2, len(ps))])
			}
			sp, err := s.ShortestPath(g, src, dst, HopCount)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range []Algorithm{LD, ND, ZD} {
				if !slices.Equal(first[a][0], sp) {
					t.Errorf("%s: %s starts with %v, not the shortest path %v", name, a, first[a][0], sp)
				}
			}
			if count[MaxLink] < count[LD] || count[MaxLink] < count[ND] || count[MaxLink] < count[ZD] {
				t.Errorf("%s: max-link %d < a greedy count %v", name, count[MaxLink], count)
			}
			if count[MaxNode] < count[ND] || count[MaxNode] < count[ZD] {
				t.Errorf("%s: max-node %d < greedy ND/ZD %v", name, count[MaxNode], count)
			}
			if count[MaxLink] < count[MaxNode] {
				t.Errorf("%s: max-link %d < max-node %d", name, count[MaxLink], count[MaxNode])
			}
			if count[ND] < 2 && count[MaxNode] >= 2 {
				trapsND++
			}
			// The optimal pair is never costlier than a greedy pair of
			// the same kind (ZD's pairs are node-disjoint too).
			for _, c := range []struct {
				opt    Algorithm
				greedy []Algorithm
			}{{OptLink, []Algorithm{LD, ND, ZD}}, {OptNode, []Algorithm{ND, ZD}}} {
				ps, err := s.Find(g, src, dst, c.opt, 2, HopCount)
				if count[c.opt.maxOf()] < 2 {
					if err == nil {
						t.Errorf("%s: %s k=2 found %v with max %d", name, c.opt, ps, count[c.opt.maxOf()])
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s %s: %v", name, c.opt, err)
				}
				checkSet(t, name+" "+string(c.opt), g, src, dst, ps, c.opt.Disjointness())
				opt := totalCost(g, ps, HopCount)
				for _, gr := range c.greedy {
					if len(first[gr]) == 2 && totalCost(g, first[gr], HopCount) < opt {
						t.Errorf("%s: %s pair %v beats %s %v", name, gr, first[gr], c.opt, ps)
					}
				}
			}
		}
	}
	t.Logf("%d graphs: paths found LD %d, ND %d, ZD %d, max-link %d, max-node %d; greedy ND < 2 ≤ max-node on %d",
		graphs, sum[LD], sum[ND], sum[ZD], sum[MaxLink], sum[MaxNode], trapsND)
	if !(sum[LD] > sum[ND] && sum[ND] > sum[ZD]) {
		t.Errorf("over %d graphs LD, ND, ZD found %d, %d, %d paths; the seed's ordering LD > ND > ZD does not hold", graphs, sum[LD], sum[ND], sum[ZD])
	}
}

func (a Algorithm) maxOf() Algorithm {
	if a.Disjointness() == NodeDisjoint {
		return MaxNode
	}
	return MaxLink
}

// randomGraph is an Erdős–Rényi graph: unlike the geometric ones it has
// long-range links, chords and, with weights, non-hop costs, which shake
// out bugs the disk model hides.
func randomGraph(r *rand.Rand, n int, p float64, weighted bool) *Graph {
	g := NewGraph()
	for i := range n {
		g.AddNode(fmt.Sprint(i))
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			if r.Float64() < p {
				w := 1.0
				if weighted {
					w = float64(1 + r.IntN(5))
				}
				g.AddEdge(i, j, w)
			}
		}
	}
	return g
}

// allPaths enumerates every simple src→dst path.
func allPaths(g *Graph, src, dst int) []Path {
	var out []Path
	on := make([]bool, g.Len())
	var cur Path
	var walk func(v int)
	walk = func(v int) {
		cur = append(cur, v)
		on[v] = true
		if v == dst {
			out = append(out, ClonePath(cur))
		} else {
			for _, w := range g.Neighbours(v) {
				if !on[w] {
					walk(w)
				}
			}
		}
		on[v] = false
		cur = cur[:len(cur)-1]
	}
	walk(src)
	return out
}

// maxFlowMatrix is an independent maximum flow (Edmonds–Karp on a
// capacity matrix, node capacities by splitting) to check Menger counts.
func maxFlowMatrix(g *Graph, src, dst int, kind Disjointness) int {
	n := g.Len()
	size, s, t := n, src, dst
	if kind == NodeDisjoint {
		size, s, t = 2*n, 2*src+1, 2*dst
	}
	c := make([][]int, size)
	for i := range c {
		c[i] = make([]int, size)
	}
	for _, e := range g.Edges() {
		if kind == NodeDisjoint {
			c[2*e.A+1][2*e.B]++
			c[2*e.B+1][2*e.A]++
		} else {
			c[e.A][e.B]++
			c[e.B][e.A]++
		}
	}
	if kind == NodeDisjoint {
		for v := range n {
			if v != src && v != dst {
				c[2*v][2*v+1] = 1
			}
		}
	}
	flow := 0
	for {
		prev := make([]int, size)
		for i := range prev {
			prev[i] = -1
		}
		prev[s] = s
		q := []int{s}
		for len(q) > 0 && prev[t] < 0 {
			u := q[0]
			q = q[1:]
			for v := range size {
				if prev[v] < 0 && c[u][v] > 0 {
					prev[v] = u
					q = append(q, v)
				}
			}
		}
		if prev[t] < 0 {
			return flow
		}
		for v := t; v != s; v = prev[v] {
			c[prev[v]][v]--
			c[v][prev[v]]++
		}
		flow++
	}
}

// TestOptimalAgainstBruteForce checks the flow algorithms against an
// independent max-flow (counts) and against trying every pair of simple
// paths (the cheapest disjoint pair), on small random graphs, by hops and
// by random integer weights.
func TestOptimalAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	var s Solver
	checked := 0
	for trial := range 300 {
		weighted := trial%2 == 1
		g := randomGraph(r, 8, 0.4, weighted)
		src, dst := 0, 7
		m := HopCount
		if weighted {
			m = EdgeWeight
		}
		all := allPaths(g, src, dst)
		if len(all) == 0 {
			if _, err := s.MaxDisjoint(g, src, dst, LinkDisjoint, m); err == nil {
				t.Errorf("trial %d: max-link found paths on a disconnected pair", trial)
			}
			continue
		}
		checked++
		for _, kind := range []Disjointness{LinkDisjoint, NodeDisjoint} {
			name := fmt.Sprintf("trial %d %s %s", trial, kind, m)
			ps, err := s.MaxDisjoint(g, src, dst, kind, m)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			checkSet(t, name, g, src, dst, ps, kind)
			if want := maxFlowMatrix(g, src, dst, kind); len(ps) != want {
				t.Errorf("%s: max %d paths, independent max-flow says %d", name, len(ps), want)
			}
			best := math.Inf(1)
			for i := range all {
				for j := i + 1; j < len(all); j++ {
					pair := []Path{all[i], all[j]}
					if CheckDisjoint(g, pair, kind) == nil {
						best = min(best, totalCost(g, pair, m))
					}
				}
			}
			opt, err := s.MinCostDisjoint(g, src, dst, 2, kind, m)
			if math.IsInf(best, 1) {
				if err == nil {
					t.Errorf("%s: opt k=2 found %v where no disjoint pair exists", name, opt)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			checkSet(t, name+" k=2", g, src, dst, opt, kind)
			if c := totalCost(g, opt, m); c != best {
				t.Errorf("%s: opt k=2 %v costs %v, the best pair costs %v", name, opt, c, best)
			}
			one, err := s.MinCostDisjoint(g, src, dst, 1, kind, m)
			sp, _ := ShortestPath(g, src, dst, m)
			if err != nil || g.PathCost(one[0], m) != g.PathCost(sp, m) {
				t.Errorf("%s: opt k=1 %v %v, shortest %v", name, one, err, sp)
			}
		}
	}
	if checked < 200 {
		t.Errorf("only %d of 300 random graphs were connected; the check is too weak", checked)
	}
}

// TestGreedyIsDeletionOfTheShortestPath replays the seed's definition
// literally — copy the graph, delete, search again — and compares.
func TestGreedyIsDeletionOfTheShortestPath(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	var s Solver
	for trial := range 200 {
		g := randomGraph(r, 12, 0.25, trial%2 == 1)
		m := Metric(trial % 2)
		for _, kind := range []Disjointness{LinkDisjoint, NodeDisjoint, ZoneDisjoint} {
			got, err := s.Greedy(g, 0, 11, kind, m)
			want := literalGreedy(g, 0, 11, kind, m)
			if err != nil {
				if want != nil {
					t.Errorf("trial %d %s: %v, literal found %v", trial, kind, err, want)
				}
				continue
			}
			if !equalPaths(got, want) {
				t.Errorf("trial %d %s: %v, literal deletion gives %v", trial, kind, got, want)
			}
		}
	}
}

// literalGreedy rebuilds the remaining graph after every path.
func literalGreedy(g *Graph, src, dst int, kind Disjointness, m Metric) []Path {
	var out []Path
	cur := g.Clone()
	for {
		p, err := ShortestPath(cur, src, dst, m)
		if err != nil {
			return out
		}
		out = append(out, p)
		dropLink := map[Link]bool{}
		dropNode := map[int]bool{}
		if kind == LinkDisjoint || len(p) == 2 {
			for _, l := range PathLinks(p) {
				dropLink[l] = true
			}
		} else {
			for _, v := range p[1 : len(p)-1] {
				dropNode[v] = true
				if kind == ZoneDisjoint {
					for _, w := range cur.Neighbours(v) {
						if w != src && w != dst {
							dropNode[w] = true
						}
					}
				}
			}
		}
		// Keep every node (indices must not move), drop links.
		next := NewGraph()
		for i := range cur.Len() {
			next.AddNode(cur.ID(i))
		}
		for _, e := range cur.Edges() {
			if dropLink[Link{e.A, e.B}] || dropNode[e.A] || dropNode[e.B] {
				continue
			}
			next.AddEdge(e.A, e.B, e.Weight)
		}
		cur = next
	}
}
