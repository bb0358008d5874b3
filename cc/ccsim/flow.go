package ccsim

import (
	"time"

	"github.com/braid-vpn/braid/cc"
)

// ringSize bounds the packets a subflow tracks; cc's default MaxWindow (8192)
// stays well inside it.
const ringSize = 1 << 15

type pktState uint8

const (
	pktFree pktState = iota
	pktOut
	pktAcked
	pktLost
)

type pkt struct {
	seq   uint32
	sent  int64
	size  int32
	state pktState
}

// subflow is the sender of one route, with its receiver folded in: a packet that
// reaches the end of the route is acked at once.
type subflow struct {
	f       *Flow
	idx     int
	route   []*Link
	rev     int64 // ack path delay
	ccp     *cc.Path
	running bool

	ring        []pkt
	next        uint32 // next seq to send
	lowest      uint32 // lowest seq without a verdict
	largest     uint32
	haveLargest bool
	inflight    int

	haveRTT              bool
	srtt, rttvar, latest int64

	lossAt, rtoAt       int64 // armed timer deadlines (0 = unarmed)
	lossEvent, rtoEvent bool  // an event is pending for the timer
	backoff             uint

	lastAckAt int64 // arrival of the latest ack scheduled

	// Pacing: a send timer is pending for paceAt.
	paceAt    int64
	paceEvent bool

	// Delivery-rate sampling as braid's path.Sender does it: bytes received over
	// intervals of at least max(srtt, 10 ms), timed by the receiver's clock
	// (arrival times), app-limited when the sender sent into an empty pipe.
	rxBytes               uint64 // bytes that reached the receiver
	rateValid, rateAppLtd bool
	rateStart             int64
	rateBytes0            uint64
	minRTT, minRTTAt      int64  // windowed (MinRTTWindow) min RTT, expiry style
	acked                 uint64 // bytes
	lost                  uint64 // packets
}

func (sub *subflow) s() *Sim { return sub.f.s }

// trySend sends while the window admits a packet.
func (sub *subflow) trySend() {
	if !sub.running || sub.ccp == nil {
		return
	}
	s := sub.s()
	size := s.cfg.PacketSize
	for sub.ccp.CanSend(sub.inflight, size) {
		if d := sub.ccp.PaceDelay(s.Now(), size); d > 0 {
			sub.armPace(s.now + int64(d))
			return
		}
		seq := sub.next
		sub.next++
		p := &sub.ring[seq&(ringSize-1)]
		if p.state == pktOut {
			// A ring's worth of packets went out after it without a verdict.
			sub.declareLost(p)
		}
		*p = pkt{seq: seq, sent: s.now, size: int32(size), state: pktOut}
		if sub.inflight == 0 {
			sub.rateAppLtd = true // the interval includes an empty pipe
		}
		sub.inflight += size
		sub.ccp.OnSent(size, sub.inflight, s.Now())
		sub.forward(seq, 0, size)
		if sub.rtoAt == 0 {
			sub.armRTO()
		}
	}
}

// forward puts packet seq onto hop h of the route (now).
func (sub *subflow) forward(seq uint32, h int, size int) {
	s := sub.s()
	at, ok := sub.route[h].enqueue(size)
	if !ok {
		return
	}
	s.schedule(event{at: at, kind: evArrive, sub: sub, pseq: seq, hop: uint8(h + 1), size: int32(size)})
}

// arrive handles a packet reaching the end of hop e.hop-1.
func (sub *subflow) arrive(e *event) {
	if int(e.hop) < len(sub.route) {
		sub.forward(e.pseq, int(e.hop), int(e.size))
		return
	}
	s := sub.s()
	sub.rxBytes += uint64(e.size)
	rx, rxBytes := s.now, sub.rxBytes
	at := s.now + sub.rev
	if j := s.cfg.AckJitter; j > 0 {
		at += s.rng.Int64N(int64(j))
	}
	// Acks of one subflow never overtake each other: jitter changes when the
	// sender is clocked, not the order it learns things in.
	at = max(at, sub.lastAckAt)
	sub.lastAckAt = at
	s.schedule(event{at: at, kind: evAck, sub: sub, pseq: e.pseq, rx: rx, rxBytes: rxBytes})
}

// armPace schedules a send attempt at t (ns), rounded up to Config.PaceTick.
func (sub *subflow) armPace(t int64) {
	s := sub.s()
	if tick := int64(s.cfg.PaceTick); tick > 0 {
		t = (t + tick - 1) / tick * tick
	}
	if sub.paceEvent && sub.paceAt <= t {
		return
	}
	sub.paceAt, sub.paceEvent = t, true
	s.schedule(event{at: t, kind: evPace, sub: sub})
}

