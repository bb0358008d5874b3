package route

import (
	"fmt"
	"strings"
)

// Algorithm names one way of finding disjoint paths; the names are the
// CLI's --algo values.
type Algorithm string

const (
	LD      Algorithm = "ld"       // greedy link-disjoint (the seed's LD)
	ND      Algorithm = "nd"       // greedy node-disjoint (the seed's ND)
	ZD      Algorithm = "zd"       // greedy zone-disjoint (the seed's ZD)
	MaxLink Algorithm = "max-link" // most link-disjoint paths (max-flow)
	MaxNode Algorithm = "max-node" // most node-disjoint paths (max-flow, split nodes)
	OptLink Algorithm = "opt-link" // k link-disjoint paths of least total cost
	OptNode Algorithm = "opt-node" // k node-disjoint paths of least total cost
)

// Algorithms lists every algorithm, greedy first.
var Algorithms = []Algorithm{LD, ND, ZD, MaxLink, MaxNode, OptLink, OptNode}

// ParseAlgorithm accepts an algorithm's name in any case.
func ParseAlgorithm(s string) (Algorithm, error) {
	a := Algorithm(strings.ToLower(strings.TrimSpace(s)))
	for _, x := range Algorithms {
		if a == x {
			return a, nil
		}
	}
	names := make([]string, len(Algorithms))
	for i, x := range Algorithms {
		names[i] = string(x)
	}
	return "", fmt.Errorf("%w: algorithm %q (want one of %s)", ErrBadParam, s, strings.Join(names, ", "))
}

// Disjointness is the kind of disjointness the algorithm's paths have.
func (a Algorithm) Disjointness() Disjointness {
	switch a {
	case ND, MaxNode, OptNode:
		return NodeDisjoint
	case ZD:
		return ZoneDisjoint
	}
	return LinkDisjoint
}

// Greedy reports whether a is one of the seed's greedy algorithms.
func (a Algorithm) Greedy() bool { return a == LD || a == ND || a == ZD }

// UsesK reports whether a takes a path count k (opt-link, opt-node).
func (a Algorithm) UsesK() bool { return a == OptLink || a == OptNode }

// Find runs algorithm a (any case) from src to dst; k is the number of paths for
// opt-link and opt-node and is ignored by the others. The result lives in
// s's memory (see Solver).
func (s *Solver) Find(g *Graph, src, dst int, a Algorithm, k int, m Metric) ([]Path, error) {
	a, err := ParseAlgorithm(string(a))
	if err != nil {
		return nil, err
	}
	switch a {
	case LD, ND, ZD:
		return s.Greedy(g, src, dst, a.Disjointness(), m)
	case MaxLink, MaxNode:
		return s.MaxDisjoint(g, src, dst, a.Disjointness(), m)
	case OptLink, OptNode:
		return s.MinCostDisjoint(g, src, dst, k, a.Disjointness(), m)
	}
	panic("route: algorithm " + string(a) + " parsed but not dispatched")
}

// Find is Solver.Find with results of its own.
func Find(g *Graph, src, dst int, a Algorithm, k int, m Metric) ([]Path, error) {
	var s Solver
	ps, err := s.Find(g, src, dst, a, k, m)
	return ClonePaths(ps), err
}
