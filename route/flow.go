package route

import (
	"fmt"
	"math"
	"slices"
)

// flowNet is a unit-capacity residual network. Arc a and a^1 are a pair:
// an arc and its residual reverse.
type flowNet struct {
	head []int32
	next []int32
	to   []int32
	capa []int32
	cost []float64
	pot  []float64
	dist []float64
	prev []int32
	used []bool
}

func (f *flowNet) init(n int) {
	f.head = grow(f.head, n)
	for i := range f.head {
		f.head[i] = -1
	}
	f.next, f.to, f.capa, f.cost = f.next[:0], f.to[:0], f.capa[:0], f.cost[:0]
	f.pot = grow(f.pot, n)
	clear(f.pot)
	f.dist = grow(f.dist, n)
	f.prev = grow(f.prev, n)
}

// addArc adds u→v with capacity 1 and cost c, and its empty reverse.
func (f *flowNet) addArc(u, v int32, c float64) {
	f.to = append(f.to, v, u)
	f.capa = append(f.capa, 1, 0)
	f.cost = append(f.cost, c, -c)
	f.next = append(f.next, f.head[u], f.head[v])
	a := int32(len(f.to) - 2)
	f.head[u], f.head[v] = a, a+1
}

// build lays out g as a flow network. Link i's two directions are arcs
// 4i (A→B) and 4i+2 (B→A) in either kind, so that decomposition reads
// them the same way. For node-disjoint paths every node v is split into
// v_in = 2v and v_out = 2v+1 joined by one unit of capacity (Suurballe's
// and Bhandari's node splitting), except source and destination, which
// any number of paths may share; a link u–v becomes u_out→v_in and
// v_out→u_in. It returns the flow's source and sink.
func (s *Solver) build(g *Graph, src, dst int, kind Disjointness, m Metric) (int32, int32) {
	f := &s.net
	if kind == LinkDisjoint {
		f.init(len(g.nodes))
		for i, e := range g.edges {
			c := g.cost(int32(i), m)
			f.addArc(int32(e.A), int32(e.B), c)
			f.addArc(int32(e.B), int32(e.A), c)
		}
		return int32(src), int32(dst)
	}
	f.init(2 * len(g.nodes))
	for i, e := range g.edges {
		c := g.cost(int32(i), m)
		f.addArc(int32(2*e.A+1), int32(2*e.B), c)
		f.addArc(int32(2*e.B+1), int32(2*e.A), c)
	}
	for v := range g.nodes {
		if v != src && v != dst {
			f.addArc(int32(2*v), int32(2*v+1), 0)
		}
	}
	return int32(2*src + 1), int32(2 * dst)
}

// augment finds the cheapest source→sink path in the residual network and
// pushes one unit along it, reporting whether there was one.
//
// This is the successive-shortest-path method: after j augmentations the
// flow is a cheapest flow of value j, so stopping at k gives the k
// disjoint paths of least total cost (Suurballe's algorithm is the same
// idea for k = 2; Bhandari's runs the searches with Bellman-Ford on the
// negated reverse arcs instead). Dijkstra works on the residual arcs,
// whose costs can be negative, because of the potentials: every arc's
// reduced cost c + pot[u] − pot[v] stays ≥ 0.
func (s *Solver) augment(source, sink int32) bool {
	f := &s.net
	for i := range f.dist {
		f.dist[i] = math.Inf(1)
		f.prev[i] = -1
	}
	s.heap = s.heap[:0]
	f.dist[source] = 0
	s.push(heapItem{0, source})
	for len(s.heap) > 0 {
		it := s.pop()
		u := it.v
		if it.d > f.dist[u] {
			continue
		}
		for a := f.head[u]; a >= 0; a = f.next[a] {
			if f.capa[a] <= 0 {
				continue
			}
			v := f.to[a]
			rc := f.cost[a] + f.pot[u] - f.pot[v]
			if rc < 0 {
				// Only rounding of non-integer weights gets here.
				rc = 0
			}
			if d := it.d + rc; d < f.dist[v] {
				f.dist[v] = d
				f.prev[v] = a
				s.push(heapItem{d, v})
			}
		}
	}
	if math.IsInf(f.dist[sink], 1) {
		return false
	}
	for v, d := range f.dist {
		// A node unreachable now stays unreachable: new residual arcs
		// only join nodes of the augmenting path.
		if !math.IsInf(d, 1) {
			f.pot[v] += d
		}
	}
	for v := sink; v != source; {
		a := f.prev[v]
		f.capa[a]--
		f.capa[a^1]++
		v = f.to[a^1]
	}
	return true
}

// netFlow is the flow from u to its neighbour over link e: +1, 0 or −1.
func (s *Solver) netFlow(g *Graph, e int32, u int) int32 {
	f := &s.net
	ab, ba := 4*e, 4*e+2
	if g.edges[e].A != u {
		ab, ba = ba, ab
	}
	return (1 - f.capa[ab]) - (1 - f.capa[ba])
}