func (sub *subflow) onPace() {
	if !sub.paceEvent || sub.s().now < sub.paceAt {
		return // superseded by an earlier timer, which already ran
	}
	sub.paceEvent = false
	sub.trySend()
}

// deliveryRate returns a new delivery-rate sample (bytes/s, 0 = none) from the
// ack of a packet that reached the receiver at rx when it had received rxBytes.
func (sub *subflow) deliveryRate(rx int64, rxBytes uint64) (rate float64, appLimited bool) {
	if !sub.rateValid {
		sub.rateValid = true
		sub.rateStart, sub.rateBytes0 = rx, rxBytes
		sub.rateAppLtd = false
		return 0, false
	}
	el := rx - sub.rateStart
	if el < max(sub.srtt, int64(10*time.Millisecond)) {
		return 0, false
	}
	rate = float64(rxBytes-sub.rateBytes0) * 1e9 / float64(el)
	appLimited = sub.rateAppLtd
	sub.rateStart, sub.rateBytes0 = rx, rxBytes
	sub.rateAppLtd = false
	return rate, appLimited
}

func (sub *subflow) declareLost(p *pkt) {
	p.state = pktLost
	sub.inflight -= int(p.size)
	sub.lost++
}

func (sub *subflow) lossDelay() int64 {
	m := max(sub.srtt, sub.latest)
	return max(int64(float64(m)*sub.s().cfg.TimeThreshold), int64(time.Millisecond))
}

func (sub *subflow) rto() int64 {
	r := sub.srtt + max(4*sub.rttvar, int64(time.Millisecond))
	if !sub.haveRTT {
		r = int64(time.Second)
	}
	r = max(r, int64(sub.s().cfg.MinRTO))
	return min(r<<min(sub.backoff, 6), int64(60*time.Second))
}

func (sub *subflow) onAck(seq uint32, rx int64, rxBytes uint64) {
	s := sub.s()
	p := &sub.ring[seq&(ringSize-1)]
	if p.seq != seq || p.state != pktOut {
		return // already declared lost (spurious) or unknown
	}
	prior := sub.inflight
	p.state = pktAcked
	sub.inflight -= int(p.size)
	sub.acked += uint64(p.size)
	sub.backoff = 0
	var sample time.Duration
	if !sub.haveLargest || int32(seq-sub.largest) > 0 {
		sub.largest, sub.haveLargest = seq, true
		r := s.now - p.sent
		sample = time.Duration(r)
		sub.latest = r
		if sub.minRTT == 0 || r <= sub.minRTT || s.now-sub.minRTTAt > int64(s.cfg.MinRTTWindow) {
			sub.minRTT, sub.minRTTAt = r, s.now
		}
		if !sub.haveRTT {
			sub.haveRTT = true
			sub.srtt, sub.rttvar = r, r/2
		} else {
			d := sub.srtt - r
			if d < 0 {
				d = -d
			}
			sub.rttvar = (3*sub.rttvar + d) / 4
			sub.srtt = (7*sub.srtt + r) / 8
		}
	}
	lostBytes, newest := sub.detectLosses()
	now := s.Now()
	rate, appLimited := sub.deliveryRate(rx, rxBytes)
	if sub.ccp != nil {
		sub.ccp.OnAck(cc.Ack{Now: now, Bytes: int(p.size), PriorInFlight: prior, RTT: sample,
			SRTT: time.Duration(sub.srtt), LargestSent: Epoch.Add(time.Duration(p.sent)),
			DeliveryRate: rate, AppLimited: appLimited, MinRTT: time.Duration(sub.minRTT)})
		if lostBytes > 0 {
			sub.ccp.OnLoss(cc.Loss{Now: now, Bytes: lostBytes, LargestSent: Epoch.Add(time.Duration(newest))})
		}
	}
	if sub.inflight > 0 {
		sub.armRTO()
	} else {
		sub.rtoAt = 0
	}
	sub.trySend()
}

