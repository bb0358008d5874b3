package linkemu

import (
	"slices"
	"sync"
	"time"
)

// Serializer is the bottleneck of one direction: a drop-tail FIFO in front
// of a transmitter that sends rate bit/s, doing arithmetic on timestamps
// (points on any monotonic timeline). A frame of n bytes takes n·8/rate
// seconds from when the one before it has finished (or from its arrival, if
// the line is idle) until its last bit is out; sub-nanosecond remainders
// carry over, so back-to-back frames depart at exactly the rate. The size
// counted is the Ethernet frame the socket sees (no preamble, FCS or gap),
// as netem counts. A frame counts against the queue limits from arrival to
// departure; one that would exceed either is dropped and changes nothing.
//
// With a Trace instead of a rate (NewTraceSerializer) the transmitter sends
// in the trace's delivery opportunities, counted from its (re)start: the
// bytes of one opportunity serve the head frames in order, a frame leaves
// at the opportunity that carries its last byte, and an opportunity that
// finds the queue empty is lost, as in Mahimahi's mm-link.
type Serializer struct {
	rate                  uint64        // bit/s; 0 = no serialization, no queue
	trace                 *Trace        // capacity instead of rate (nil: rate)
	origin                time.Duration // time 0 of the trace
	opp                   uint64        // the trace's opportunity the next byte goes in
	used                  int           // bytes of opp already taken
	limitBytes, limitPkts int           // 0 = no limit of that kind
	busyUntil             time.Duration // departure of the last admitted frame
	carry                 uint64        // leftover of bits·1e9 not yet a whole ns
	ring                  []queued      // admitted, not departed, oldest first; only grows
	head, n, bytes        int
}

type queued struct {
	depart time.Duration
	size   int
}

// NewSerializer returns an idle serializer. rate is in bit/s (0 = frames
// pass at once and the limits are ignored); limitBytes and limitPackets
// bound the backlog (0 = no limit of that kind).
func NewSerializer(rate uint64, limitBytes, limitPackets int) *Serializer {
	c := 64
	if limitPackets > 0 {
		c = min(c, limitPackets)
	}
	return &Serializer{rate: rate, limitBytes: limitBytes, limitPkts: limitPackets, ring: make([]queued, c)}
}

// Admit offers a frame of size bytes arriving at now. It returns the frame's
// departure time, or ok=false if the queue is full (tail drop). Arrivals
// must come in non-decreasing time order.
func (s *Serializer) Admit(now time.Duration, size int) (depart time.Duration, ok bool) {
	if s.rate == 0 && s.trace == nil {
		return now, true
	}
	s.expire(now)
	if s.limitPkts > 0 && s.n+1 > s.limitPkts || s.limitBytes > 0 && s.bytes+size > s.limitBytes {
		return 0, false
	}
	if s.trace != nil {
		depart = s.traceDepart(now, size)
	} else {
		start := s.busyUntil
		if now >= start {
			start, s.carry = now, 0
		}
		num := uint64(size)*8*uint64(time.Second) + s.carry
		s.carry = num % s.rate
		depart = start + time.Duration(num/s.rate)
		s.busyUntil = depart
	}
	if s.n == len(s.ring) { // full: oldest first, then as much room again
		s.ring, s.head = slices.Concat(s.ring[s.head:], s.ring[:s.head], make([]queued, s.n)), 0
	}
	s.ring[(s.head+s.n)%len(s.ring)] = queued{depart, size}
	s.n++
	s.bytes += size
	return depart, true
}

// expire forgets frames that have departed by now.
func (s *Serializer) expire(now time.Duration) {
	for s.n > 0 && s.ring[s.head].depart <= now {
		s.bytes -= s.ring[s.head].size
		s.head = (s.head + 1) % len(s.ring)
		s.n--
	}
}

// Medium is one transmission capacity shared by several directions, of one
// link or of many (a radio channel, an access line two paths cross): their
// frames serialize on its single FIFO, so what one member sends delays every
// other; loss, delay and jitter stay per direction. Collisions, backoff,
// rate adaptation and hidden terminals are not modelled.
type Medium struct {
	mu   sync.Mutex
	ser  *Serializer
	last time.Duration // latest arrival seen: members' clocks are read before the lock
	st   MediumStats
}

// MediumStats counts what the members offered the medium.
type MediumStats struct {
	Frames, Bytes uint64 // admitted
	Dropped       uint64 // tail-dropped: the shared queue was full
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
		m.st.Frames++
		m.st.Bytes += uint64(size)
	} else {
		m.st.Dropped++
	}
	return depart, ok
}

// Stats returns the medium's counters.
func (m *Medium) Stats() MediumStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st
}
