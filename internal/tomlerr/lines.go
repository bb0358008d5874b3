package tomlerr

import (
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// Lines maps the keys of a TOML document to their 1-based lines, so that an
// error found while validating a value (after decoding, when go-toml's
// positions are gone) can still point at the line. Keys are written the way
// validation errors name them: dotted, with array indices for arrays of
// tables and for array elements (links[1].a_to_b.delay, sweep.rtt[2]).
// Tables map to their header's line.
type Lines map[string]int

// KeyLines indexes data. A document that does not parse yields the keys
// before the syntax error; decoding reports the error itself.
func KeyLines(data []byte) Lines {
	x := lineIndexer{lines: Lines{}, arrays: map[string]int{}}
	x.p.Reset(data)
	cur := ""
	for x.p.NextExpression() {
		e := x.p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			parts, line := x.keyParts(e.Key())
			path := ""
			for i, part := range parts {
				path = join(path, part)
				if i == len(parts)-1 && e.Kind == unstable.ArrayTable {
					x.arrays[path]++
					// The array as a whole is reported at its first element.
					x.set(path, line)
				}
				// A header naming an array of tables refers to its last
				// element, both as [[a]] and as the parent in [a.b].
				if n := x.arrays[path]; n > 0 {
					path += "[" + strconv.Itoa(n-1) + "]"
				}
				// Tables a header defines implicitly ([a.b.c] defines
				// a and a.b) are reported at it unless defined earlier.
				x.set(path, line)
			}
			cur = path
		case unstable.KeyValue:
			x.keyValue(cur, e)
		}
	}
	return x.lines
}

// Line returns the line of key or, failing that, of its nearest ancestor
// that has one: a required key that is missing is reported at the header of
// its table. 0 when nothing matches.
func (l Lines) Line(key string) int {
	for key != "" {
		if n, ok := l[key]; ok {
			return n
		}
		key = parent(key)
	}
	return 0
}

func parent(key string) string {
	if strings.HasSuffix(key, "]") {
		if i := strings.LastIndexByte(key, '['); i >= 0 {
			return key[:i]
		}
	}
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		return key[:i]
	}
	return ""
}

type lineIndexer struct {
	p      unstable.Parser
	lines  Lines
	arrays map[string]int
}

func (x *lineIndexer) set(path string, line int) {
	if _, ok := x.lines[path]; !ok && line > 0 {
		x.lines[path] = line
	}
}

func (x *lineIndexer) lineOf(n *unstable.Node) int {
	if n == nil || n.Raw.Length == 0 {
		return 0
	}
	return x.p.Shape(n.Raw).Start.Line
}

func (x *lineIndexer) keyParts(it unstable.Iterator) ([]string, int) {
	var parts []string
	line := 0
	for it.Next() {
		n := it.Node()
		if line == 0 {
			line = x.lineOf(n)
		}
		parts = append(parts, string(n.Data))
	}
	return parts, line
}

func (x *lineIndexer) keyValue(base string, e *unstable.Node) {
	parts, line := x.keyParts(e.Key())
	path := base
	for _, part := range parts {
		path = join(path, part)
	}
	x.set(path, line)
	x.value(path, e.Value(), line)
}

func (x *lineIndexer) value(path string, v *unstable.Node, line int) {
	switch v.Kind {
	case unstable.Array:
		i := 0
		it := v.Children()
		for it.Next() {
			c := it.Node()
			if c.Kind == unstable.Comment {
				continue
			}
			el := path + "[" + strconv.Itoa(i) + "]"
			cl := x.lineOf(c)
			if cl == 0 {
				cl = line
			}
			x.set(el, cl)
			x.value(el, c, cl)
			i++
		}
	case unstable.InlineTable:
		it := v.Children()
		for it.Next() {
			if c := it.Node(); c.Kind == unstable.KeyValue {
				x.keyValue(path, c)
			}
		}
	}
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}
