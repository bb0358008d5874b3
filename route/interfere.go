package route

import (
	"fmt"
	"slices"
)

// Link is an undirected link as node indices, lower first; it is how a
// caller that builds something along paths (a mesh lab: one namespace per
// node, one emulated link per hop) names the hops.
type Link struct{ A, B int }

func mkLink(a, b int) Link { return Link{min(a, b), max(a, b)} }

// PathLinks returns p's hops in order.
func PathLinks(p Path) []Link {
	if len(p) < 2 {
		return nil
	}
	out := make([]Link, len(p)-1)
	for i := 1; i < len(p); i++ {
		out[i-1] = mkLink(p[i-1], p[i])
	}
	return out
}

// PathNodes returns, in index order, every node on any of the paths: the
// nodes a lab must instantiate to run traffic over them.
func PathNodes(paths []Path) []int {
	var out []int
	for _, p := range paths {
		out = append(out, p...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// NodesWithin returns, in index order, the nodes other than i at most r
// metres from node i. Both need positions.
func (g *Graph) NodesWithin(i int, r float64) ([]int, error) {
	if err := g.checkNode(i); err != nil {
		return nil, err
	}
	if !g.nodes[i].HasPos {
		return nil, fmt.Errorf("%w: node %q has no position", ErrBadParam, g.nodes[i].ID)
	}
	var out []int
	for j, n := range g.nodes {
		if j == i {
			continue
		}
		if !n.HasPos {
			return nil, fmt.Errorf("%w: node %q has no position", ErrBadParam, n.ID)
		}
		if n.Pos.Within(g.nodes[i].Pos, r) {
			out = append(out, j)
		}
	}
	return out, nil
}

// Zone returns, in index order, p's intermediate nodes and their
// neighbours, without p's ends: the nodes greedy ZD deletes after finding
// p, and the nodes that hear p's relays on a shared channel.
func (g *Graph) Zone(p Path) []int {
	if len(p) < 3 {
		return nil
	}
	g.Prepare()
	in := map[int]bool{}
	for _, v := range p[1 : len(p)-1] {
		in[v] = true
		for _, h := range g.adj[v] {
			in[int(h.to)] = true
		}
	}
	delete(in, p[0])
	delete(in, p[len(p)-1])
	out := make([]int, 0, len(in))
	for v := range in {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// Interferes reports whether links a and b contend for one radio channel:
// they share a node, or an end of one is within interference range of an
// end of the other. With rng > 0 the range is a distance in metres
// (nodes need positions; 802.11's carrier sense typically reaches about
// twice the data range, so 2 × Radius is a fair choice); with rng == 0 it
// is the graph itself: two nodes hear each other when they are linked.
// This is a protocol-interference model: it says who must take turns, not
// how much capacity is left, and ignores hidden terminals, capture and
// rate adaptation.
func (g *Graph) Interferes(a, b Link, rng float64) (bool, error) {
	if rng < 0 {
		return false, fmt.Errorf("%w: interference range %v", ErrBadParam, rng)
	}
	for _, v := range []int{a.A, a.B, b.A, b.B} {
		if err := g.checkNode(v); err != nil {
			return false, err
		}
		if rng > 0 && !g.nodes[v].HasPos {
			return false, fmt.Errorf("%w: node %q has no position for a distance-based interference range", ErrBadParam, g.nodes[v].ID)
		}
	}
	for _, u := range []int{a.A, a.B} {
		for _, v := range []int{b.A, b.B} {
			if u == v {
				return true, nil
			}
			if rng > 0 {
				if g.nodes[u].Pos.Within(g.nodes[v].Pos, rng) {
					return true, nil
				}
			} else if _, ok := g.EdgeBetween(u, v); ok {
				return true, nil
			}
		}
	}
	return false, nil
}

// PathsContend reports whether any hop of p interferes with any hop of q
// (see Interferes): false means the two paths could run side by side on
// one channel, as the seed's "two channels" case assumes they do.
func (g *Graph) PathsContend(p, q Path, rng float64) (bool, error) {
	for _, a := range PathLinks(p) {
		for _, b := range PathLinks(q) {
			c, err := g.Interferes(a, b, rng)
			if err != nil || c {
				return c, err
			}
		}
	}
	return false, nil
}

// ContentionGroups partitions the distinct hops of the paths into groups
// that must share one channel's capacity: two hops that interfere (see
// Interferes) are in the same group, and so, transitively, are hops
// joined through a chain of interfering hops. The transitive closure
// over-approximates (two hops at the ends of a chain could in truth send
// at once), which errs towards less capacity, not more. Groups are
// ordered by their first link; links within a group are sorted.
func (g *Graph) ContentionGroups(paths []Path, rng float64) ([][]Link, error) {
	var links []Link
	for _, p := range paths {
		links = append(links, PathLinks(p)...)
	}
	slices.SortFunc(links, func(x, y Link) int {
		if x.A != y.A {
			return x.A - y.A
		}
		return x.B - y.B
	})
	links = slices.Compact(links)
	parent := make([]int, len(links))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	for i := range links {
		for j := i + 1; j < len(links); j++ {
			c, err := g.Interferes(links[i], links[j], rng)
			if err != nil {
				return nil, err
			}
			if c {
				if a, b := find(i), find(j); a != b {
					parent[max(a, b)] = min(a, b)
				}
			}
		}
	}
	var groups [][]Link
	slot := map[int]int{}
	for i, l := range links {
		r := find(i)
		k, ok := slot[r]
		if !ok {
			k = len(groups)
			slot[r] = k
			groups = append(groups, nil)
		}
		groups[k] = append(groups[k], l)
	}
	return groups, nil
}
