package sched

import "time"

// roundRobin cycles over the candidate paths (with window room) in ID order, one packet each. It
// remembers the last ID rather than a slice index so that paths joining, leaving
// or being listed in a different order do not make it skip or repeat a path.
// Degraded paths: only when no healthy usable path exists.
type roundRobin struct{ last int }

func (*roundRobin) Name() string { return RoundRobin }

func (r *roundRobin) Pick(dst []int, paths []PathInfo, size int, flow uint32, now time.Time) []int {
	deg := useDegraded(paths)
	next, first := -1, -1 // next: smallest ID > last; first: smallest ID (wrap-around)
	for i := range paths {
		p := &paths[i]
		if !eligible(p, deg) || !hasRoom(p, size) {
			continue
		}
		if p.ID > r.last && (next < 0 || p.ID < paths[next].ID) {
			next = i
		}
		if first < 0 || p.ID < paths[first].ID {
			first = i
		}
	}
	if next < 0 {
		next = first
	}
	if next < 0 {
		return dst
	}
	r.last = paths[next].ID
	return append(dst, next)
}

// redundant sends every packet on every candidate path; the receiver's reorder
// buffer drops the copies. Degraded paths: only when no healthy usable path exists —
// the healthy copies already mask loss, and copies on a lossy path would mostly
// spend its capacity on packets that arrive late or not at all.
type redundant struct{}

func (redundant) Name() string { return Redundant }

func (redundant) Pick(dst []int, paths []PathInfo, size int, flow uint32, now time.Time) []int {
	deg := useDegraded(paths)
	for i := range paths {
		if eligible(&paths[i], deg) && hasRoom(&paths[i], size) {
			dst = append(dst, i)
		}
	}
	return dst
}
