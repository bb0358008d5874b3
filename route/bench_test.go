package route

import (
	"math/rand/v2"
	"testing"
)

// topologies32 are 64 of the seed's 32-node layouts (the size of its
// Figs 8–9) that have at least two node-disjoint paths, so that every
// algorithm, opt-node with k = 2 included, has work beyond one search.
func topologies32(b *testing.B) []*Topology {
	b.Helper()
	gen, err := NewGenerator(DefaultGeoConfig(32))
	if err != nil {
		b.Fatal(err)
	}
	var s Solver
	var out []*Topology
	for i := 0; len(out) < 64; i++ {
		t, err := gen.Next(rand.New(rand.NewPCG(1, uint64(i))))
		if err != nil {
			b.Fatal(err)
		}
		if ps, _ := s.MaxDisjoint(t.Graph, t.Src, t.Dst, NodeDisjoint, HopCount); len(ps) < 2 {
			continue
		}
		c := *t
		c.Graph = t.Graph.Clone()
		out = append(out, &c)
	}
	return out
}

func benchAlgo(b *testing.B, a Algorithm, k int) {
	ts := topologies32(b)
	var s Solver
	for _, t := range ts {
		s.Find(t.Graph, t.Src, t.Dst, a, k, HopCount)
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		t := ts[i%len(ts)]
		i++
		if _, err := s.Find(t.Graph, t.Src, t.Dst, a, k, HopCount); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLD32(b *testing.B)      { benchAlgo(b, LD, 0) }
func BenchmarkND32(b *testing.B)      { benchAlgo(b, ND, 0) }
func BenchmarkZD32(b *testing.B)      { benchAlgo(b, ZD, 0) }
func BenchmarkMaxLink32(b *testing.B) { benchAlgo(b, MaxLink, 0) }
func BenchmarkMaxNode32(b *testing.B) { benchAlgo(b, MaxNode, 0) }
func BenchmarkOptLink32(b *testing.B) { benchAlgo(b, OptLink, 2) }
func BenchmarkOptNode32(b *testing.B) { benchAlgo(b, OptNode, 2) }

// BenchmarkNDFresh32 is the package function: a new Solver and copied
// results per call, what a one-off caller pays.
func BenchmarkNDFresh32(b *testing.B) {
	ts := topologies32(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		t := ts[i%len(ts)]
		i++
		if _, err := Greedy(t.Graph, t.Src, t.Dst, NodeDisjoint, HopCount); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGenerate is one connected layout, rejections included: 12
// nodes is the rarest connected case (about 1 in 7 000 layouts), 32 the
// seed's Figs 8–9.
func BenchmarkGenerate12(b *testing.B) { benchGen(b, 12) }
func BenchmarkGenerate32(b *testing.B) { benchGen(b, 32) }

func benchGen(b *testing.B, n int) {
	gen, err := NewGenerator(DefaultGeoConfig(n))
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := gen.Next(r); err != nil {
			b.Fatal(err)
		}
	}
}
