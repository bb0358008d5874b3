package scenario

import (
	"slices"
	"testing"
	"time"
)

func TestEvents(t *testing.T) {
	s, err := Parse("e.toml", []byte(`
[[links]]
name = "secondary"
mtu = 1280
[[transports]]
name = "braid"
priorities = [0, 4]
[[events]]
at = "3s"
action = "cut"
link = "secondary"
[[events]]
at = "4.5s"
action = "down"
link = "primary"
[[events]]
at = "6s"
action = "restore"
link = "secondary"
[[events]]
at = "6s"
action = "readdress"
link = "secondary"
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{3 * time.Second, ActionCut, "secondary"},
		{4500 * time.Millisecond, ActionDown, "primary"},
		{6 * time.Second, ActionRestore, "secondary"},
		{6 * time.Second, ActionReaddress, "secondary"},
	}
	if !slices.Equal(s.Experiment.Events, want) {
		t.Errorf("events %v, want %v", s.Experiment.Events, want)
	}
	if got := s.Experiment.Events[1].String(); got != "down primary at 4.5s" {
		t.Errorf("String %q", got)
	}
	if !s.Experiment.Events[2].Restores() || s.Experiment.Events[0].Restores() || s.Experiment.Events[3].Restores() {
		t.Error("Restores: only restore and up bring a path back")
	}
	p := s.Points()[0]
	if m := p.Topology.Link("secondary").MTU; m != 1280 || p.Topology.Link("primary").MTU != 0 {
		t.Errorf("mtu %d on secondary, %d on primary", m, p.Topology.Link("primary").MTU)
	}
	if tr := p.Transport; !slices.Equal(tr.Priorities, []int{0, 4}) || tr.Label != "braid tiers=0/4" {
		t.Errorf("priorities %v, label %q", tr.Priorities, tr.Label)
	}
}

func TestEventErrors(t *testing.T) {
	ev := func(at, action, link string) string {
		return "[[events]]\nat = \"" + at + "\"\naction = \"" + action + "\"\nlink = \"" + link + "\"\n"
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"no at", "[[events]]\naction = \"cut\"\nlink = \"primary\"\n", `t.toml: line 1: events[0].at: required: the time after each download starts (e.g. "3s")`},
		{"bad at", ev("3", "cut", "primary"), `t.toml: line 2: events[0].at: "3" is not a duration (e.g. "20ms", "1.5ms", "100us")`},
		{"action", ev("3s", "unplug", "primary"), `t.toml: line 3: events[0].action: unknown action "unplug" (valid: cut, restore, down, up, readdress)`},
		{"link", ev("3s", "cut", "lan"), `t.toml: line 4: events[0].link: no path "lan" (paths, the client–server links: primary, secondary)`},
		{"order", ev("3s", "cut", "primary") + ev("2s", "restore", "primary"), `t.toml: line 6: events[1].at: 2s is before events[0] (3s); list events in time order`},
		{"restore uncut", ev("3s", "restore", "primary"), `t.toml: line 3: events[0].action: path "primary" was not cut`},
		{"cut twice", ev("3s", "cut", "primary") + ev("4s", "cut", "primary"), `t.toml: line 7: events[1].action: path "primary" is already cut`},
		{"up not down", ev("3s", "up", "secondary"), `t.toml: line 3: events[0].action: path "secondary" was not down`},
		{"two moves", ev("3s", "readdress", "primary") + ev("4s", "readdress", "primary"), `t.toml: line 7: events[1].action: path "primary" already moved; one readdress per path`},
		{"mtu range", "[[links]]\nname = \"primary\"\nmtu = 100\n", `t.toml: line 3: links[0].mtu: 100 out of range (576..9000)`},
		{"mtu not a path", "[[links]]\nname = \"lan\"\nmtu = 1280\n", `t.toml: line 3: links[0].mtu: link "lan" sets mtu, which only a path (a client–server link) takes`},
		{"tiers count", "[[transports]]\nname = \"braid\"\npriorities = [1]\n", `t.toml: line 3: transports[0].priorities: 1 tier for 2 paths (one per client–server link, in file order)`},
		{"tier range", "[[transports]]\nname = \"braid\"\npriorities = [0, 9]\n", `t.toml: line 3: transports[0].priorities[1]: 9 out of range (0..7)`},
		{"tiers direct", "[[transports]]\nname = \"direct\"\npriorities = [0, 1]\n", `t.toml: line 3: transports[0].priorities: transport "direct" takes no priorities option (its options: path)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.toml", []byte(tc.doc))
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}
}
