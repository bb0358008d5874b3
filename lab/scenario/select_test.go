package scenario

import (
	"strings"
	"testing"
)

func TestSelect(t *testing.T) {
	s := loadCommitted(t, "schedulers.toml") // 5 ratios × 4 losses × (mptcp, 50/50, braid × 3 schedulers)
	cases := []struct {
		only []string
		want int
	}{
		{nil, 100},
		{[]string{"rtt_ratio=1:1,1:5"}, 2 * 4 * 5},
		{[]string{"rtt_ratio=1:3", "loss=gemodel 1% 75% 50% 0%"}, 5},
		// mptcp and the 50/50 split have no scheduler param: kept.
		{[]string{"rtt_ratio=1:3", "loss=gemodel 1% 75% 50% 0%", "scheduler=minrtt"}, 3},
		{[]string{"transport=mptcp-direct"}, 20},
	}
	for _, c := range cases {
		sel, err := s.Select(c.only)
		if err != nil {
			t.Fatalf("%q: %v", c.only, err)
		}
		pts := sel.Points(s)
		if len(pts) != c.want {
			t.Errorf("%q: %d points, want %d", c.only, len(pts), c.want)
		}
		for _, p := range pts {
			if p.Index < 0 || p.Topology == nil {
				t.Fatalf("%q: point %v lost its identity", c.only, p)
			}
		}
	}
}

func TestSelectErrors(t *testing.T) {
	s := loadCommitted(t, "schedulers.toml")
	cases := map[string]string{
		"rtt=10ms":          `has no axis "rtt" (axes: rtt_ratio, loss, transport, scheduler)`,
		"rtt_ratio=1:7":     `axis rtt_ratio has no value "1:7" (values: 1:1, 1:2, 1:3, 1:4, 1:5)`,
		"rtt_ratio":         "want AXIS=VALUE",
		"=1:1":              "want AXIS=VALUE",
		"scheduler=fastest": `axis scheduler has no value "fastest"`,
	}
	for spec, want := range cases {
		_, err := s.Select([]string{spec})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--only %q: error %v, want it to contain %q", spec, err, want)
		}
	}
}
