package route

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
)

// GeoConfig describes the seed's random mesh (§5.2): Nodes placed
// uniformly at random in a Side × Side square, a link between every two
// nodes at most Radius apart (the disk model, all radios alike), only
// connected layouts kept, the source the node nearest Src and the
// destination the node nearest Dst.
type GeoConfig struct {
	// Nodes is the number of nodes, at least 2.
	Nodes int
	// Side is the square's side in metres. Default 100.
	Side float64
	// Radius is the radio range in metres. Default 20.
	Radius float64
	// Src and Dst are the reference points the source and destination
	// are the nearest nodes to. Defaults (20, 50) and (80, 50).
	Src, Dst Point
	// MaxAttempts bounds the layouts drawn for one topology before
	// ErrNoLayout. Default DefaultMaxAttempts.
	MaxAttempts int
}

// The seed's layout parameters and the generator's patience.
const (
	DefaultSide   = 100.0
	DefaultRadius = 20.0
	// DefaultMaxAttempts is far beyond need: the rarest connected case in
	// the seed's range (12–16 nodes) is about 1 layout in 7 000, so a
	// run hitting this bound means a configuration that (almost) cannot
	// be connected, such as 3 nodes with a 1 m range.
	DefaultMaxAttempts = 20_000_000
)

// DefaultGeoConfig is the seed's setup with n nodes.
func DefaultGeoConfig(n int) GeoConfig {
	return GeoConfig{
		Nodes:  n,
		Side:   DefaultSide,
		Radius: DefaultRadius,
		Src:    Point{20, 50},
		Dst:    Point{80, 50},
	}
}

func (c *GeoConfig) validate() error {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	switch {
	case c.Nodes < 2:
		return fmt.Errorf("%w: %d nodes (want ≥ 2: a source and a destination)", ErrBadParam, c.Nodes)
	case c.Nodes > 1<<20:
		return fmt.Errorf("%w: %d nodes (at most %d)", ErrBadParam, c.Nodes, 1<<20)
	case !(c.Side > 0) || math.IsInf(c.Side, 0):
		return fmt.Errorf("%w: side %v m (want > 0)", ErrBadParam, c.Side)
	case !(c.Radius > 0) || math.IsInf(c.Radius, 0):
		return fmt.Errorf("%w: radius %v m (want > 0)", ErrBadParam, c.Radius)
	case c.MaxAttempts < 0:
		return fmt.Errorf("%w: max attempts %d", ErrBadParam, c.MaxAttempts)
	}
	for _, v := range []float64{c.Src.X, c.Src.Y, c.Dst.X, c.Dst.Y} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: reference point coordinate %v", ErrBadParam, v)
		}
	}
	return nil
}

// Topology is one generated layout.
type Topology struct {
	Graph    *Graph
	Src, Dst int
	// Attempts is the number of layouts drawn to get this one (itself
	// included); the share of connected layouts is about 1/Attempts.
	Attempts int
}

// Generator draws random geometric topologies, reusing its memory: the
// Topology and Graph that Next returns are overwritten by the next call.
// Not safe for concurrent use.
type Generator struct {
	cfg      GeoConfig
	r2       float64
	ncell    int
	cellSize float64

	x, y      []float64
	cellOf    []int32
	cellStart []int32
	order     []int32
	seen      []bool
	stack     []int32
	ids       []string

	graph Graph
	topo  Topology
}

// NewGenerator checks cfg and returns a generator for it.
func NewGenerator(cfg GeoConfig) (*Generator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := cfg.Nodes
	// Cells at least one radius wide, so that every neighbour of a node
	// is in its own or an adjacent cell; at most 64 × 64 of them.
	ncell := int(cfg.Side / cfg.Radius)
	ncell = max(1, min(ncell, 64))
	gen := &Generator{
		cfg:       cfg,
		r2:        cfg.Radius * cfg.Radius,
		ncell:     ncell,
		cellSize:  cfg.Side / float64(ncell),
		x:         make([]float64, n),
		y:         make([]float64, n),
		cellOf:    make([]int32, n),
		cellStart: make([]int32, ncell*ncell+1),
		order:     make([]int32, n),
		seen:      make([]bool, n),
		stack:     make([]int32, 0, n),
		ids:       make([]string, n),
	}
	for i := range gen.ids {
		gen.ids[i] = strconv.Itoa(i)
	}
	return gen, nil
}

