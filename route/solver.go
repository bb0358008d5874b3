package route

import (
	"fmt"
	"math"
	"strconv"
)

// Disjointness says what two paths of a set may not share. Source and
// destination are shared by every path and never count.
type Disjointness int

const (
	// LinkDisjoint paths share no link; they may cross at a node.
	LinkDisjoint Disjointness = iota
	// NodeDisjoint paths share no intermediate node (and so no link).
	NodeDisjoint
	// ZoneDisjoint paths are node-disjoint and, beyond that, no
	// intermediate node of one is a neighbour of an intermediate node of
	// another: on a single radio channel they do not hear each other.
	ZoneDisjoint
)

// String is "link", "node" or "zone".
func (k Disjointness) String() string {
	switch k {
	case LinkDisjoint:
		return "link"
	case NodeDisjoint:
		return "node"
	case ZoneDisjoint:
		return "zone"
	}
	return "disjointness(" + strconv.Itoa(int(k)) + ")"
}

func (k Disjointness) valid() bool { return k >= LinkDisjoint && k <= ZoneDisjoint }

// Solver holds the scratch memory of the algorithms so that repeated calls
// (a study runs tens of thousands of topologies) allocate nothing once it
// has grown to the largest graph. The paths a Solver method returns live
// in that memory: they stay valid until the next call on the same Solver;
// copy them (ClonePaths) to keep them longer. A Solver is not safe for
// concurrent use; give each goroutine its own.
type Solver struct {
	// shortest-path search
	dist  []float64
	level []int32
	queue []int32
	heap  []heapItem

	// greedy deletions
	nodeGone []bool
	edgeGone []bool

	// results: the nodes of all found paths back to back, with offsets
	flat  []int
	offs  []int
	paths []Path

	// flow network for the optimal algorithms
	net flowNet
}

// NewSolver returns a Solver; the zero value is ready too.
func NewSolver() *Solver { return &Solver{} }

type heapItem struct {
	d float64
	v int32
}

func (a heapItem) less(b heapItem) bool { return a.d < b.d || (a.d == b.d && a.v < b.v) }

