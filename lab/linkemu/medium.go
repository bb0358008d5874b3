package linkemu

import (
	"sync"
	"time"
)

// Medium is one transmission capacity shared by several directions, of one
// link or of many: a radio channel that every link within interference
// range contends for, or an access line that two paths cross. A direction
// whose Shape names a Medium serializes its frames on the medium's single
// FIFO instead of a line of its own, so what one member sends delays every
// other; loss, delay and jitter stay per direction.
//
// The model leaves out what a real wireless channel adds on top of sharing
// airtime: collisions, backoff, rate adaptation and hidden terminals.
type Medium struct {
	mu   sync.Mutex
	ser  *Serializer
	last time.Duration // latest arrival seen: members' clocks are read before the lock

	frames, bytes, dropped uint64
}

// NewMedium returns an idle medium of rate bit/s (> 0) whose FIFO holds at
// most queuePackets frames (0 = DefaultQueuePackets).
func NewMedium(rate uint64, queuePackets int) *Medium {
	if queuePackets <= 0 {
		queuePackets = DefaultQueuePackets
	}
	return &Medium{ser: NewSerializer(rate, 0, queuePackets)}
}

// admit is Serializer.Admit for a frame of any member.
func (m *Medium) admit(now time.Duration, size int) (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// Two members may read the clock in one order and lock in the other;
	// the serializer wants arrivals in time order.
	now = max(now, m.last)
	m.last = now
	depart, ok := m.ser.Admit(now, size)
	if ok {
		m.frames++
		m.bytes += uint64(size)
	} else {
		m.dropped++
	}
	return depart, ok
}

// MediumStats counts what the members offered the medium.
type MediumStats struct {
	Frames, Bytes uint64 // admitted
	Dropped       uint64 // tail-dropped: the shared queue was full
}

// Stats returns the medium's counters.
func (m *Medium) Stats() MediumStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return MediumStats{Frames: m.frames, Bytes: m.bytes, Dropped: m.dropped}
}