// Config is the generator's configuration with defaults filled in.
func (gen *Generator) Config() GeoConfig { return gen.cfg }

// Next draws layouts from r until one is connected and has distinct
// source and destination nodes, and returns it as a graph whose node i
// has ID "i" and the drawn position. Links are added in order of their
// (lower, higher) node index, with weight 1. The layout depends only on
// r's output, so a seeded r reproduces it on any machine.
func (gen *Generator) Next(r *rand.Rand) (*Topology, error) {
	for attempt := 1; attempt <= gen.cfg.MaxAttempts; attempt++ {
		gen.draw(r, len(gen.x) > directMax)
		if !gen.connected() {
			continue
		}
		src, dst := gen.nearest(gen.cfg.Src), gen.nearest(gen.cfg.Dst)
		if src == dst {
			// Possible with few nodes; the seed's study needs two ends.
			continue
		}
		gen.fill()
		gen.topo = Topology{Graph: &gen.graph, Src: src, Dst: dst, Attempts: attempt}
		return &gen.topo, nil
	}
	return nil, fmt.Errorf("%w: %d nodes, radius %v m in %v × %v m: none of %d layouts was connected", ErrNoLayout, gen.cfg.Nodes, gen.cfg.Radius, gen.cfg.Side, gen.cfg.Side, gen.cfg.MaxAttempts)
}

// RandomGeometric draws one topology with a generator of its own; the
// result is the caller's to keep.
func RandomGeometric(r *rand.Rand, cfg GeoConfig) (*Topology, error) {
	gen, err := NewGenerator(cfg)
	if err != nil {
		return nil, err
	}
	t, err := gen.Next(r)
	if err != nil {
		return nil, err
	}
	out := *t
	out.Graph = t.Graph.Clone()
	return &out, nil
}

// draw places the nodes and, if asked, sorts them into grid cells.
func (gen *Generator) draw(r *rand.Rand, grid bool) {
	side := gen.cfg.Side
	for i := range gen.x {
		gen.x[i] = r.Float64() * side
		gen.y[i] = r.Float64() * side
	}
	if !grid {
		return
	}
	nc := gen.ncell
	cs := gen.cellStart
	clear(cs)
	for i := range gen.x {
		cx := min(int(gen.x[i]/gen.cellSize), nc-1)
		cy := min(int(gen.y[i]/gen.cellSize), nc-1)
		c := int32(cy*nc + cx)
		gen.cellOf[i] = c
		cs[c+1]++
	}
	for c := 1; c < len(cs); c++ {
		cs[c] += cs[c-1]
	}
	// cs[c] is now the start of cell c; fill order using cs[c+1] as a
	// running cursor, then shift back.
	for i, c := range gen.cellOf {
		gen.order[cs[c]] = int32(i)
		cs[c]++
	}
	for c := len(cs) - 1; c > 0; c-- {
		cs[c] = cs[c-1]
	}
	cs[0] = 0
}

// forNeighbours calls f for every node j ≠ i within radius of node i until
// f returns false.
func (gen *Generator) forNeighbours(i int32, f func(j int32) bool) {
	nc := gen.ncell
	c := int(gen.cellOf[i])
	cx, cy := c%nc, c/nc
	xi, yi := gen.x[i], gen.y[i]
	for yy := max(cy-1, 0); yy <= min(cy+1, nc-1); yy++ {
		for xx := max(cx-1, 0); xx <= min(cx+1, nc-1); xx++ {
			cc := yy*nc + xx
			for _, j := range gen.order[gen.cellStart[cc]:gen.cellStart[cc+1]] {
				if j == i {
					continue
				}
				dx, dy := gen.x[j]-xi, gen.y[j]-yi
				if dx*dx+dy*dy <= gen.r2 && !f(j) {
					return
				}
			}
		}
	}
}

