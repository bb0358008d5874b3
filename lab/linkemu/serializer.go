package linkemu

import "time"

// Serializer is the bottleneck of one direction: a drop-tail FIFO in front
// of a transmitter that sends Rate bit/s. It only does arithmetic on
// timestamps (a point on any monotonic timeline, as a Duration), so it is
// tested without sockets or clocks.
//
// A frame of n bytes takes n·8/Rate seconds to serialize and starts when
// the one before it has finished (or on arrival, if the line is idle); its
// departure is the moment its last bit is out. Sub-nanosecond remainders
// are carried from frame to frame while the line stays busy, so a long run
// of back-to-back frames departs at exactly the configured rate instead of
// drifting by the rounding of each frame.
//
// A frame counts against the queue limits from its arrival until its
// departure (the frame on the wire included, as in a router's output
// buffer). A frame that would push the backlog over either limit is dropped
// and leaves the line's schedule untouched.
type Serializer struct {
	rate       uint64 // bit/s; 0 = no serialization, no queue
	limitBytes int    // 0 = no byte limit
	limitPkts  int    // 0 = no packet limit

	busyUntil time.Duration // departure of the last admitted frame
	carry     uint64        // leftover of bits·1e9 not yet a whole ns

	// Admitted frames not yet departed, oldest first, in a ring that only
	// grows (so steady state does not allocate).
	ring  []queued
	head  int
	n     int
	bytes int
}

type queued struct {
	depart time.Duration
	size   int
}

// NewSerializer returns an idle serializer. rate is in bit/s (0 = frames
// pass at once and the limits are ignored); limitBytes and limitPackets
// bound the backlog (0 = no limit of that kind).
func NewSerializer(rate uint64, limitBytes, limitPackets int) *Serializer {
	s := &Serializer{rate: rate, limitBytes: limitBytes, limitPkts: limitPackets}
	c := 64
	if limitPackets > 0 && limitPackets < c {
		c = limitPackets
	}
	s.ring = make([]queued, c)
	return s
}

// Admit offers a frame of size bytes arriving at now. It returns the frame's
// departure time, or ok=false if the queue is full (tail drop). Arrivals
// must come in non-decreasing time order.
func (s *Serializer) Admit(now time.Duration, size int) (depart time.Duration, ok bool) {
	if s.rate == 0 {
		return now, true
	}
	s.expire(now)
	if s.limitPkts > 0 && s.n+1 > s.limitPkts {
		return 0, false
	}
	if s.limitBytes > 0 && s.bytes+size > s.limitBytes {
		return 0, false
	}
	start := s.busyUntil
	if now >= start {
		start = now
		s.carry = 0
	}
	num := uint64(size)*8*uint64(time.Second) + s.carry
	s.carry = num % s.rate
	depart = start + time.Duration(num/s.rate)
	s.busyUntil = depart
	s.push(queued{depart: depart, size: size})
	return depart, true
}

// Backlog is what waits or is on the wire at now: bytes and frames.
func (s *Serializer) Backlog(now time.Duration) (bytes, packets int) {
	s.expire(now)
	return s.bytes, s.n
}

// expire forgets frames that have departed by now.
func (s *Serializer) expire(now time.Duration) {
	for s.n > 0 && s.ring[s.head].depart <= now {
		s.bytes -= s.ring[s.head].size
		s.head++
		if s.head == len(s.ring) {
			s.head = 0
		}
		s.n--
	}
}

func (s *Serializer) push(q queued) {
	if s.n == len(s.ring) {
		bigger := make([]queued, 2*len(s.ring))
		for i := 0; i < s.n; i++ {
			bigger[i] = s.ring[(s.head+i)%len(s.ring)]
		}
		s.ring, s.head = bigger, 0
	}
	s.ring[(s.head+s.n)%len(s.ring)] = q
	s.n++
	s.bytes += q.size
}
