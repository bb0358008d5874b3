package scenario

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Selection restricts a run to the points whose parameters take given
// values, so a long campaign can be run in part from the committed file
// (`braid lab run FILE --only rtt=10ms,100ms --only loss=none`). Within one
// axis the values are alternatives; different axes must all match.
type Selection struct {
	specs []string
	want  map[Axis][]string
}

// Select parses specs of the form AXIS=VALUE[,VALUE…] against s's points.
// Values are the texts the report shows ("20ms", "1:3", "random 1%",
// "braid 50/50"); an unknown axis or a value no point has is an error that
// lists what the scenario offers.
func (s *Scenario) Select(specs []string) (*Selection, error) {
	sel := &Selection{specs: slices.Clone(specs), want: map[Axis][]string{}}
	offered := map[Axis][]string{}
	for _, p := range s.Points() {
		for _, q := range p.Params {
			if !slices.Contains(offered[q.Axis], q.Text) {
				offered[q.Axis] = append(offered[q.Axis], q.Text)
			}
		}
	}
	for _, spec := range specs {
		name, vals, ok := strings.Cut(spec, "=")
		axis := Axis(strings.TrimSpace(name))
		if !ok || axis == "" || strings.TrimSpace(vals) == "" {
			return nil, fmt.Errorf("--only %q: want AXIS=VALUE[,VALUE…]", spec)
		}
		have, known := offered[axis]
		if !known {
			return nil, fmt.Errorf("--only %q: scenario %s has no axis %q (axes: %s)", spec, s.Name, axis, join(s.Axes()))
		}
		for _, v := range strings.Split(vals, ",") {
			v = strings.TrimSpace(v)
			if !slices.Contains(have, v) {
				return nil, fmt.Errorf("--only %q: axis %s has no value %q (values: %s)", spec, axis, v, strings.Join(have, ", "))
			}
			sel.want[axis] = append(sel.want[axis], v)
		}
	}
	return sel, nil
}

// Points returns s's points that sel matches, keeping their Index and
// Network so results stay comparable with a full run. A point without a
// parameter on a selected axis (a transport the scheduler axis does not
// apply to) is kept: it is the same measurement whichever scheduler was
// asked for.
func (sel *Selection) Points(s *Scenario) []Point {
	if sel == nil {
		return s.Points()
	}
	return slices.DeleteFunc(s.Points(), func(p Point) bool {
		for axis, vals := range sel.want {
			if q, ok := p.Param(axis); ok && !slices.Contains(vals, q.Text) {
				return true
			}
		}
		return false
	})
}

// Specs returns the selection as given, for the report ("" when the run is
// complete).
func (sel *Selection) Specs() []string {
	if sel == nil {
		return nil
	}
	return slices.Clone(sel.specs)
}

// Shard is one of N parts of a campaign (`--shard I/N`): the points whose
// Index (their position in the scenario file's order, Points) is I mod N.
// Every shard can run on its own machine; `braid lab merge` joins their
// results. The zero Shard is the whole campaign.
type Shard struct{ I, N int }

// ParseShard reads "I/N" with 0 ≤ I < N.
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(a))
	n, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("--shard %q: want I/N, e.g. 0/4", s)
	}
	if n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("--shard %q: want 0 ≤ I < N", s)
	}
	return Shard{I: i, N: n}, nil
}

// Whole reports whether sh is the whole campaign (no sharding).
func (sh Shard) Whole() bool { return sh.N <= 1 }

// String is "I/N", "" for the whole campaign.
func (sh Shard) String() string {
	if sh.Whole() {
		return ""
	}
	return fmt.Sprintf("%d/%d", sh.I, sh.N)
}

// Filter returns the points of ps that belong to the shard, in order.
func (sh Shard) Filter(ps []Point) []Point {
	return slices.DeleteFunc(slices.Clone(ps), func(p Point) bool { return !sh.Whole() && p.Index%sh.N != sh.I })
}