// optimal pushes up to limit units of flow (limit < 0: as many as there
// are) and decomposes the flow into paths, cheapest first. It returns the
// number of paths.
func (s *Solver) optimal(g *Graph, src, dst int, kind Disjointness, m Metric, limit int) (int, error) {
	if kind != LinkDisjoint && kind != NodeDisjoint {
		return 0, fmt.Errorf("%w: optimal %s-disjoint paths are not offered (deciding whether even two exist is as hard as finding an induced cycle through two given nodes, NP-complete in general graphs); use the greedy ZD", ErrBadParam, kind)
	}
	s.reset(g)
	source, sink := s.build(g, src, dst, kind, m)
	flow := 0
	for limit < 0 || flow < limit {
		if !s.augment(source, sink) {
			break
		}
		flow++
	}
	f := &s.net
	f.used = grow(f.used, len(g.edges))
	clear(f.used)
	for range flow {
		s.offs = append(s.offs, len(s.flat))
		s.flat = append(s.flat, src)
		u := src
		for steps := 0; u != dst; steps++ {
			next := -1
			for _, h := range g.adj[u] {
				if !f.used[h.edge] && s.netFlow(g, h.edge, u) > 0 {
					f.used[h.edge] = true
					next = int(h.to)
					break
				}
			}
			if next < 0 || steps > len(g.nodes) {
				// Cannot happen for a cheapest flow with positive link
				// costs (it has no cycles); a bug must not loop forever.
				return 0, fmt.Errorf("route: internal error: flow decomposition stuck at %q", g.nodes[u].ID)
			}
			u = next
			s.flat = append(s.flat, u)
		}
	}
	return flow, nil
}

// sorted returns the stored paths cheapest first, then by hop count, then
// by node sequence, so that equal inputs give equal output order.
func (s *Solver) sorted(g *Graph, m Metric) []Path {
	ps := s.results()
	slices.SortStableFunc(ps, func(a, b Path) int {
		if ca, cb := g.PathCost(a, m), g.PathCost(b, m); ca != cb {
			if ca < cb {
				return -1
			}
			return 1
		}
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return slices.Compare(a, b)
	})
	return ps
}

// MaxDisjoint returns a largest set of link- or node-disjoint src→dst
// paths (by Menger's theorem, as many as the smallest set of links or
// intermediate nodes whose removal cuts src from dst), computed as a
// maximum flow. Among the largest sets it returns one of least total cost
// under m, cheapest path first. A direct src–dst link is one path.
// ZoneDisjoint is not offered (ErrBadParam); ErrNoPath when src cannot
// reach dst.
func MaxDisjoint(g *Graph, src, dst int, kind Disjointness, m Metric) ([]Path, error) {
	var s Solver
	ps, err := s.MaxDisjoint(g, src, dst, kind, m)
	return ClonePaths(ps), err
}

// MaxDisjoint is the package function on the Solver's memory.
func (s *Solver) MaxDisjoint(g *Graph, src, dst int, kind Disjointness, m Metric) ([]Path, error) {
	if err := check(g, src, dst, m); err != nil {
		return nil, err
	}
	n, err := s.optimal(g, src, dst, kind, m, -1)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, noPath(g, src, dst)
	}
	return s.sorted(g, m), nil
}

// MinCostDisjoint returns k link- or node-disjoint src→dst paths of least
// total cost under m (Suurballe/Bhandari generalised to k by successive
// shortest paths), cheapest path first. Their total is never more than
// that of any k disjoint paths of the same kind, greedy ones included,
// but the cheapest of them can be longer than the plain shortest path:
// the optimum may have to route around it. ErrTooFewPaths when fewer than
// k exist, ErrNoPath when none does.
func MinCostDisjoint(g *Graph, src, dst, k int, kind Disjointness, m Metric) ([]Path, error) {
	var s Solver
	ps, err := s.MinCostDisjoint(g, src, dst, k, kind, m)
	return ClonePaths(ps), err
}

// MinCostDisjoint is the package function on the Solver's memory.
func (s *Solver) MinCostDisjoint(g *Graph, src, dst, k int, kind Disjointness, m Metric) ([]Path, error) {
	if err := check(g, src, dst, m); err != nil {
		return nil, err
	}
	if k < 1 {
		return nil, fmt.Errorf("%w: k = %d paths (want ≥ 1)", ErrBadParam, k)
	}
	n, err := s.optimal(g, src, dst, kind, m, k)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, noPath(g, src, dst)
	}
	if n < k {
		return nil, fmt.Errorf("%w: %d %s-disjoint paths from %q to %q asked, only %d exist", ErrTooFewPaths, k, kind, g.nodes[src].ID, g.nodes[dst].ID, n)
	}
	return s.sorted(g, m), nil
}