// connected reports whether the drawn layout is connected. Most random
// layouts fail because some node hears nobody, so that cheap test runs
// first and stops at the first such node.
func (gen *Generator) connected() bool {
	if len(gen.x) <= directMax {
		return gen.connectedDirect()
	}
	n := int32(len(gen.x))
	for i := range n {
		alone := true
		gen.forNeighbours(i, func(int32) bool { alone = false; return false })
		if alone {
			return false
		}
	}
	clear(gen.seen)
	gen.stack = append(gen.stack[:0], 0)
	gen.seen[0] = true
	count := int32(1)
	for len(gen.stack) > 0 {
		v := gen.stack[len(gen.stack)-1]
		gen.stack = gen.stack[:len(gen.stack)-1]
		gen.forNeighbours(v, func(j int32) bool {
			if !gen.seen[j] {
				gen.seen[j] = true
				count++
				gen.stack = append(gen.stack, j)
			}
			return true
		})
	}
	return count == n
}

// directMax is the most nodes for which comparing all pairs beats sorting
// the nodes into grid cells first; the seed's sizes (8–40) are all below.
const directMax = 64

// connectedDirect is connected without the grid.
func (gen *Generator) connectedDirect() bool {
	x, y, r2 := gen.x, gen.y, gen.r2
	n := len(x)
	for i := range n {
		xi, yi := x[i], y[i]
		alone := true
		for j := range n {
			dx, dy := x[j]-xi, y[j]-yi
			if j != i && dx*dx+dy*dy <= r2 {
				alone = false
				break
			}
		}
		if alone {
			return false
		}
	}
	clear(gen.seen)
	gen.stack = append(gen.stack[:0], 0)
	gen.seen[0] = true
	count := 1
	for len(gen.stack) > 0 {
		v := gen.stack[len(gen.stack)-1]
		gen.stack = gen.stack[:len(gen.stack)-1]
		xv, yv := x[v], y[v]
		for j := range n {
			if gen.seen[j] {
				continue
			}
			if dx, dy := x[j]-xv, y[j]-yv; dx*dx+dy*dy <= r2 {
				gen.seen[j] = true
				count++
				gen.stack = append(gen.stack, int32(j))
			}
		}
	}
	return count == n
}

// nearest is the node closest to p, the lower index on a tie.
func (gen *Generator) nearest(p Point) int {
	best, bestD := 0, math.Inf(1)
	for i := range gen.x {
		dx, dy := gen.x[i]-p.X, gen.y[i]-p.Y
		if d := dx*dx + dy*dy; d < bestD {
			best, bestD = i, d
		}
	}
	return best
}

// fill rebuilds gen.graph from the drawn layout, reusing its memory.
func (gen *Generator) fill() {
	g := &gen.graph
	n := len(gen.x)
	g.nodes = g.nodes[:0]
	g.edges = g.edges[:0]
	if cap(g.adj) < n {
		g.adj = make([][]half, n)
	}
	g.adj = g.adj[:n]
	for i := range n {
		g.nodes = append(g.nodes, Node{ID: gen.ids[i], Pos: Point{gen.x[i], gen.y[i]}, HasPos: true})
		g.adj[i] = g.adj[i][:0]
	}
	g.index = nil
	g.unit = true
	g.radius = gen.cfg.Radius
	for i := range n {
		for j := i + 1; j < n; j++ {
			dx, dy := gen.x[j]-gen.x[i], gen.y[j]-gen.y[i]
			if dx*dx+dy*dy <= gen.r2 {
				g.addEdge(i, j, 1)
			}
		}
	}
	// Added in (i, j) order, so every adjacency list is already sorted.
	g.sorted = true
}
