package sched

import "time"

// minRTT is MPTCP's default scheduler: the candidate path with the lowest SRTT among
// those with room for the packet (ties go to the first in the slice, as in Linux).
//
// Room. With a congestion controller (CwndRoom >= 0) a path without room for the
// packet is no candidate at all (see hasRoom): the engine holds the packet. Without
// one (CwndRoom < 0) there is no window to respect, yet "send everything on the
// fastest path" would pile a queue onto it, so a window is estimated as
//
//	W = Rate × RTT × WindowGain + WindowHeadroom   (RTT = MinRTT, else SRTT)
//
// and room is W - InFlight >= size. MinRTT is used because SRTT already contains the
// queue the window is meant to limit (using it would let the window grow with its
// own queue). Gain 2 leaves room for delayed/aggregated acks and lets the delivery
// rate, which only measures what we send, climb; the headroom lets a path with an
// unknown or tiny rate carry an initial window and so produce rate samples.
//
// No room anywhere (estimated windows only). Linux would wait for an ack; without a
// controller the tunnel does not hold packets, so the packet goes where MPTCP would
// eventually have sent it: the path whose estimated room frees soonest, estimating
// (missing bytes)/(drain rate), ties to the lower SRTT.
//
// Degraded paths: only when no healthy usable path exists.
type minRTT struct{ cfg Config }

func (*minRTT) Name() string { return MinRTT }

// room returns the bytes p may still send now (possibly negative) and the rate in
// bytes/s at which acks are expected to free more.
func (m *minRTT) room(p *PathInfo) (room int, drain float64) {
	srtt := rttOf(p, m.cfg.DefaultRTT)
	if p.CwndRoom >= 0 {
		room = p.CwndRoom
		drain = p.Rate
		if drain <= 0 {
			drain = float64(p.InFlight+p.CwndRoom) / srtt.Seconds()
		}
	} else {
		w := float64(m.cfg.WindowHeadroom)
		rtt := p.MinRTT
		if rtt <= 0 {
			rtt = p.SRTT
		}
		if p.Rate > 0 && rtt > 0 {
			w += p.Rate * rtt.Seconds() * m.cfg.WindowGain
		}
		room = int(w) - p.InFlight
		drain = p.Rate
		if drain <= 0 {
			drain = w / srtt.Seconds()
		}
	}
	if drain < m.cfg.MinRate {
		drain = m.cfg.MinRate
	}
	return room, drain
}

func (m *minRTT) Pick(dst []int, paths []PathInfo, size int, flow uint32, now time.Time) []int {
	deg := useDegraded(paths)
	best, full := -1, -1
	var bestRTT, fullRTT time.Duration
	var fullWait float64
	for i := range paths {
		p := &paths[i]
		if !eligible(p, deg) || !hasRoom(p, size) {
			continue
		}
		rtt := rttOf(p, m.cfg.DefaultRTT)
		room, drain := m.room(p)
		if room >= size {
			if best < 0 || rtt < bestRTT {
				best, bestRTT = i, rtt
			}
			continue
		}
		wait := float64(size-room) / drain
		if full < 0 || wait < fullWait || (wait == fullWait && rtt < fullRTT) {
			full, fullWait, fullRTT = i, wait, rtt
		}
	}
	if best < 0 {
		best = full
	}
	if best < 0 {
		return dst
	}
	return append(dst, best)
}
