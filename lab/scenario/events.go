package scenario

import (
	"fmt"
	"strings"
	"time"
)

// Event actions ([[events]] action): the failures real paths have, done to
// a path during every download of a point (docs/lab.md says what each does).
const (
	ActionCut       = "cut"
	ActionRestore   = "restore"
	ActionDown      = "down"
	ActionUp        = "up"
	ActionReaddress = "readdress"
)

// Actions lists the valid event actions.
var Actions = []string{ActionCut, ActionRestore, ActionDown, ActionUp, ActionReaddress}

// Limits of [[events]] and of a link's mtu.
const (
	MaxEvents = 32
	// MaxEventAt bounds an event's time: it fires during a download.
	MaxEventAt = time.Hour
	// MinMTU is IPv4's minimum reassembly size rounded up to what every
	// tunnel needs; MaxMTU a jumbo frame.
	MinMTU = 576
	MaxMTU = 9000
)

// Event is one change to a path, At after each download of a point starts
// (the runner undoes whatever is left changed after the download).
type Event struct {
	At     time.Duration
	Action string
	Link   string // a path (a client–server link)
}

// String is "cut secondary at 3s".
func (e Event) String() string { return fmt.Sprintf("%s %s at %v", e.Action, e.Link, e.At) }

// Restores reports whether the event brings its path back (restore, up):
// the runner then measures how soon the path carries traffic again.
func (e Event) Restores() bool { return e.Action == ActionRestore || e.Action == ActionUp }

type rawEvent struct {
	At     string `toml:"at"`
	Action string `toml:"action"`
	Link   string `toml:"link"`
}

// events reads [[events]]: in time order, each naming a path and an
// action that makes sense after the ones before it on that path.
func (p *parser) events(t *Topology, raw []rawEvent) []Event {
	p.failIf(len(raw) > MaxEvents, "events", "%d events; at most %d", len(raw), MaxEvents)
	state := map[string]PathState{}
	var out []Event
	for i, r := range raw {
		key := fmt.Sprintf("events[%d]", i)
		// Once one is missing, the checks after it fail quietly.
		p.failIf(r.At == "", key+".at", "required: the time after each download starts (e.g. \"3s\")")
		e := Event{At: parseOr(p, key+".at", r.At, durIn(0, MaxEventAt, egDelay)), Link: r.Link}
		p.failIf(r.Action == "", key+".action", "required (one of: %s)", strings.Join(Actions, ", "))
		if e.Action = parseOr(p, key+".action", r.Action, oneOf("action", Actions)); !p.path(key+".link", r.Link, t) {
			return nil
		}
		cuts := e.Action == ActionCut || e.Action == ActionRestore
		p.failIf(cuts && !t.Link(r.Link).Emulated(), key+".action", "%s needs the path's link node (via): link %q has none", e.Action, r.Link)
		if n := len(out); n > 0 && e.At < out[n-1].At {
			p.fail(key+".at", "%v is before events[%d] (%v); list events in time order", e.At, n-1, out[n-1].At)
		}
		var changed bool
		if state[e.Link], changed = state[e.Link].Apply(e.Action); !changed {
			p.fail(key+".action", unchanged[e.Action], e.Link)
		}
		out = append(out, e)
	}
	return out
}

// PathState is what the events so far have done to one path.
type PathState struct{ Cut, Down, Moved bool }

// Apply returns the state after an event of action, and whether the event
// changed it: a cut path cannot be cut again, nor an uncut one restored, and
// a path moves (readdress) once.
func (s PathState) Apply(action string) (PathState, bool) {
	was := s
	switch action {
	case ActionCut, ActionRestore:
		s.Cut = action == ActionCut
	case ActionDown, ActionUp:
		s.Down = action == ActionDown
	case ActionReaddress:
		s.Moved = true
	}
	return s, s != was
}

// unchanged says why an event that changes nothing is refused.
var unchanged = map[string]string{
	ActionCut:       "path %q is already cut",
	ActionRestore:   "path %q was not cut",
	ActionDown:      "path %q is already down",
	ActionUp:        "path %q was not down",
	ActionReaddress: "path %q already moved; one readdress per path",
}
