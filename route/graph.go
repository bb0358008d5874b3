package route

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// Point is a position in metres. Only geometric graphs (random layouts, or
// user graphs with positions) have them; the algorithms never look at
// positions, only the generator, the JSON radius rule, the interference
// helpers and the drawings do.
type Point struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// Dist is the Euclidean distance between p and q.
func (p Point) Dist(q Point) float64 { return math.Hypot(p.X-q.X, p.Y-q.Y) }

// Within reports whether q is at most r from p. It compares squares, as
// the generator does, so that a file's radius rule and a generated layout
// agree on a pair exactly at the boundary.
func (p Point) Within(q Point, r float64) bool {
	dx, dy := p.X-q.X, p.Y-q.Y
	return dx*dx+dy*dy <= r*r
}

// Node is one vertex. Index i of a node is its position in the graph's
// node list; all algorithms work on indices and break ties by them, so the
// order nodes are added in is part of a graph's identity.
type Node struct {
	ID     string
	Pos    Point
	HasPos bool
}

// Edge is one undirected link between node indices A < B. Weight is the
// link's cost under the EdgeWeight metric; under HopCount every edge costs 1.
type Edge struct {
	A, B   int
	Weight float64
}

// Other is the end of e that is not v.
func (e Edge) Other(v int) int {
	if e.A == v {
		return e.B
	}
	return e.A
}

// half is one direction of an edge as seen from a node's adjacency list.
type half struct {
	to, edge int32
}

// Graph is an undirected simple graph: no self-loops, no parallel links —
// a radio either hears its neighbour or it does not, and Menger's theorem
// on link-disjoint paths would count a parallel link as an extra path.
// Zero value is an empty graph ready for use. A Graph is not safe for
// concurrent mutation; concurrent reads (the algorithms on separate
// Solvers) are safe once it has been prepared by any algorithm call or by
// Prepare.
type Graph struct {
	nodes []Node
	edges []Edge
	adj   [][]half
	// index maps IDs to indices; nil until first needed for graphs the
	// generator builds, which never look IDs up in their hot loop.
	index map[string]int
	// sorted is false while some adjacency list may be out of neighbour
	// order; the algorithms' tie-breaking depends on that order.
	sorted bool
	// unit is true while every weight is 1, when breadth-first search
	// gives the same answer as Dijkstra under either metric.
	unit   bool
	radius float64
}

// NewGraph returns an empty graph.
func NewGraph() *Graph { return &Graph{sorted: true, unit: true} }

// Len is the number of nodes.
func (g *Graph) Len() int { return len(g.nodes) }

// NumEdges is the number of links.
func (g *Graph) NumEdges() int { return len(g.edges) }

// Node returns node i.
func (g *Graph) Node(i int) Node { return g.nodes[i] }

// ID is node i's identifier.
func (g *Graph) ID(i int) string { return g.nodes[i].ID }

// Edge returns link e.
func (g *Graph) Edge(e int) Edge { return g.edges[e] }

// Edges returns the links in the order they were added. The slice is the
// graph's own: do not modify it.
func (g *Graph) Edges() []Edge { return g.edges }

// Radius is the radio range a geometric graph was built with (links join
// nodes at most this far apart), or 0 when the graph has no such rule.
func (g *Graph) Radius() float64 { return g.radius }

// SetRadius records the radio range the caller built the graph with; it
// changes no link. The drawing and interference helpers read it.
func (g *Graph) SetRadius(r float64) { g.radius = r }

// AddNode appends a node without a position and returns its index.
func (g *Graph) AddNode(id string) (int, error) {
	return g.addNode(Node{ID: id})
}

// AddNodeAt appends a node at p and returns its index.
func (g *Graph) AddNodeAt(id string, p Point) (int, error) {
	if math.IsNaN(p.X) || math.IsNaN(p.Y) || math.IsInf(p.X, 0) || math.IsInf(p.Y, 0) {
		return -1, fmt.Errorf("%w: node %q has position (%v, %v)", ErrBadParam, id, p.X, p.Y)
	}
	return g.addNode(Node{ID: id, Pos: p, HasPos: true})
}

