package route

import "fmt"

// ValidPath checks that p is a simple path of g from src to dst: it starts
// and ends there, every consecutive pair is linked, and no node repeats.
func (g *Graph) ValidPath(p Path, src, dst int) error {
	if len(p) < 2 {
		return fmt.Errorf("path %v: fewer than two nodes", p)
	}
	if p[0] != src || p[len(p)-1] != dst {
		return fmt.Errorf("path %v: runs %d→%d, want %d→%d", p, p[0], p[len(p)-1], src, dst)
	}
	seen := make(map[int]bool, len(p))
	for i, v := range p {
		if v < 0 || v >= len(g.nodes) {
			return fmt.Errorf("path %v: %w (index %d)", p, ErrNoNode, v)
		}
		if seen[v] {
			return fmt.Errorf("path %v: node %d repeats", p, v)
		}
		seen[v] = true
		if i > 0 {
			if _, ok := g.EdgeBetween(p[i-1], v); !ok {
				return fmt.Errorf("path %v: no link %d–%d", p, p[i-1], v)
			}
		}
	}
	return nil
}

// CheckDisjoint checks that the paths are pairwise disjoint in the given
// sense. Every kind forbids a shared link (two one-hop paths over the
// same direct link are one path, not two); NodeDisjoint also forbids a
// shared intermediate node, ZoneDisjoint also an intermediate node of one
// path that is a neighbour of an intermediate node of another.
func CheckDisjoint(g *Graph, paths []Path, kind Disjointness) error {
	type link struct{ a, b int }
	linkOwner := map[link]int{}
	nodeOwner := map[int]int{}
	for i, p := range paths {
		for j := 1; j < len(p); j++ {
			l := link{min(p[j-1], p[j]), max(p[j-1], p[j])}
			if o, ok := linkOwner[l]; ok && o != i {
				return fmt.Errorf("paths %d and %d share link %d–%d", o, i, l.a, l.b)
			}
			linkOwner[l] = i
		}
		if kind == LinkDisjoint || len(p) < 3 {
			continue
		}
		for _, v := range p[1 : len(p)-1] {
			if o, ok := nodeOwner[v]; ok && o != i {
				return fmt.Errorf("paths %d and %d share node %d", o, i, v)
			}
			nodeOwner[v] = i
		}
	}
	if kind != ZoneDisjoint {
		return nil
	}
	for v, i := range nodeOwner {
		for _, h := range g.adj[v] {
			if o, ok := nodeOwner[int(h.to)]; ok && o != i {
				return fmt.Errorf("paths %d and %d are in each other's zone: nodes %d and %d are neighbours", min(i, o), max(i, o), min(v, int(h.to)), max(v, int(h.to)))
			}
		}
	}
	return nil
}
