package path

import "time"

// RxStats is a value snapshot of a Receiver.
type RxStats struct {
	RxPackets, RxBytes uint64 // distinct datagrams (and their bytes) received
	Duplicates         uint64 // datagrams whose seq was already recorded
	OutOfOrder         uint64 // datagrams that opened or filled a hole in the seq space
	TooOld             uint64 // datagrams more than 64 below the largest: counted as received, not acked
	AcksBuilt          uint64
	Largest            uint32
	LastRx             time.Time
	OWDRaw             uint32        // smoothed owdRaw
	OWDJitter          time.Duration // smoothed |owd - smoothed owd|
}

// Receiver is the receive-side state of one peer path: what to acknowledge
// and when, and the one-way delay of packets arriving on it.
type Receiver struct {
	ackEvery   int
	ackDelay   time.Duration
	ackSpacing time.Duration
	lastAck    time.Time // when BuildAck last ran

	have      bool
	largest   uint32
	bitmap    uint64 // bit i = largest-1-i received
	largestRx time.Time
	largestOW uint32 // owdRaw of largest

	rxPackets, rxBytes uint64
	dups, ooo, tooOld  uint64
	acks               uint64
	lastRx             time.Time

	pending   bool // something not yet acknowledged (ack-eliciting or not)
	immediate bool
	unacked   int // ack-eliciting packets since the last ack
	deadline  time.Time

	owdHave bool
	owdLast uint32
	owdU    int64 // unwrapped, µs
	owdS    int64 // smoothed, µs
	owdDev  int64 // smoothed deviation, µs
}

// AckMaxPending is the most ack-eliciting packets a Receiver lets wait for an
// ack: half the ack's 64-packet bitmap, so that one ack covers every packet it
// answers even when some arrived out of order.
const AckMaxPending = 32

// NewReceiver returns an empty Receiver using cfg.AckEvery and cfg.AckDelay.
func NewReceiver(cfg Config) *Receiver {
	cfg = cfg.withDefaults()
	return &Receiver{ackEvery: cfg.AckEvery, ackDelay: cfg.AckDelay, ackSpacing: cfg.AckSpacing}
}

// OnPacket records a received datagram and returns ackNow=true when an ACK
// should be sent immediately: AckEvery ack-eliciting packets are pending, or
// this ack-eliciting packet opened or filled a hole (prompt news of a gap
// lets the sender detect loss early; the seq space is per path, so this is
// never triggered by reordering between paths). Otherwise an ack-eliciting
// packet arms the AckDelay timer (see AckDue). Packets that are not
// ack-eliciting are only recorded and ride on the next ack. Duplicates are
// counted and otherwise ignored.
func (r *Receiver) OnPacket(seq uint32, size int, txUs uint32, rxUs uint32, ackEliciting bool, now time.Time) (ackNow bool) {
	owd := rxUs - txUs
	hole := false
	switch {
	case !r.have:
		r.have = true
		r.largest, r.bitmap = seq, 0
		r.largestRx, r.largestOW = now, owd
	default:
		d := int32(seq - r.largest)
		switch {
		case d > 0:
			// Shifts of 64 or more yield 0 in Go, which is what a
			// jump past the bitmap needs.
			r.bitmap = r.bitmap<<uint32(d) | 1<<uint32(d-1)
			hole = d > 1
			r.largest = seq
			r.largestRx, r.largestOW = now, owd
		case d == 0:
			r.dups++
			return false
		default:
			i := uint32(-d - 1)
			if i >= 64 {
				r.tooOld++
			} else {
				if r.bitmap&(1<<i) != 0 {
					r.dups++
					return false
				}
				r.bitmap |= 1 << i
				hole = true
			}
		}
	}
	if hole {
		r.ooo++
	}
	r.rxPackets++
	if size > 0 {
		r.rxBytes += uint64(size)
	}
	r.lastRx = now
	r.addOWD(owd)

	r.pending = true
	if !ackEliciting {
		return false
	}
	if r.unacked == 0 {
		r.deadline = now.Add(r.ackDelay)
	}
	r.unacked++
	switch {
	case hole || r.unacked >= AckMaxPending:
		r.immediate = true
	case r.unacked >= r.ackEvery:
		if due := r.lastAck.Add(r.ackSpacing); now.Before(due) {
			if due.Before(r.deadline) {
				r.deadline = due // spaced: the ack timer sends it
			}
		} else {
			r.immediate = true
		}
	}
	return r.immediate
}

// OnPing marks an ack as due at once; the engine calls it after OnPacket for
// a datagram carrying a PING, so probes measure the RTT without AckDelay
// and liveness decisions are not slowed by it. It returns true (send an ack
// now) unless nothing was received yet.
func (r *Receiver) OnPing() (ackNow bool) {
	if !r.have {
		return false
	}
	r.pending = true
	r.immediate = true
	return true
}

func (r *Receiver) addOWD(raw uint32) {
	r.owdU = unwrap(r.owdHave, r.owdLast, r.owdU, raw)
	r.owdLast = raw
	if !r.owdHave {
		r.owdHave = true
		r.owdS = r.owdU
		return
	}
	d := r.owdU - r.owdS
	if d < 0 {
		d = -d
	}
	r.owdDev += (d - r.owdDev) / 4
	r.owdS += (r.owdU - r.owdS) / 8
}

// AckDue reports whether an ack should be sent now: an ack-eliciting packet
// has waited AckDelay, or an immediate ack is pending.
func (r *Receiver) AckDue(now time.Time) bool {
	if !r.pending {
		return false
	}
	return r.immediate || (r.unacked > 0 && !now.Before(r.deadline))
}

// Unacked is the number of ack-eliciting packets received since the last ack.
func (r *Receiver) Unacked() int { return r.unacked }

// Pending reports whether anything was received since the last BuildAck,
// for an engine that piggybacks acks on outgoing data.
func (r *Receiver) Pending() bool { return r.pending }

// BuildAck returns the ack for everything received so far and clears the
// pending state. Before the first packet it returns the zero Ack.
func (r *Receiver) BuildAck(now time.Time) Ack {
	r.pending, r.immediate, r.unacked = false, false, 0
	r.lastAck = now
	if !r.have {
		return Ack{}
	}
	r.acks++
	d := now.Sub(r.largestRx).Truncate(time.Microsecond)
	if d < 0 {
		d = 0
	}
	return Ack{
		Largest:   r.largest,
		Bitmap:    r.bitmap,
		AckDelay:  d,
		RxPackets: uint32(r.rxPackets),
		RxBytes:   r.rxBytes,
		OWDRaw:    r.largestOW,
	}
}

// OWDRaw returns the smoothed raw one-way delay of this peer path (offset
// included: compare paths with int32 differences).
func (r *Receiver) OWDRaw() uint32 { return uint32(r.owdS) }

// OWDJitter returns the smoothed deviation of the one-way delay.
func (r *Receiver) OWDJitter() time.Duration { return time.Duration(r.owdDev) * time.Microsecond }

// Stats returns a snapshot.
func (r *Receiver) Stats() RxStats {
	return RxStats{
		RxPackets:  r.rxPackets,
		RxBytes:    r.rxBytes,
		Duplicates: r.dups,
		OutOfOrder: r.ooo,
		TooOld:     r.tooOld,
		AcksBuilt:  r.acks,
		Largest:    r.largest,
		LastRx:     r.lastRx,
		OWDRaw:     r.OWDRaw(),
		OWDJitter:  r.OWDJitter(),
	}
}