func (g *Graph) addNode(n Node) (int, error) {
	if n.ID == "" {
		return -1, fmt.Errorf("%w: empty node id", ErrBadParam)
	}
	g.buildIndex()
	if _, dup := g.index[n.ID]; dup {
		return -1, fmt.Errorf("%w: node %q added twice", ErrBadParam, n.ID)
	}
	if len(g.nodes) == 0 && len(g.edges) == 0 {
		g.sorted, g.unit = true, true
	}
	i := len(g.nodes)
	g.nodes = append(g.nodes, n)
	g.adj = append(g.adj, nil)
	g.index[n.ID] = i
	return i, nil
}

func (g *Graph) buildIndex() {
	if g.index != nil {
		return
	}
	g.index = make(map[string]int, len(g.nodes))
	for i, n := range g.nodes {
		g.index[n.ID] = i
	}
}

// Index returns the index of the node with the given ID, or ErrNoNode.
func (g *Graph) Index(id string) (int, error) {
	g.buildIndex()
	i, ok := g.index[id]
	if !ok {
		return -1, fmt.Errorf("%w: %q", ErrNoNode, id)
	}
	return i, nil
}

// AddEdge links nodes a and b with the given weight and returns the link's
// index. Weights must be positive and finite: Dijkstra and the disjoint-
// path algorithms rely on every path being costlier than its prefixes.
func (g *Graph) AddEdge(a, b int, weight float64) (int, error) {
	if err := g.checkNode(a); err != nil {
		return -1, err
	}
	if err := g.checkNode(b); err != nil {
		return -1, err
	}
	if a == b {
		return -1, fmt.Errorf("%w: self-loop on node %q", ErrBadParam, g.nodes[a].ID)
	}
	if !(weight > 0) || math.IsInf(weight, 0) {
		return -1, fmt.Errorf("%w: link %s–%s has weight %v (want > 0 and finite)", ErrBadParam, g.nodes[a].ID, g.nodes[b].ID, weight)
	}
	if _, ok := g.EdgeBetween(a, b); ok {
		return -1, fmt.Errorf("%w: link %s–%s added twice", ErrBadParam, g.nodes[a].ID, g.nodes[b].ID)
	}
	return g.addEdge(a, b, weight), nil
}

// addEdge appends a link known to be new and valid.
func (g *Graph) addEdge(a, b int, weight float64) int {
	if a > b {
		a, b = b, a
	}
	e := len(g.edges)
	g.edges = append(g.edges, Edge{A: a, B: b, Weight: weight})
	g.adj[a] = append(g.adj[a], half{to: int32(b), edge: int32(e)})
	g.adj[b] = append(g.adj[b], half{to: int32(a), edge: int32(e)})
	g.sorted = false
	if weight != 1 {
		g.unit = false
	}
	return e
}

// SetWeight changes link e's weight.
func (g *Graph) SetWeight(e int, weight float64) error {
	if e < 0 || e >= len(g.edges) {
		return fmt.Errorf("%w: link index %d of %d", ErrBadParam, e, len(g.edges))
	}
	if !(weight > 0) || math.IsInf(weight, 0) {
		return fmt.Errorf("%w: weight %v (want > 0 and finite)", ErrBadParam, weight)
	}
	g.edges[e].Weight = weight
	g.unit = true
	for _, ed := range g.edges {
		if ed.Weight != 1 {
			g.unit = false
			break
		}
	}
	return nil
}

func (g *Graph) checkNode(i int) error {
	if i < 0 || i >= len(g.nodes) {
		return fmt.Errorf("%w: index %d (the graph has %d nodes)", ErrNoNode, i, len(g.nodes))
	}
	return nil
}

// EdgeBetween returns the link joining a and b, if any.
func (g *Graph) EdgeBetween(a, b int) (int, bool) {
	if a < 0 || a >= len(g.nodes) || b < 0 || b >= len(g.nodes) {
		return -1, false
	}
	// Scan the shorter list: degrees in a mesh are small, and this keeps
	// AddEdge free of a per-graph map.
	if len(g.adj[b]) < len(g.adj[a]) {
		a, b = b, a
	}
	for _, h := range g.adj[a] {
		if int(h.to) == b {
			return int(h.edge), true
		}
	}
	return -1, false
}

