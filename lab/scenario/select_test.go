package scenario

import (
	"fmt"
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

// TestShard: the shards of a campaign partition its points, each point in
// the shard of its Index mod N, in file order; with --only the shard keeps
// the selected points of its residue class.
func TestShard(t *testing.T) {
	s := loadCommitted(t, "schedulers.toml") // 100 points
	all := s.Points()
	const n = 3
	seen := map[int]int{}
	for i := 0; i < n; i++ {
		sh, err := ParseShard(fmt.Sprintf("%d/%d", i, n))
		if err != nil {
			t.Fatal(err)
		}
		if sh.String() != fmt.Sprintf("%d/%d", i, n) {
			t.Errorf("String() = %q", sh.String())
		}
		pts := sh.Filter(all)
		if want := (len(all) - i + n - 1) / n; len(pts) != want {
			t.Errorf("shard %d/%d: %d points, want %d", i, n, len(pts), want)
		}
		for j, p := range pts {
			if p.Index != i+j*n {
				t.Fatalf("shard %d/%d: point %d has index %d, want %d", i, n, j, p.Index, i+j*n)
			}
			seen[p.Index]++
		}
	}
	if len(seen) != len(all) {
		t.Errorf("the shards cover %d of %d points", len(seen), len(all))
	}
	for idx, c := range seen {
		if c != 1 {
			t.Errorf("point %d in %d shards", idx, c)
		}
	}
	// Whole: every point.
	if got := (Shard{}).Filter(all); len(got) != len(all) || !(Shard{}).Whole() || (Shard{}).String() != "" {
		t.Errorf("zero Shard: %d points, String %q", len(got), Shard{}.String())
	}
	// With a selection the shard is taken among the file's indexes.
	sel, err := s.Select([]string{"transport=mptcp-direct"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range (Shard{I: 1, N: 2}).Filter(sel.Points(s)) {
		if p.Index%2 != 1 || p.Transport.Name != "mptcp-direct" {
			t.Errorf("point %d (%s) in shard 1/2 of mptcp-direct", p.Index, p.Transport.Name)
		}
	}
}

func TestParseShardErrors(t *testing.T) {
	for _, bad := range []string{"", "1", "1/", "/2", "2/2", "-1/2", "0/0", "a/b", "1/2/3"} {
		if _, err := ParseShard(bad); err == nil {
			t.Errorf("ParseShard(%q) accepted it", bad)
		}
	}
	if sh, err := ParseShard(" 3 / 8 "); err != nil || sh != (Shard{I: 3, N: 8}) {
		t.Errorf("ParseShard(\" 3 / 8 \") = %v, %v", sh, err)
	}
	if sh, err := ParseShard("0/1"); err != nil || !sh.Whole() {
		t.Errorf("0/1 = %v, %v: want the whole campaign", sh, err)
	}
}