func (s *Solver) push(it heapItem) {
	s.heap = append(s.heap, it)
	h := s.heap
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].less(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (s *Solver) pop() heapItem {
	h := s.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && h[r].less(h[l]) {
			m = r
		}
		if !h[m].less(h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	s.heap = h
	return top
}

// check validates a call's arguments and prepares g.
func check(g *Graph, src, dst int, m Metric) error {
	if g == nil {
		return fmt.Errorf("%w: nil graph", ErrBadParam)
	}
	if err := g.checkNode(src); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	if err := g.checkNode(dst); err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	if src == dst {
		return fmt.Errorf("%w (%q)", ErrSameNode, g.nodes[src].ID)
	}
	if !m.valid() {
		return fmt.Errorf("%w: metric %d", ErrBadParam, int(m))
	}
	g.Prepare()
	return nil
}

func noPath(g *Graph, src, dst int) error {
	return fmt.Errorf("%w (%q to %q)", ErrNoPath, g.nodes[src].ID, g.nodes[dst].ID)
}

// reset clears the deletions and the results for a graph of g's size.
func (s *Solver) reset(g *Graph) {
	s.nodeGone = grow(s.nodeGone, len(g.nodes))
	clear(s.nodeGone)
	s.edgeGone = grow(s.edgeGone, len(g.edges))
	clear(s.edgeGone)
	s.flat = s.flat[:0]
	s.offs = s.offs[:0]
}

func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// results turns the stored paths into slices of s.flat.
func (s *Solver) results() []Path {
	s.paths = s.paths[:0]
	for i := 0; i < len(s.offs); i++ {
		end := len(s.flat)
		if i+1 < len(s.offs) {
			end = s.offs[i+1]
		}
		s.paths = append(s.paths, Path(s.flat[s.offs[i]:end:end]))
	}
	return s.paths
}

// ShortestPath returns the cheapest path from src to dst under m in a new
// slice. Among equally cheap paths it returns the one whose node-index
// sequence is lexicographically smallest: at every step the lowest-
// numbered neighbour that still lies on a cheapest path.
func ShortestPath(g *Graph, src, dst int, m Metric) (Path, error) {
	var s Solver
	p, err := s.ShortestPath(g, src, dst, m)
	return ClonePath(p), err
}

// ShortestPath is the package function on the Solver's memory.
func (s *Solver) ShortestPath(g *Graph, src, dst int, m Metric) (Path, error) {
	if err := check(g, src, dst, m); err != nil {
		return nil, err
	}
	s.reset(g)
	if !s.shortest(g, src, dst, m) {
		return nil, noPath(g, src, dst)
	}
	return s.results()[0], nil
}

// shortest appends to s.flat the cheapest src→dst path that avoids the
// deleted nodes and links, and reports whether there is one.
//
// It searches backwards from dst, so that the distance to dst of every
// node that can be on a cheapest path is known when the walk forward from
// src picks, at each node, the lowest-numbered neighbour one link closer.
// The search stops once src is reached: every node strictly closer to dst
// than src has its final distance by then, and no farther node can be
// next on the walk.
func (s *Solver) shortest(g *Graph, src, dst int, m Metric) bool {
	if m == HopCount || g.unit {
		return s.shortestBFS(g, src, dst)
	}
	return s.shortestDijkstra(g, src, dst, m)
}

func (s *Solver) shortestBFS(g *Graph, src, dst int) bool {
	n := len(g.nodes)
	s.level = grow(s.level, n)
	for i := range s.level {
		s.level[i] = -1
	}
	s.queue = append(s.queue[:0], int32(dst))
	s.level[dst] = 0
	found := false
bfs:
	for qi := 0; qi < len(s.queue); qi++ {
		v := s.queue[qi]
		for _, h := range g.adj[v] {
			if s.level[h.to] >= 0 || s.edgeGone[h.edge] || s.nodeGone[h.to] {
				continue
			}
			s.level[h.to] = s.level[v] + 1
			if int(h.to) == src {
				found = true
				break bfs
			}
			s.queue = append(s.queue, h.to)
		}
	}
	if !found {
		return false
	}
	s.offs = append(s.offs, len(s.flat))
	u := int32(src)
	s.flat = append(s.flat, src)
	for int(u) != dst {
		want := s.level[u] - 1
		for _, h := range g.adj[u] {
			if s.level[h.to] == want && !s.edgeGone[h.edge] && !s.nodeGone[h.to] {
				u = h.to
				break
			}
		}
		s.flat = append(s.flat, int(u))
	}
	return true
}

func (s *Solver) shortestDijkstra(g *Graph, src, dst int, m Metric) bool {
	n := len(g.nodes)
	s.dist = grow(s.dist, n)
	for i := range s.dist {
		s.dist[i] = math.Inf(1)
	}
	s.heap = s.heap[:0]
	s.dist[dst] = 0
	s.push(heapItem{0, int32(dst)})
	found := false
	for len(s.heap) > 0 {
		it := s.pop()
		if it.d > s.dist[it.v] {
			continue // stale entry
		}
		if int(it.v) == src {
			found = true
			break
		}
		for _, h := range g.adj[it.v] {
			if s.edgeGone[h.edge] || s.nodeGone[h.to] {
				continue
			}
			if d := it.d + g.cost(h.edge, m); d < s.dist[h.to] {
				s.dist[h.to] = d
				s.push(heapItem{d, h.to})
			}
		}
	}
	if !found {
		return false
	}
	s.offs = append(s.offs, len(s.flat))
	u := int32(src)
	s.flat = append(s.flat, src)
	for int(u) != dst {
		// The node that set dist[u] passes this test exactly (same
		// floating-point sum), so the walk cannot get stuck.
		du := s.dist[u]
		for _, h := range g.adj[u] {
			if !s.edgeGone[h.edge] && !s.nodeGone[h.to] && s.dist[h.to]+g.cost(h.edge, m) == du && s.dist[h.to] < du {
				u = h.to
				break
			}
		}
		s.flat = append(s.flat, int(u))
	}
	return true
}

// Greedy runs the seed's greedy algorithm of the given kind (§4): find the
// shortest src→dst path, add it to the set, delete from the graph what the
// path used, and repeat until src can no longer reach dst. It returns the
// paths in the order found, so the first is the plain shortest path.
//
//   - LinkDisjoint (LD) deletes the path's links.
//   - NodeDisjoint (ND) deletes the path's intermediate nodes.
//   - ZoneDisjoint (ZD) deletes the path's intermediate nodes and all
//     their neighbours, except src and dst, which are never deleted.
//
// A direct src–dst link is a one-hop path with no intermediate node; all
// three algorithms then delete just that link, so it is used once and the
// search goes on (ND and ZD would otherwise find it forever).
//
// Greedy returns ErrNoPath when not even one path exists.
func Greedy(g *Graph, src, dst int, kind Disjointness, m Metric) ([]Path, error) {
	var s Solver
	ps, err := s.Greedy(g, src, dst, kind, m)
	return ClonePaths(ps), err
}

// Greedy is the package function on the Solver's memory.
func (s *Solver) Greedy(g *Graph, src, dst int, kind Disjointness, m Metric) ([]Path, error) {
	if err := check(g, src, dst, m); err != nil {
		return nil, err
	}
	if !kind.valid() {
		return nil, fmt.Errorf("%w: disjointness %d", ErrBadParam, int(kind))
	}
	s.reset(g)
	for s.shortest(g, src, dst, m) {
		p := s.flat[s.offs[len(s.offs)-1]:]
		if len(p) == 2 || kind == LinkDisjoint {
			for i := 1; i < len(p); i++ {
				e, _ := g.EdgeBetween(p[i-1], p[i])
				s.edgeGone[e] = true
			}
			continue
		}
		for _, v := range p[1 : len(p)-1] {
			s.nodeGone[v] = true
			if kind != ZoneDisjoint {
				continue
			}
			for _, h := range g.adj[v] {
				if int(h.to) != src && int(h.to) != dst {
					s.nodeGone[h.to] = true
				}
			}
		}
	}
	if len(s.offs) == 0 {
		return nil, noPath(g, src, dst)
	}
	return s.results(), nil
}

// ClonePath copies p out of a Solver's memory.
func ClonePath(p Path) Path {
	if p == nil {
		return nil
	}
	return append(Path(nil), p...)
}

// ClonePaths copies ps, and the paths in it, out of a Solver's memory.
func ClonePaths(ps []Path) []Path {
	if ps == nil {
		return nil
	}
	out := make([]Path, len(ps))
	for i, p := range ps {
		out[i] = ClonePath(p)
	}
	return out
}