// detectLosses applies the packet and time thresholds below the largest acked
// packet, arms the loss timer for the rest, and returns the bytes declared lost
// and the send time of the newest of them.
func (sub *subflow) detectLosses() (bytes int, newest int64) {
	if !sub.haveLargest {
		return 0, 0
	}
	s := sub.s()
	delay := sub.lossDelay()
	thr := int32(s.cfg.ReorderThreshold)
	sub.lossAt = 0
	advance := true
	for seq := sub.lowest; int32(seq-sub.largest) < 0; seq++ {
		p := &sub.ring[seq&(ringSize-1)]
		if p.seq != seq || p.state != pktOut {
			if advance {
				sub.lowest = seq + 1
			}
			continue
		}
		if int32(sub.largest-seq) >= thr || p.sent <= s.now-delay {
			sub.declareLost(p)
			bytes += int(p.size)
			newest = max(newest, p.sent)
			if advance {
				sub.lowest = seq + 1
			}
			continue
		}
		advance = false
		if t := p.sent + delay; sub.lossAt == 0 || t < sub.lossAt {
			sub.lossAt = t
		}
	}
	if advance && int32(sub.lowest-sub.largest) <= 0 {
		// Everything below the largest has a verdict; the largest itself is acked.
		sub.lowest = sub.largest + 1
		for int32(sub.lowest-sub.next) < 0 {
			q := &sub.ring[sub.lowest&(ringSize-1)]
			if q.seq == sub.lowest && q.state == pktOut {
				break
			}
			sub.lowest++
		}
	}
	if sub.lossAt != 0 && !sub.lossEvent {
		sub.lossEvent = true
		s.schedule(event{at: sub.lossAt, kind: evLossTimer, sub: sub})
	}
	return bytes, newest
}

func (sub *subflow) onLossTimer() {
	s := sub.s()
	sub.lossEvent = false
	if sub.lossAt == 0 {
		return
	}
	if s.now < sub.lossAt {
		sub.lossEvent = true
		s.schedule(event{at: sub.lossAt, kind: evLossTimer, sub: sub})
		return
	}
	bytes, newest := sub.detectLosses()
	if bytes > 0 && sub.ccp != nil {
		sub.ccp.OnLoss(cc.Loss{Now: s.Now(), Bytes: bytes, LargestSent: Epoch.Add(time.Duration(newest))})
	}
	sub.trySend()
}

func (sub *subflow) armRTO() {
	s := sub.s()
	sub.rtoAt = s.now + sub.rto()
	if !sub.rtoEvent {
		sub.rtoEvent = true
		s.schedule(event{at: sub.rtoAt, kind: evRTO, sub: sub})
	}
}

// onRTO declares everything outstanding lost when nothing was acked for an RTO.
func (sub *subflow) onRTO() {
	s := sub.s()
	sub.rtoEvent = false
	if sub.rtoAt == 0 {
		return
	}
	if s.now < sub.rtoAt {
		sub.rtoEvent = true
		s.schedule(event{at: sub.rtoAt, kind: evRTO, sub: sub})
		return
	}
	sub.rtoAt = 0
	if sub.inflight <= 0 {
		return
	}
	for seq := sub.lowest; int32(seq-sub.next) < 0; seq++ {
		if p := &sub.ring[seq&(ringSize-1)]; p.seq == seq && p.state == pktOut {
			sub.declareLost(p)
		}
	}
	sub.lowest = sub.next
	sub.lossAt = 0
	if sub.ccp != nil {
		sub.ccp.OnRTO(s.Now())
	}
	sub.backoff++
	sub.trySend()
	if sub.inflight > 0 {
		sub.armRTO()
	}
}

// event kinds
const (
	evArrive uint8 = iota
	evAck
	evLossTimer
	evRTO
	evFunc
	evSample
	evPace
)

type event struct {
	at  int64
	seq uint64
	sub *subflow
	fn  func()
	// evAck: when the packet reached the receiver, and the bytes received then.
	rx      int64
	rxBytes uint64
	pseq    uint32
	size    int32
	kind    uint8
	hop     uint8
}

// eventHeap is a binary min-heap on (at, seq): equal times run in scheduling
// order, which keeps runs deterministic.
type eventHeap struct{ a []event }

func (h *eventHeap) len() int     { return len(h.a) }
func (h *eventHeap) peek() *event { return &h.a[0] }

func (h *eventHeap) less(i, j int) bool {
	if h.a[i].at != h.a[j].at {
		return h.a[i].at < h.a[j].at
	}
	return h.a[i].seq < h.a[j].seq
}

func (h *eventHeap) push(e event) {
	h.a = append(h.a, e)
	i := len(h.a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.a[i], h.a[p] = h.a[p], h.a[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	top := h.a[0]
	n := len(h.a) - 1
	h.a[0] = h.a[n]
	h.a[n] = event{}
	h.a = h.a[:n]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && h.less(l, m) {
			m = l
		}
		if r < n && h.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h.a[i], h.a[m] = h.a[m], h.a[i]
		i = m
	}
	return top
}
