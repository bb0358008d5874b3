package route

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestParseGraph(t *testing.T) {
	// Radius links plus an explicit link (a long wire) and a reweighted
	// radio link; numeric and string IDs.
	src := `{
	  "radius": 20,
	  "nodes": [
	    {"id": "s", "x": 0, "y": 0},
	    {"id": 1, "x": 15, "y": 0},
	    {"id": "d", "x": 30, "y": 0},
	    {"id": "far", "x": 90, "y": 90}
	  ],
	  "edges": [
	    {"from": "far", "to": "d", "weight": 4},
	    {"from": "s", "to": 1, "weight": 2.5}
	  ]
	}`
	g, err := ParseGraph([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if g.Len() != 4 || g.NumEdges() != 3 {
		t.Fatalf("%d nodes, %d links; want 4, 3 (s-1, 1-d by radius, far-d explicit)", g.Len(), g.NumEdges())
	}
	id := func(s string) int {
		i, err := g.Index(s)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	for _, c := range []struct {
		a, b string
		w    float64
	}{{"s", "1", 2.5}, {"1", "d", 1}, {"far", "d", 4}} {
		e, ok := g.EdgeBetween(id(c.a), id(c.b))
		if !ok || g.Edge(e).Weight != c.w {
			t.Errorf("link %s-%s: present %v, weight %v; want weight %v", c.a, c.b, ok, g.Edge(max(e, 0)).Weight, c.w)
		}
	}
	if _, ok := g.EdgeBetween(id("s"), id("d")); ok {
		t.Error("s and d are 30 m apart but linked")
	}
	if g.Radius() != 20 || !g.Node(id("far")).HasPos {
		t.Errorf("radius %v", g.Radius())
	}
	// Round trip.
	data, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	g2, err := ParseGraph(data)
	if err != nil {
		t.Fatalf("re-reading %s: %v", data, err)
	}
	if g2.Len() != g.Len() || g2.NumEdges() != g.NumEdges() {
		t.Fatalf("round trip: %d nodes %d links, want %d %d", g2.Len(), g2.NumEdges(), g.Len(), g.NumEdges())
	}
	for _, e := range g.Edges() {
		e2, ok := g2.EdgeBetween(e.A, e.B)
		if !ok || g2.Edge(e2).Weight != e.Weight || g2.ID(e.A) != g.ID(e.A) {
			t.Errorf("round trip lost link %s-%s (%v)", g.ID(e.A), g.ID(e.B), e.Weight)
		}
	}
}

func TestParseGraphImplicitNodes(t *testing.T) {
	g, err := ParseGraph([]byte(`{"edges": [{"from": "a", "to": "b"}, {"from": "b", "to": "c", "weight": 3}, {"from": 7, "to": "a"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range g.Len() {
		ids = append(ids, g.ID(i))
	}
	if want := []string{"a", "b", "c", "7"}; !slices.Equal(ids, want) {
		t.Errorf("nodes %v, want %v (order of first mention)", ids, want)
	}
	p, err := ShortestPath(g, 3, 2, EdgeWeight)
	if err != nil || !slices.Equal(g.IDs(p), []string{"7", "a", "b", "c"}) {
		t.Errorf("path 7→c: %v %v", p, err)
	}
}

func TestParseGraphErrors(t *testing.T) {
	for _, c := range []struct {
		src, want string
		is        error
	}{
		{`{}`, "neither nodes nor edges", ErrBadParam},
		{`{"nodes": [{"id": "a"}], "wieght": 1}`, "unknown field", ErrBadParam},
		{`{"nodes": [{"id": "a"}, {"id": "a"}]}`, "added twice", ErrBadParam},
		{`{"nodes": [{"id": "a", "x": 1}]}`, "only one of x and y", ErrBadParam},
		{`{"nodes": [{"id": ""}]}`, "no id", ErrBadParam},
		{`{"nodes": [{"id": true}]}`, "string or a number", ErrBadParam},
		{`{"radius": 10, "nodes": [{"id": "a", "x": 1, "y": 1}, {"id": "b"}]}`, `node "b" has no position`, ErrBadParam},
		{`{"radius": 0, "nodes": [{"id": "a", "x": 1, "y": 1}]}`, "radius 0", ErrBadParam},
		{`{"nodes": [{"id": "a"}], "edges": [{"from": "a", "to": "b"}]}`, `"b" is not in "nodes"`, ErrNoNode},
		{`{"edges": [{"from": "a", "to": "b"}, {"from": "b", "to": "a"}]}`, "added twice", ErrBadParam},
		{`{"edges": [{"from": "a", "to": "a"}]}`, "self-loop", ErrBadParam},
		{`{"edges": [{"from": "a", "to": "b", "weight": -2}]}`, "weight -2", ErrBadParam},
		{"{\n\"nodes\": [\n{\"id\": \"a\"},,\n]}", "line 3", ErrBadParam},
		{`{"nodes": [{"id": "a"}]} {}`, "data after", ErrBadParam},
	} {
		_, err := ParseGraph([]byte(c.src))
		if err == nil || !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n  got %v\n  want %v containing %q", c.src, err, c.is, c.want)
		}
	}
}

// The example in docs/routes.md parses to what the text says it is.
func TestDocExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/routes.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "```json\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("docs/routes.md has no JSON example")
	}
	g, err := ParseGraph([]byte(block))
	if err != nil {
		t.Fatal(err)
	}
	if g.Len() != 3 || g.NumEdges() != 3 {
		t.Fatalf("%d nodes %d links, the text says 3 and 3", g.Len(), g.NumEdges())
	}
	s, _ := g.Index("s")
	d, _ := g.Index("d")
	if e, ok := g.EdgeBetween(s, d); !ok || g.Edge(e).Weight != 3 {
		t.Errorf("s–d: %v", ok)
	}
}
