package recovery

import (
	"sync"
	"time"
)

// Entry is one retained payload.
type Entry[T any] struct {
	Item     T
	Flow     uint16
	FlowSeq  uint32
	Size     int       // bytes of the inner packet
	Deadline time.Time // when it must have arrived (see Deadline)
	Orig     uint16    // the path that first carried it (and lost it, if resent)
	Resends  uint8     // how often it was sent again
}

type slot[T any] struct {
	e   Entry[T]
	seq uint32
	ok  bool
}

// Store keeps entries by (path id, path packet number). Each path has a ring as
// large as its Sender's sent-packet ring, allocated when the path is first used:
// a packet that ring no longer tracks cannot be acked or declared lost either.
type Store[T any] struct {
	ringSize int
	mask     uint32
	paths    [][]slot[T]
	n        int
}

// NewStore returns a store whose per-path rings have ringSize slots (a power of
// two, as path.Config.RingSize).
func NewStore[T any](ringSize int) *Store[T] {
	r := 64
	for r < ringSize {
		r <<= 1
	}
	return &Store[T]{ringSize: r, mask: uint32(r - 1)}
}

// Len returns the number of retained entries.
func (s *Store[T]) Len() int { return s.n }

// Keep retains e as packet seq of path id. If the slot still holds an older
// entry (the ring wrapped without a verdict) that entry is returned so the
// caller can recycle its item.
func (s *Store[T]) Keep(id uint16, seq uint32, e Entry[T]) (old T, evicted bool) {
	for len(s.paths) <= int(id) {
		s.paths = append(s.paths, nil)
	}
	r := s.paths[id]
	if r == nil {
		if pr, _ := rings.Get().(*[]slot[T]); pr != nil && len(*pr) == s.ringSize {
			r = *pr
		} else {
			r = make([]slot[T], s.ringSize)
		}
		s.paths[id] = r
	}
	sl := &r[seq&s.mask]
	if sl.ok {
		old, evicted = sl.e.Item, true
		s.n--
	}
	*sl = slot[T]{e: e, seq: seq, ok: true}
	s.n++
	return old, evicted
}

// rings recycles the rings of empty stores (*[]slot[T], all slots empty; one
// whose type or size does not fit is left to the collector).
var rings sync.Pool

// Release gives the rings of an empty store back (for other stores, or the
// collector): 512 KiB a path with the default ring. A Keep takes one again. It
// reports whether the store was empty.
func (s *Store[T]) Release() bool {
	if s.n > 0 {
		return false
	}
	for id, r := range s.paths {
		if r != nil {
			rings.Put(&r)
			s.paths[id] = nil
		}
	}
	return true
}

// Peek returns the entry of packet seq of path id, keeping it.
func (s *Store[T]) Peek(id uint16, seq uint32) (Entry[T], bool) {
	if int(id) >= len(s.paths) || s.paths[id] == nil {
		return Entry[T]{}, false
	}
	sl := &s.paths[id][seq&s.mask]
	if !sl.ok || sl.seq != seq {
		return Entry[T]{}, false
	}
	return sl.e, true
}

// Take removes and returns the entry of packet seq of path id.
func (s *Store[T]) Take(id uint16, seq uint32) (Entry[T], bool) {
	e, ok := s.Peek(id, seq)
	if ok {
		s.paths[id][seq&s.mask] = slot[T]{}
		s.n--
	}
	return e, ok
}

// DrainPath removes every entry of path id, appending their items to out, and
// frees the path's ring.
func (s *Store[T]) DrainPath(id uint16, out []T) []T {
	if int(id) >= len(s.paths) || s.paths[id] == nil {
		return out
	}
	for i := range s.paths[id] {
		if sl := &s.paths[id][i]; sl.ok {
			out = append(out, sl.e.Item)
			s.n--
		}
	}
	s.paths[id] = nil
	return out
}

// Drain removes every entry of every path (a new session numbers flows afresh,
// so old payloads must never be resent), appending their items to out.
func (s *Store[T]) Drain(out []T) []T {
	for id := range s.paths {
		out = s.DrainPath(uint16(id), out)
	}
	return out
}
