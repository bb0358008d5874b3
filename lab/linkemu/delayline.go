package linkemu

import "time"

// delayLine holds scheduled frames in a binary min-heap ordered by send
// time, ties broken by arrival order, so frames with equal or increasing
// send times (no jitter) leave in the order they came, and jittered frames
// leave in send-time order. Entries are plain values (a slot index names
// the frame buffer), so pushing and popping never allocates once the slice
// has grown to the working size.
type delayLine struct {
	h   []lineEntry
	seq uint64
}

type lineEntry struct {
	at   time.Duration
	seq  uint64
	slot int32
}

func (e lineEntry) before(o lineEntry) bool {
	return e.at < o.at || (e.at == o.at && e.seq < o.seq)
}

func (l *delayLine) Len() int { return len(l.h) }

// Peek returns the earliest entry; the line must not be empty.
func (l *delayLine) Peek() lineEntry { return l.h[0] }

// Push schedules slot for time at.
func (l *delayLine) Push(at time.Duration, slot int32) {
	l.seq++
	l.h = append(l.h, lineEntry{at: at, seq: l.seq, slot: slot})
	i := len(l.h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !l.h[i].before(l.h[parent]) {
			break
		}
		l.h[i], l.h[parent] = l.h[parent], l.h[i]
		i = parent
	}
}

// Pop removes and returns the earliest entry; the line must not be empty.
func (l *delayLine) Pop() lineEntry {
	top := l.h[0]
	last := len(l.h) - 1
	l.h[0] = l.h[last]
	l.h = l.h[:last]
	i := 0
	for {
		left := 2*i + 1
		if left >= last {
			break
		}
		small := left
		if right := left + 1; right < last && l.h[right].before(l.h[left]) {
			small = right
		}
		if !l.h[small].before(l.h[i]) {
			break
		}
		l.h[i], l.h[small] = l.h[small], l.h[i]
		i = small
	}
	return top
}