// Degree is the number of links at node i.
func (g *Graph) Degree(i int) int { return len(g.adj[i]) }

// Neighbours returns node i's neighbours in index order (a new slice).
func (g *Graph) Neighbours(i int) []int {
	g.Prepare()
	out := make([]int, len(g.adj[i]))
	for k, h := range g.adj[i] {
		out[k] = int(h.to)
	}
	return out
}

// Prepare sorts the adjacency lists by neighbour index, which the
// algorithms' tie-breaking needs. Every algorithm calls it; call it
// yourself before sharing a graph between goroutines.
func (g *Graph) Prepare() {
	if g.sorted {
		return
	}
	for _, l := range g.adj {
		slices.SortFunc(l, func(x, y half) int { return int(x.to) - int(y.to) })
	}
	g.sorted = true
}

// Connected reports whether every node can reach every other. An empty
// graph is connected.
func (g *Graph) Connected() bool {
	n := len(g.nodes)
	if n == 0 {
		return true
	}
	seen := make([]bool, n)
	stack := []int32{0}
	seen[0] = true
	count := 1
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, h := range g.adj[v] {
			if !seen[h.to] {
				seen[h.to] = true
				count++
				stack = append(stack, h.to)
			}
		}
	}
	return count == n
}

// IDs translates a path of indices into node IDs.
func (g *Graph) IDs(p Path) []string {
	out := make([]string, len(p))
	for i, v := range p {
		out[i] = g.nodes[v].ID
	}
	return out
}

// Clone returns a deep copy, for a caller that wants to keep a graph the
// Generator will overwrite.
func (g *Graph) Clone() *Graph {
	c := &Graph{
		nodes:  slices.Clone(g.nodes),
		edges:  slices.Clone(g.edges),
		adj:    make([][]half, len(g.adj)),
		sorted: g.sorted,
		unit:   g.unit,
		radius: g.radius,
	}
	for i, l := range g.adj {
		c.adj[i] = slices.Clone(l)
	}
	return c
}

// Path is a route as node indices from source to destination. Hops is one
// less than its length.
type Path []int

// Hops is the number of links on p.
func (p Path) Hops() int {
	if len(p) == 0 {
		return 0
	}
	return len(p) - 1
}

// String is "0 → 3 → 7".
func (p Path) String() string {
	b := make([]byte, 0, 4*len(p))
	for i, v := range p {
		if i > 0 {
			b = append(b, " → "...)
		}
		b = strconv.AppendInt(b, int64(v), 10)
	}
	return string(b)
}

// Metric says what a path costs.
type Metric int

const (
	// HopCount costs every link 1: the seed's (and Meghanathan's) minimum-
	// hop routing, and the default.
	HopCount Metric = iota
	// EdgeWeight costs each link its Weight.
	EdgeWeight
)

// String is "hops" or "weight", the CLI's names.
func (m Metric) String() string {
	switch m {
	case HopCount:
		return "hops"
	case EdgeWeight:
		return "weight"
	}
	return "metric(" + strconv.Itoa(int(m)) + ")"
}

// ParseMetric is the inverse of Metric.String.
func ParseMetric(s string) (Metric, error) {
	switch s {
	case "hops", "hop", "":
		return HopCount, nil
	case "weight", "weights":
		return EdgeWeight, nil
	}
	return 0, fmt.Errorf("%w: metric %q (want hops or weight)", ErrBadParam, s)
}

func (m Metric) valid() bool { return m == HopCount || m == EdgeWeight }

// cost is what link e costs under m.
func (g *Graph) cost(e int32, m Metric) float64 {
	if m == HopCount {
		return 1
	}
	return g.edges[e].Weight
}

// PathCost is p's cost under m. It does not check that p is a path of g:
// see ValidPath.
func (g *Graph) PathCost(p Path, m Metric) float64 {
	if m == HopCount {
		return float64(p.Hops())
	}
	c := 0.0
	for i := 1; i < len(p); i++ {
		if e, ok := g.EdgeBetween(p[i-1], p[i]); ok {
			c += g.edges[e].Weight
		} else {
			return math.Inf(1)
		}
	}
	return c
}
