package linkemu

import "time"

// delayLine holds scheduled frames in a binary min-heap ordered by send
// time, ties broken by arrival order: without jitter frames leave in the
// order they came. Entries are plain values (slot indexes a frame buffer),
// so pushing and popping never allocates once the slice has grown.
type delayLine struct {
	h   []lineEntry
	seq uint64
}

type lineEntry struct {
	at   time.Duration
	seq  uint64
	slot int32
}

func (e lineEntry) before(o lineEntry) bool { return e.at < o.at || e.at == o.at && e.seq < o.seq }

func (l *delayLine) Len() int { return len(l.h) }

// Push schedules slot for time at.
func (l *delayLine) Push(at time.Duration, slot int32) {
	l.seq++
	l.h = append(l.h, lineEntry{at: at, seq: l.seq, slot: slot})
	for i := len(l.h) - 1; i > 0; {
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
	top, last := l.h[0], len(l.h)-1
	l.h[0] = l.h[last]
	l.h = l.h[:last]
	for i := 0; 2*i+1 < last; {
		small := 2*i + 1
		if right := small + 1; right < last && l.h[right].before(l.h[small]) {
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
