package route

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
)

// The graph file format (docs/routes.md has the full description):
//
//	{
//	  "radius": 20,
//	  "nodes": [{"id": "s", "x": 10, "y": 50}, {"id": 1, "x": 25, "y": 50}],
//	  "edges": [{"from": "s", "to": 1, "weight": 2.5}]
//	}
//
// Every field is optional, but a graph needs nodes or edges. IDs are
// strings or numbers. With "radius", every two nodes at most that many
// metres apart are linked (weight 1), and every node needs a position;
// "edges" adds links (weight 1 unless given) or, for a pair the radius
// already linked, sets its weight. Without "nodes", the nodes are the
// edges' ends in order of first mention. Unknown fields are errors, so a
// misspelt "wieght" does not pass silently.
type graphFile struct {
	Radius *float64   `json:"radius,omitempty"`
	Nodes  []fileNode `json:"nodes,omitempty"`
	Edges  []fileEdge `json:"edges,omitempty"`
}

type fileNode struct {
	ID fileID   `json:"id"`
	X  *float64 `json:"x,omitempty"`
	Y  *float64 `json:"y,omitempty"`
}

type fileEdge struct {
	From   fileID   `json:"from"`
	To     fileID   `json:"to"`
	Weight *float64 `json:"weight,omitempty"`
}

// fileID is a node ID written as a JSON string or number.
type fileID string

func (id *fileID) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*id = fileID(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("node id %s: want a string or a number", b)
	}
	*id = fileID(n.String())
	return nil
}

// ReadGraph parses a graph file.
func ReadGraph(r io.Reader) (*Graph, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return ParseGraph(data)
}

// ParseGraph parses a graph file's contents.
func ParseGraph(data []byte) (*Graph, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f graphFile
	if err := dec.Decode(&f); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
			return nil, fmt.Errorf("%w: graph file line %d: %v", ErrBadParam, line, err)
		}
		return nil, fmt.Errorf("%w: graph file: %v", ErrBadParam, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: graph file: data after the JSON object", ErrBadParam)
	}
	if len(f.Nodes) == 0 && len(f.Edges) == 0 {
		return nil, fmt.Errorf("%w: graph file has neither nodes nor edges", ErrBadParam)
	}
	g := NewGraph()
	for i, n := range f.Nodes {
		if strings.TrimSpace(string(n.ID)) == "" {
			return nil, fmt.Errorf("%w: graph file node %d has no id", ErrBadParam, i+1)
		}
		var err error
		switch {
		case n.X != nil && n.Y != nil:
			_, err = g.AddNodeAt(string(n.ID), Point{*n.X, *n.Y})
		case n.X == nil && n.Y == nil:
			_, err = g.AddNode(string(n.ID))
		default:
			err = fmt.Errorf("%w: node %q has only one of x and y", ErrBadParam, n.ID)
		}
		if err != nil {
			return nil, fmt.Errorf("graph file: %w", err)
		}
	}
	if f.Radius != nil {
		r := *f.Radius
		if !(r > 0) || math.IsInf(r, 0) {
			return nil, fmt.Errorf("%w: graph file radius %v (want > 0)", ErrBadParam, r)
		}
		if len(f.Nodes) == 0 {
			return nil, fmt.Errorf("%w: graph file has a radius but no positioned nodes", ErrBadParam)
		}
		for _, n := range g.nodes {
			if !n.HasPos {
				return nil, fmt.Errorf("%w: graph file has a radius, but node %q has no position", ErrBadParam, n.ID)
			}
		}
		g.radius = r
		for i := range g.nodes {
			for j := i + 1; j < len(g.nodes); j++ {
				if g.nodes[i].Pos.Within(g.nodes[j].Pos, r) {
					g.addEdge(i, j, 1)
				}
			}
		}
	}
	radiusEdges := len(g.edges)
	implicit := len(f.Nodes) == 0
	end := func(id fileID) (int, error) {
		if i, err := g.Index(string(id)); err == nil {
			return i, nil
		}
		if !implicit {
			return -1, fmt.Errorf("%w: edge end %q is not in \"nodes\"", ErrNoNode, id)
		}
		if strings.TrimSpace(string(id)) == "" {
			return -1, fmt.Errorf("%w: edge with an empty end", ErrBadParam)
		}
		return g.AddNode(string(id))
	}
	for k, e := range f.Edges {
		a, err := end(e.From)
		if err != nil {
			return nil, fmt.Errorf("graph file edge %d: %w", k+1, err)
		}
		b, err := end(e.To)
		if err != nil {
			return nil, fmt.Errorf("graph file edge %d: %w", k+1, err)
		}
		w := 1.0
		if e.Weight != nil {
			w = *e.Weight
		}
		if id, ok := g.EdgeBetween(a, b); ok && id < radiusEdges {
			if err := g.SetWeight(id, w); err != nil {
				return nil, fmt.Errorf("graph file edge %d (%s–%s): %w", k+1, e.From, e.To, err)
			}
			continue
		}
		if _, err := g.AddEdge(a, b, w); err != nil {
			return nil, fmt.Errorf("graph file edge %d: %w", k+1, err)
		}
	}
	g.Prepare()
	return g, nil
}

// radiusLinked reports whether every two nodes within radius are linked,
// so that writing the radius adds no link on reading back.
func (g *Graph) radiusLinked() bool {
	for i := range g.nodes {
		for j := i + 1; j < len(g.nodes); j++ {
			if g.nodes[i].Pos.Within(g.nodes[j].Pos, g.radius) {
				if _, ok := g.EdgeBetween(i, j); !ok {
					return false
				}
			}
		}
	}
	return true
}

// MarshalJSON writes g in the graph file format: its nodes (with
// positions where known), its radius if it has one and every node has a
// position, and every link with its weight, so that reading the file
// back gives the same nodes and links.
func (g *Graph) MarshalJSON() ([]byte, error) {
	var f graphFile
	allPos := true
	for _, n := range g.nodes {
		allPos = allPos && n.HasPos
	}
	if g.radius > 0 && allPos && g.radiusLinked() {
		r := g.radius
		f.Radius = &r
	}
	for _, n := range g.nodes {
		fn := fileNode{ID: fileID(n.ID)}
		if n.HasPos {
			x, y := n.Pos.X, n.Pos.Y
			fn.X, fn.Y = &x, &y
		}
		f.Nodes = append(f.Nodes, fn)
	}
	for _, e := range g.edges {
		fe := fileEdge{From: fileID(g.nodes[e.A].ID), To: fileID(g.nodes[e.B].ID)}
		if e.Weight != 1 {
			w := e.Weight
			fe.Weight = &w
		}
		f.Edges = append(f.Edges, fe)
	}
	return json.Marshal(f)
}
