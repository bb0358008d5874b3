package route

import "errors"

// The errors every function wraps, so that callers (the CLI, a lab) can
// tell a typo in a node name from a topology that simply has no route.
var (
	// ErrNoNode: a node index or ID that is not in the graph.
	ErrNoNode = errors.New("route: no such node")
	// ErrSameNode: source and destination are the same node; a route to
	// oneself has no links to be disjoint in.
	ErrSameNode = errors.New("route: source and destination are the same node")
	// ErrNoPath: the destination cannot be reached from the source.
	ErrNoPath = errors.New("route: no path between source and destination")
	// ErrTooFewPaths: fewer disjoint paths exist than were asked for.
	ErrTooFewPaths = errors.New("route: not enough disjoint paths")
	// ErrBadParam: an invalid parameter (k < 1, a non-positive weight,
	// an unknown algorithm, a layout that cannot be generated, ...).
	ErrBadParam = errors.New("route: invalid parameter")
	// ErrNoLayout: the generator drew its maximum number of layouts
	// without finding a connected one.
	ErrNoLayout = errors.New("route: no connected layout found")
)
