package path

import (
	"math/bits"
	"time"
)

// Ack is one ACK frame, as built by a Receiver and consumed by a Sender.
type Ack struct {
	Largest   uint32        // largest seq received
	Bitmap    uint64        // bit i set = seq Largest-1-i received (64 packets below Largest)
	AckDelay  time.Duration // time between receiving Largest and sending this ack (µs precision)
	RxPackets uint32        // cumulative packets received on this path (mod 2^32)
	RxBytes   uint64        // cumulative bytes received on this path
	OWDRaw    uint32        // owdRaw of packet Largest: rxUs - txUs mod 2^32
}

// Stats is a value snapshot of a Sender.
type Stats struct {
	State                                State
	SRTT, RTTVar, MinRTT, LatestRTT, RTO time.Duration
	LossRate                             float64       // smoothed fraction of ack-eliciting packets declared lost
	DeliveryRate                         float64       // bytes/s, max-filtered over RateWindow; 0 = unknown
	InFlight                             int           // bytes of ack-eliciting packets sent, not acked, not declared lost
	OWDRaw                               uint32        // smoothed owdRaw (raw, offset included)
	OWDMinRaw                            uint32        // windowed minimum owdRaw
	QueueDelay                           time.Duration // smoothed OWD minus min OWD
	OWDTrend                             float64       // s/s slope of OWD; > 0 = queue growing
	TxPackets, TxBytes                   uint64
	AckedPackets, AckedBytes             uint64
	LostPackets, LostBytes               uint64
	SpuriousLost                         uint64 // packets acked after being declared lost
	LastAck                              time.Time
}

type pktState uint8

const (
	slotEmpty       pktState = iota
	slotOutstanding          // ack-eliciting, no verdict yet
	slotSentNE               // not ack-eliciting: acked if covered, never declared lost
	slotAcked
	slotLost
)

type sentPkt struct {
	sent  int64 // ns since the Sender's epoch
	seq   uint32
	size  uint16
	state pktState
}

// never is a time far enough in the past that "now - never" exceeds every
// interval, without overflowing.
const never = -1 << 62

// Sender is the transmit-side state of one path. It is not safe for
// concurrent use; the engine serialises calls per path.
type Sender struct {
	cfg   Config
	epoch time.Time
	mask  uint32

	ring []sentPkt // indexed by seq & mask
	// q lists the seqs of ack-eliciting packets in send order. Entries that
	// got a verdict stay until they reach the head; everything between the
	// head and the largest acked seq is resolved within ReorderThreshold
	// packets, so walks over it stay short.
	q            []uint32
	qHead, qTail uint32

	next         uint32
	sentAny      bool
	largestAcked uint32
	haveLargest  bool

	haveRTT              bool
	srtt, rttvar, latest int64 // ns
	minRTT               winFilter
	baseRTT              int64  // smallest RTT sample since the path came up (ns)
	maxElic              uint16 // the largest ack-eliciting datagram sent (bytes)

	lossTime    int64
	lossTimeSet bool
	inflight    int

	txPackets, txBytes       uint64
	ackedPackets, ackedBytes uint64
	lostPackets, lostBytes   uint64
	spurious                 uint64
	takePkts, takeBytes      int
	takeNewest               int64 // send time of the newest packet counted in takePkts

	// loss rate: per-round counts folded into EWMAs of lost and total.
	roundStart            int64
	roundAcked, roundLost uint32
	// Degraded is judged on a window of recent packets (two buckets of
	// LossWindow/2), not on the smoothed loss rate: a path the scheduler stops
	// using after a burst of losses must not stay Degraded for want of new
	// evidence.
	lwStart                                int64
	lwSent, lwLost, lwPrevSent, lwPrevLost uint32
	lossS, totS                            float64

	// delivery rate
	rateValid      bool
	rateStart      int64  // receiver time (ns, own epoch + OWD offset) of the interval start
	rateBytes0     uint64 // receiver's cumulative RxBytes at rateStart
	rateOWDRef     uint32 // first OWDRaw seen, keeps receiver times small
	rateOWD0       int64  // one-way delay (ns, relative to rateOWDRef) at rateStart
	rateQ0         int64  // queueing delay (ns, one-way delay above its minimum) at rateStart
	rateAppLimited bool
	rateIdle       bool // the pipe ran empty during the interval (no queue excuses that)
	rateData       bool // a data-sized packet went out in the current interval
	rate           winFilter

	owd owdTracker

	state        State
	lastElicSent int64
	probeNow     bool
	standby      bool // SetStandby: idle probes every StandbyProbeInterval
	downSeq      uint32
	probeSamples int
	lastAck      time.Time
	// The oldest ack-eliciting packet no ack had overtaken, and how many such
	// packets there were (up to DownBusyPackets), as of the last OnTimer: what
	// SuspectSince judges, without a walk per call.
	unansSeq    uint32
	unansSent   int64
	unansSecond int64 // when the second of them left
	unansN      int

	obs Observer

	// the latest delivery-rate sample (for a rate-based congestion model)
	lastRate           float64
	lastRateAppLimited bool
	newRate            bool
}

// Observer hears the fate of each ack-eliciting packet, by sequence number: the
// engine's loss recovery keeps payloads until they are acknowledged or lost. The
// calls come from inside OnAck, OnTimer, OnSent and ForceDown; an observer must not
// call back into the Sender (queue the work and do it after the call returns).
type Observer interface {
	Acked(seq uint32)
	Lost(seq uint32)
}

// MarkAppLimited says something other than the path limited what it carried —
// the sender had nothing more to send while the path could have taken more, or
// its own window held it back: the delivery-rate interval in progress measures
// that, not the path (BBR's app-limited marking), unless the path shows a queue
// during it (see updateRate). Sending into an empty pipe marks it by itself.
func (s *Sender) MarkAppLimited() { s.rateAppLimited = true }

// AppLimited reports whether the delivery-rate interval in progress has been
// marked by MarkAppLimited.
func (s *Sender) AppLimited() bool { return s.rateAppLimited }

// SetObserver installs o (nil removes it).
func (s *Sender) SetObserver(o Observer) { s.obs = o }

// NewSender returns the state of a fresh path, in state Probing. now is the
// time base for every later call.
func NewSender(cfg Config, now time.Time) *Sender {
	cfg = cfg.withDefaults()
	s := &Sender{
		cfg:          cfg,
		epoch:        now,
		mask:         uint32(min(cfg.RingSize, minRing) - 1),
		ring:         make([]sentPkt, min(cfg.RingSize, minRing)),
		q:            make([]uint32, min(cfg.RingSize, minRing)),
		next:         1,
		srtt:         int64(cfg.InitialRTT),
		rttvar:       int64(cfg.InitialRTT) / 2,
		state:        Probing,
		lastElicSent: never,
		roundStart:   never,
	}
	s.minRTT.max = false
	s.rate.max = true
	return s
}

func (s *Sender) ns(t time.Time) int64 { return int64(t.Sub(s.epoch)) }

// NextSeq returns the seq to put in the next datagram on this path.
func (s *Sender) NextSeq() uint32 { return s.next }

// OnSent records a datagram sent with seq (which must be NextSeq()); size is
// the UDP payload size. Only ack-eliciting packets are tracked for loss,
// in-flight bytes and liveness; the others are still credited when an ack
// covers them.
func (s *Sender) OnSent(seq uint32, size int, ackEliciting bool, now time.Time) {
	if s.sentAny && int32(seq-s.next) < 0 {
		return // a seq already used: ignore rather than corrupt the ring
	}
	t := s.ns(now)
	if size < 0 {
		size = 0
	} else if size > 0xFFFF {
		size = 0xFFFF
	}
	for len(s.ring) < s.cfg.RingSize && s.tracked(&s.ring[seq&s.mask]) {
		s.resize(2 * len(s.ring))
	}
	slot := &s.ring[seq&s.mask]
	if slot.state == slotOutstanding {
		// Overwritten before any verdict: a ring's worth of packets
		// went out after it and none acked it.
		s.declareLost(slot, true)
	}
	*slot = sentPkt{sent: t, seq: seq, size: uint16(size), state: slotSentNE}
	s.txPackets++
	s.txBytes += uint64(size)
	if s.inflight == 0 {
		// Sending into an empty pipe (a probe, or an ack on an idle path): the
		// current rate interval includes idle time and can only under-estimate,
		// whatever queue other traffic keeps on the path.
		s.rateIdle = true
	}
	if ackEliciting {
		s.maxElic = max(s.maxElic, uint16(size))
		if size >= dataSize {
			s.rateData = true
		}
		slot.state = slotOutstanding
		s.inflight += size
		s.popResolved()
		if s.qTail-s.qHead >= uint32(len(s.q)) {
			// Only reachable when seqs were skipped: drop the oldest.
			old := &s.ring[s.q[s.qHead&s.mask]&s.mask]
			if old.seq == s.q[s.qHead&s.mask] && old.state == slotOutstanding {
				s.declareLost(old, true)
			}
			s.qHead++
		}
		s.q[s.qTail&s.mask] = seq
		s.qTail++
		s.lastElicSent = t
		s.probeNow = false
	}
	s.next = seq + 1
	s.sentAny = true
}

// minRing is the sent ring's size on a new or idle path. The ring doubles, up to
// RingSize, when a packet would take the slot of one still in flight or within
// an ack's reach, and Shrink gives the memory back: a server's idle clients then
// hold 1.25 KiB per path instead of RingSize's 160 KiB.
const minRing = 64

// tracked reports whether p is a packet the ring must still remember: in
// flight; or, within RingSize of the next seq (where a ring at RingSize still
// has it), not acknowledged — a packet that is not ack-eliciting is credited
// when an ack covers it, one declared lost is counted spurious if acked. Only
// acknowledged packets, which nothing looks up again, give their slots away
// early, so a small ring behaves as the full one; a path with few packets in
// flight and its acks arriving keeps it small.
func (s *Sender) tracked(p *sentPkt) bool {
	switch p.state {
	case slotOutstanding:
		return true
	case slotSentNE, slotLost:
		return int32(s.next-p.seq) < int32(s.cfg.RingSize)
	}
	return false
}

// resize moves the ring and the send-order queue to n slots (a power of two,
// at least the queue's length), each packet at its seq's slot in the new ring.
func (s *Sender) resize(n int) {
	ring, q, mask := make([]sentPkt, n), make([]uint32, n), uint32(n-1)
	for _, p := range s.ring {
		if p.state != slotEmpty && (n >= len(s.ring) || int32(s.next-p.seq) <= int32(n)) {
			ring[p.seq&mask] = p
		}
	}
	for i := s.qHead; i != s.qTail; i++ {
		q[i&mask] = s.q[i&s.mask]
	}
	s.ring, s.q, s.mask = ring, q, mask
}

// Shrink gives back the ring's memory beyond minRing when nothing is in
// flight (an idle path); the engine calls it from its timer. It reports
// whether the ring is at its smallest.
func (s *Sender) Shrink() bool {
	if len(s.ring) <= minRing {
		return true
	}
	s.popResolved()
	if s.inflight > 0 || s.qHead != s.qTail {
		return false
	}
	s.resize(minRing)
	return true
}

// FullSize reports whether a datagram of size bytes is full-size on this path:
// at least 3/4 of the largest ack-eliciting one sent. Its RTT includes what a
// data packet's does and a probe's or a pure ack's does not: its transmission
// at every hop, 1.2 ms per hop at 10 Mbit/s, 12 ms at 1 Mbit/s. A window sized
// on the probes' min RTT is short of the pipe by that much per round trip (a
// four-hop mesh path: 15.7 ms for probes, 19.7 ms for data).
func (s *Sender) FullSize(size int) bool { return size > 0 && 4*size >= 3*int(s.maxElic) }

// TxBytes returns the bytes sent on the path so far.
func (s *Sender) TxBytes() uint64 { return s.txBytes }

// SizeOf returns the size of the datagram sent as seq while it is still tracked
// (0 otherwise); an Observer may ask it from its callbacks.
func (s *Sender) SizeOf(seq uint32) int {
	p := &s.ring[seq&s.mask]
	if p.seq != seq {
		return 0
	}
	return int(p.size)
}

func (s *Sender) declareLost(p *sentPkt, feedRate bool) {
	p.state = slotLost
	if s.obs != nil {
		s.obs.Lost(p.seq)
	}
	s.inflight -= int(p.size)
	s.lostPackets++
	s.lostBytes += uint64(p.size)
	if s.takePkts == 0 || p.sent > s.takeNewest {
		s.takeNewest = p.sent
	}
	s.takePkts++
	s.takeBytes += int(p.size)
	if feedRate {
		s.roundLost++
		s.lwLost++
	}
}

// lossWindow ages the degraded-decision window and returns its totals.
func (s *Sender) lossWindow(t int64) (sent, lost uint32) {
	half := int64(s.cfg.LossWindow / 2)
	if d := t - s.lwStart; d >= half {
		if d >= 2*half {
			s.lwPrevSent, s.lwPrevLost = 0, 0
		} else {
			s.lwPrevSent, s.lwPrevLost = s.lwSent, s.lwLost
		}
		s.lwSent, s.lwLost, s.lwStart = 0, 0, t
	}
	lost = s.lwLost + s.lwPrevLost
	return s.lwSent + s.lwPrevSent + lost, lost
}

func (s *Sender) outstanding(seq uint32) *sentPkt {
	p := &s.ring[seq&s.mask]
	if p.seq != seq || p.state != slotOutstanding {
		return nil
	}
	return p
}

func (s *Sender) popResolved() {
	for s.qHead != s.qTail && s.outstanding(s.q[s.qHead&s.mask]) == nil {
		s.qHead++
	}
}

// ackResult accumulates what one Ack newly acknowledged.
type ackResult struct {
	pkts, elic int
	bytes      uint64
	elicBytes  int
	newestSent int64 // send time of the newest newly acked ack-eliciting packet
	revive     bool  // acked a packet sent after the path went Down
}

// AckResult is what one Ack newly acknowledged, for a congestion controller.
type AckResult struct {
	// Bytes and Packets count the newly acknowledged ack-eliciting packets (the
	// ones that were in flight).
	Bytes, Packets int
	// RTT is the RTT sample this ack produced (0 = none); FullSize says it is
	// a full-size datagram's (see FullSize).
	RTT      time.Duration
	FullSize bool
	// NewestSent is when the most recently sent of those packets left (zero
	// when none was newly acknowledged).
	NewestSent time.Time
	// RateSample is the delivery-rate sample (bytes/s) this ack completed, 0
	// when none (or when its interval carried no data, only probes and acks);
	// RateAppLimited says the interval it spans was app-limited.
	RateSample     float64
	RateAppLimited bool
	// MinRTT is the path's windowed minimum RTT after this ack (0 = unknown).
	MinRTT time.Duration
}

func (s *Sender) ackOne(seq uint32, r *ackResult) bool {
	p := &s.ring[seq&s.mask]
	if p.seq != seq {
		return false
	}
	switch p.state {
	case slotOutstanding:
		s.inflight -= int(p.size)
		if s.obs != nil {
			s.obs.Acked(seq)
		}
		r.elic++
		r.elicBytes += int(p.size)
		if r.elic == 1 || p.sent > r.newestSent {
			r.newestSent = p.sent
		}
	case slotSentNE:
	case slotLost:
		s.spurious++
		return false
	default:
		return false
	}
	p.state = slotAcked
	r.pkts++
	r.bytes += uint64(p.size)
	if s.state == Down && int32(seq-s.downSeq) >= 0 {
		r.revive = true
	}
	return true
}

// OnAck processes an ACK frame received for this path: RTT sample, acked
// bytes, loss detection, delivery rate, one-way delay and state changes. It
// returns what the ack newly acknowledged; the losses it detected are left for
// TakeLoss.
func (s *Sender) OnAck(a Ack, now time.Time) (res AckResult) {
	if !s.sentAny || int32(a.Largest-(s.next-1)) > 0 {
		return res // acks something never sent: not for us
	}
	t := s.ns(now)
	s.lastAck = now

	var r ackResult
	largestNew := s.ackOne(a.Largest, &r)
	sentL := s.ring[a.Largest&s.mask].sent
	for bm := a.Bitmap; bm != 0; bm &= bm - 1 {
		s.ackOne(a.Largest-1-uint32(bits.TrailingZeros64(bm)), &r)
	}
	if r.pkts == 0 {
		return res
	}
	res.Bytes, res.Packets = r.elicBytes, r.elic
	if r.elic > 0 {
		res.NewestSent = s.epoch.Add(time.Duration(r.newestSent))
	}
	s.ackedPackets += uint64(r.pkts)
	s.ackedBytes += r.bytes
	s.roundAcked += uint32(r.elic)
	s.lwSent += uint32(r.elic)
	newLargest := !s.haveLargest || int32(a.Largest-s.largestAcked) > 0
	if newLargest {
		s.largestAcked = a.Largest
		s.haveLargest = true
	}

	revived := false
	if s.state == Down {
		if !r.revive {
			s.detectLosses(t)
			return res
		}
		s.revive()
		revived = true
	}

	sampled := false
	if largestNew && r.elic > 0 {
		sampled = s.rttSample(t, t-sentL, a.AckDelay)
		if sampled {
			res.RTT = time.Duration(s.latest)
			res.FullSize = s.FullSize(int(s.ring[a.Largest&s.mask].size))
		}
	}
	s.detectLosses(t)
	if revived {
		// Whatever was declared lost now went out before or during the
		// outage; it says nothing about the path that came back.
		s.roundAcked, s.roundLost, s.roundStart = 0, 0, t
	}
	if newLargest {
		sp := s.srtt / 8
		if sp < int64(Granularity) {
			sp = int64(Granularity)
		}
		s.owd.add(t, a.OWDRaw, int64(s.cfg.OWDWindow), sp)
	}
	if largestNew {
		s.updateRate(sentL, a)
		if s.newRate {
			res.RateSample, res.RateAppLimited, s.newRate = s.lastRate, s.lastRateAppLimited, false
		}
	}
	if s.haveRTT {
		res.MinRTT = time.Duration(s.minRTT.get())
	}
	s.updateLossRound(t)
	s.updateState(t, sampled)
	return res
}

// rttSample applies RFC 9002 §5.3 (ack delay subtracted only when the result
// stays at or above min RTT) and RFC 6298 smoothing.
func (s *Sender) rttSample(t, latest int64, ackDelay time.Duration) bool {
	if latest < 0 {
		return false
	}
	s.latest = latest
	if !s.haveRTT || latest < s.baseRTT {
		s.baseRTT = latest
	}
	if !s.haveRTT {
		s.haveRTT = true
		s.minRTT.reset(t, float64(latest))
		s.srtt = latest
		s.rttvar = latest / 2
		return true
	}
	s.minRTT.update(t, float64(latest), int64(s.cfg.MinRTTWindow))
	adj := latest
	ad := int64(ackDelay)
	// Written as a difference: minRTT + ad overflows for a huge ack delay.
	if ad > 0 && adj-ad >= int64(s.minRTT.get()) {
		adj -= ad
	}
	d := s.srtt - adj
	if d < 0 {
		d = -d
	}
	s.rttvar = (3*s.rttvar + d) / 4
	s.srtt = (7*s.srtt + adj) / 8
	return true
}

func (s *Sender) lossDelay() int64 {
	m := s.srtt
	if s.latest > m {
		m = s.latest
	}
	d := int64(float64(m) * s.cfg.TimeThreshold)
	if d < int64(Granularity) {
		d = int64(Granularity)
	}
	return d
}

// detectLosses declares lost the outstanding packets below the largest acked
// one that are ReorderThreshold seqs below it or older than the loss delay,
// and arms the loss timer for the rest (RFC 9002 §6.1).
func (s *Sender) detectLosses(t int64) {
	s.lossTimeSet = false
	if !s.haveLargest {
		return
	}
	delay := s.lossDelay()
	thr := int32(s.cfg.ReorderThreshold)
	for i := s.qHead; i != s.qTail; i++ {
		seq := s.q[i&s.mask]
		if int32(seq-s.largestAcked) >= 0 {
			break
		}
		p := s.outstanding(seq)
		if p == nil {
			continue
		}
		if int32(s.largestAcked-seq) >= thr || p.sent <= t-delay {
			s.declareLost(p, true)
			continue
		}
		if lt := p.sent + delay; !s.lossTimeSet || lt < s.lossTime {
			s.lossTime, s.lossTimeSet = lt, true
		}
	}
	s.popResolved()
}

// dataSize is the size from which a datagram counts as data rather than a probe or
// an ack (both well under 100 bytes) for delivery-rate sampling.
const dataSize = 256

// queueSlack is the least one-way delay above the path's minimum that counts as
// a standing queue for delivery-rate sampling (jitter and timer ticks stay below).
const queueSlack = 2 * time.Millisecond

func (s *Sender) updateRate(sentL int64, a Ack) {
	// The receiver's clock times the interval: the arrival time of Largest there is
	// its send time here plus its one-way delay (up to the session's constant clock
	// offset, which cancels in differences). Timing at the receiver keeps ack
	// compression on the way back — acks arriving in a bunch — out of the estimate;
	// timed at ack arrival, a 10 Mbit/s link measured 15–19 Mbit/s at times.
	if !s.rateValid {
		s.rateOWDRef = a.OWDRaw
	}
	owd := int64(int32(a.OWDRaw-s.rateOWDRef)) * int64(time.Microsecond)
	rx := sentL + owd
	// Queueing delay of Largest: its one-way delay above the path's minimum
	// (OnAck has just fed this ack's OWD to the tracker).
	qd := int64(0)
	if s.owd.have {
		qd = (s.owd.u - int64(s.owd.min.get())) * int64(time.Microsecond)
	}
	if !s.rateValid {
		s.rateValid = true
		s.rateStart, s.rateOWD0, s.rateQ0 = rx, owd, qd
		s.rateBytes0 = a.RxBytes
		s.rateAppLimited, s.rateIdle = false, false
		return
	}
	iv := max(s.srtt/2, int64(s.cfg.MinRateInterval))
	el := rx - s.rateStart
	if el < iv {
		return
	}
	v := float64(a.RxBytes-s.rateBytes0) * 1e9 / float64(el)
	// An interval that saw the pipe run dry, or carried no data at all (probes
	// and acks only), measures the application, not the path: it may raise an
	// estimate but never lower it, and never make the first one — an idle path's
	// probes would "measure" a few hundred bytes per second, and a scheduler
	// believing that would never send there again.
	// The sender had room all along, but the path may still have been the
	// limit: if a queue stood at its bottleneck at both ends of the interval
	// (one-way delay above the minimum by more than queueSlack), or one built
	// up during it (the delay grew by more than an eighth of the interval),
	// the path took the bytes slower than they came, and the sample measures
	// the path, not the application (but an interval in which the pipe ran
	// empty stays app-limited). Without this a sender whose own window
	// never fills — inner traffic arriving faster than the path drains it —
	// would call every interval app-limited while the bottleneck's buffer
	// filled.
	slack := max(s.minRTT.get()/8, float64(queueSlack))
	queued := float64(min(s.rateQ0, qd)) > slack || (owd-s.rateOWD0)*8 > el
	limited := s.rateIdle || s.rateAppLimited && !queued
	appLimited := limited || !s.rateData
	// A rate model only hears intervals that carried data: probes and acks alone
	// say nothing about what the path carries.
	s.lastRate, s.lastRateAppLimited, s.newRate = v, limited, s.rateData
	if !appLimited || (s.rate.set && v > s.rate.get()) {
		s.rate.update(rx, v, int64(s.cfg.RateWindow))
	}
	s.rateStart, s.rateOWD0, s.rateQ0 = rx, owd, qd
	s.rateBytes0 = a.RxBytes
	s.rateAppLimited, s.rateIdle = false, false
	s.rateData = false
}

func (s *Sender) updateLossRound(t int64) {
	if s.roundStart == never {
		s.roundStart = t
	}
	iv := s.srtt
	if iv < int64(Granularity) {
		iv = int64(Granularity)
	}
	if t-s.roundStart < iv {
		return
	}
	if n := s.roundAcked + s.roundLost; n > 0 {
		g := s.cfg.LossGain
		s.lossS = (1-g)*s.lossS + g*float64(s.roundLost)
		s.totS = (1-g)*s.totS + g*float64(n)
	}
	s.roundAcked, s.roundLost, s.roundStart = 0, 0, t
}

func (s *Sender) lossRate() float64 {
	if s.totS <= 0 {
		return 0
	}
	return s.lossS / s.totS
}

func (s *Sender) updateState(t int64, sampled bool) {
	switch s.state {
	case Probing:
		if sampled {
			s.probeSamples++
		}
		if s.probeSamples >= s.cfg.ActivateAcks {
			s.state = Active
		}
	case Active:
		// MinLossSample packets of evidence at least: one early loss on a quiet
		// path must not read as 100 %.
		sent, lost := s.lossWindow(t)
		if int(sent) >= s.cfg.MinLossSample && float64(lost) > s.cfg.DegradedLoss*float64(sent) {
			s.state = Degraded
		}
	case Degraded:
		// Back to Active when the recent window shows little loss, or too little
		// traffic to tell: the scheduler then tries the path again, and real,
		// lasting loss makes it Degraded again within a window.
		sent, lost := s.lossWindow(t)
		if int(sent) < s.cfg.MinLossSample || float64(lost) < s.cfg.DegradedExitLoss*float64(sent) {
			s.state = Active
		}
	}
}

// revive moves a Down path to Probing and restarts its estimators: a path
// that comes back may well be a different route.
func (s *Sender) revive() {
	s.state = Probing
	s.probeSamples = 0
	s.haveRTT = false
	s.minRTT.clear()
	s.lossS, s.totS = 0, 0
	s.rate.clear()
	s.rateValid = false
	s.owd.reset()
}

// ResetEstimates forgets what the path has measured — RTT (back to the
// configured initial value), minimum and base RTT, loss rate, delivery rate,
// one-way delay — and keeps its sequence numbers, the packets in flight and
// its liveness state. For a path whose far end moved to another address
// (RFC 9000 §9.4): the route is new, so the old route's numbers describe
// nothing, but the packets already sent keep their numbers and are acked or
// declared lost as usual.
func (s *Sender) ResetEstimates() {
	s.haveRTT = false
	s.srtt = int64(s.cfg.InitialRTT)
	s.rttvar = int64(s.cfg.InitialRTT) / 2
	s.latest = 0
	s.baseRTT = 0
	s.minRTT.clear()
	s.lossS, s.totS = 0, 0
	s.rate.clear()
	s.rateValid = false
	s.owd.reset()
}

// PTO is how long an ack for a packet may take on a healthy path: the smoothed
// RTT, four times its variation and the peer's ack delay (RFC 9002's probe
// timeout).
func (s *Sender) PTO() time.Duration { return time.Duration(s.pto()) }

// pto is how long an ack for a packet may take on a healthy path.
func (s *Sender) pto() int64 {
	v := 4 * s.rttvar
	if v < int64(Granularity) {
		v = int64(Granularity)
	}
	return s.srtt + v + int64(s.cfg.AckDelay)
}

func (s *Sender) busyThreshold() int64 {
	v := int64(s.cfg.DownBusyRTTs*float64(s.srtt)) + 4*s.rttvar
	if v < int64(s.cfg.DownBusyMin) {
		v = int64(s.cfg.DownBusyMin)
	}
	if v > int64(s.cfg.DownBusyMax) {
		v = int64(s.cfg.DownBusyMax)
	}
	return v
}

// checkLiveness applies the Down rules to the ack-eliciting packets that no
// ack has overtaken yet (seq above the largest acked): a lost packet
// followed by acked ones is loss, not an outage.
// checkLiveness takes the path down when it stops answering, and returns the send
// time of the oldest unanswered ack-eliciting packet (ok=false when there is none).
func (s *Sender) checkLiveness(t int64) (oldest int64, unanswered int) {
	s.popResolved()
	n := s.cfg.DownBusyPackets
	var first, nth int64
	var firstSeq uint32
	count := 0
	for i := s.qHead; i != s.qTail; i++ {
		seq := s.q[i&s.mask]
		if s.haveLargest && int32(seq-s.largestAcked) <= 0 {
			continue
		}
		p := s.outstanding(seq)
		if p == nil {
			continue
		}
		count++
		if count == 1 {
			first, firstSeq = p.sent, seq
		}
		if count == 2 {
			s.unansSecond = p.sent
		}
		if count == n {
			nth = p.sent
			break
		}
	}
	s.unansN = count
	if count == 0 {
		return 0, 0
	}
	s.unansSeq, s.unansSent = firstSeq, first
	down := t-first >= int64(s.cfg.DownIdle)
	if !down && count >= n {
		thr := s.busyThreshold()
		down = nth-first <= thr && t-first >= thr && t-nth >= s.pto()
	}
	if down {
		s.goDown()
		return 0, 0
	}
	return first, count
}

// ForceDown takes the path out of service as if it had stopped answering, and has
// it probed at once: the engine calls it for paths that share an access link with
// a path that just went Down, since they most likely share its fate. A path that
// is in fact alive answers the probe and is usable again one round trip later.
func (s *Sender) ForceDown() {
	if s.state != Down {
		s.goDown()
	}
}

func (s *Sender) goDown() {
	s.state = Down
	s.unansN = 0
	s.downSeq = s.next
	for i := s.qHead; i != s.qTail; i++ {
		if p := s.outstanding(s.q[i&s.mask]); p != nil {
			s.declareLost(p, false)
		}
	}
	s.qHead = s.qTail
	s.lossTimeSet = false
	s.rateValid = false
	s.probeSamples = 0
	s.probeNow = true
}

// OnTimer runs time-threshold loss detection and liveness. It returns true
// when a PING should be sent on this path now: right after the path went
// Down, and whenever no ack-eliciting packet was sent for ProbeInterval
// (idle paths and Down paths alike). It keeps returning true until OnSent
// records an ack-eliciting packet.
func (s *Sender) OnTimer(now time.Time) (needProbe bool) {
	t := s.ns(now)
	if s.lossTimeSet && t >= s.lossTime {
		s.detectLosses(t)
	}
	if s.state == Degraded {
		s.updateState(t, false)
	}
	if s.state != Down {
		// A probe timeout (as QUIC's PTO): packets have gone unanswered for longer
		// than an ack should take and nothing has been sent since. The scheduler
		// may have stopped using the path (its delay estimate grew), so without a
		// probe it would go quiet and only the idle timer would notice the outage.
		// Only for two or more unanswered packets: an idle path's single lost
		// probe is the idle timer's business, not evidence of an outage.
		oldest, n := s.checkLiveness(t)
		if n >= 2 && (s.state == Active || s.state == Degraded) && t-oldest >= s.pto() && t-s.lastElicSent >= s.pto() {
			return true
		}
	}
	iv := s.cfg.ProbeInterval
	if s.standby && s.state != Down {
		iv = s.cfg.StandbyProbeInterval
	}
	return s.probeNow || t-s.lastElicSent >= int64(iv)
}

// SetStandby says whether the engine keeps this working path out of use (a
// backup tier while a lower one works): its idle probes then go out every
// StandbyProbeInterval instead of ProbeInterval. A Down path probes at
// ProbeInterval regardless, to notice its return.
func (s *Sender) SetStandby(on bool) { s.standby = on }

// SuspectSince reports whether the path is suspect, and since when: the two
// oldest ack-eliciting packets that no ack has overtaken have both gone
// unanswered for longer than an ack takes on it (srtt+4·rttvar+AckDelay, the
// probe timeout), as of the last OnTimer and the acks since. since is when the
// oldest of them left. Two, so that one lost packet (an idle path's probe, say)
// followed by a fresh one is not taken for an outage.
//
// Suspect comes long before Down (DownBusyMin, 200ms, at the least): it is SCTP's
// "potentially failed" state (RFC 7829). A path that stopped delivering keeps
// taking new packets until it is Down, and a receiver's TCP acks or a sender's
// retransmissions that land there are lost with it; a scheduler that skips a
// suspect path while another one answers loses only what was already in flight.
// Nothing is declared lost and no estimator changes: the first ack of a later
// packet clears it.
func (s *Sender) SuspectSince(now time.Time) (since time.Time, ok bool) {
	if s.unansN < 2 || s.state == Down || s.haveLargest && int32(s.unansSeq-s.largestAcked) <= 0 {
		return time.Time{}, false
	}
	if s.ns(now)-s.unansSecond < s.pto() {
		return time.Time{}, false
	}
	return s.epoch.Add(time.Duration(s.unansSent)), true
}

// LastAck returns when the latest ACK frame for this path arrived (zero before
// the first), the same as Stats().LastAck without the snapshot.
func (s *Sender) LastAck() time.Time { return s.lastAck }

// State returns the liveness state.
func (s *Sender) State() State { return s.state }

// Usable reports whether the scheduler may send data on this path: Active,
// Degraded, or Probing with an RTT sample from the current episode.
func (s *Sender) Usable() bool {
	switch s.state {
	case Active, Degraded:
		return true
	case Probing:
		return s.probeSamples > 0
	}
	return false
}

// TakeLost returns the packets and bytes declared lost since the last call
// (for a congestion controller).
func (s *Sender) TakeLost() (packets, bytes int) {
	packets, bytes, _ = s.TakeLoss()
	return
}

// TakeLoss is TakeLost plus the send time of the most recently sent of those
// packets: a congestion controller treats losses of packets sent before its
// last reduction as part of the same congestion event.
func (s *Sender) TakeLoss() (packets, bytes int, newestSent time.Time) {
	packets, bytes = s.takePkts, s.takeBytes
	if packets > 0 {
		newestSent = s.epoch.Add(time.Duration(s.takeNewest))
	}
	s.takePkts, s.takeBytes = 0, 0
	return
}

// InFlight returns the bytes of ack-eliciting packets sent, not acked and not
// declared lost (the same as Stats().InFlight, without the snapshot).
func (s *Sender) InFlight() int { return s.inflight }

// BaseRTT returns the smallest RTT sample since the path came up (or came back
// from Down), 0 before the first: unlike MinRTT it does not forget, so a queue
// that other traffic keeps standing for longer than the window does not show
// in it.
func (s *Sender) BaseRTT() time.Duration {
	if !s.haveRTT {
		return 0
	}
	return time.Duration(s.baseRTT)
}

// Overdue appends to dst, oldest first, the packet numbers from from on of
// the ack-eliciting packets still in flight that were sent at or before
// before, at most max of them, and returns dst. Packets leave in the order
// they were sent, so the walk stops at the first one sent later.
func (s *Sender) Overdue(dst []uint32, from uint32, before time.Time, max int) []uint32 {
	s.popResolved()
	t := s.ns(before)
	for i := s.qHead; i != s.qTail && len(dst) < max; i++ {
		p := s.outstanding(s.q[i&s.mask])
		if p == nil || int32(p.seq-from) < 0 {
			continue
		}
		if p.sent > t {
			break
		}
		dst = append(dst, p.seq)
	}
	return dst
}

// MinRTT returns the windowed minimum RTT (0 before the first sample).
func (s *Sender) MinRTT() time.Duration {
	if !s.haveRTT {
		return 0
	}
	return time.Duration(s.minRTT.get())
}

// SRTT returns the smoothed RTT (Config.InitialRTT before the first sample), the
// same as Stats().SRTT without the snapshot.
func (s *Sender) SRTT() time.Duration { return time.Duration(s.srtt) }

// RTO returns the RFC 6298 retransmission timeout.
func (s *Sender) RTO() time.Duration {
	v := 4 * s.rttvar
	if v < int64(Granularity) {
		v = int64(Granularity)
	}
	r := time.Duration(s.srtt + v)
	if r < s.cfg.MinRTO {
		r = s.cfg.MinRTO
	}
	if r > s.cfg.MaxRTO {
		r = s.cfg.MaxRTO
	}
	return r
}

// Stats returns a snapshot.
func (s *Sender) Stats() Stats {
	st := Stats{
		State:        s.state,
		SRTT:         time.Duration(s.srtt),
		RTTVar:       time.Duration(s.rttvar),
		LatestRTT:    time.Duration(s.latest),
		RTO:          s.RTO(),
		LossRate:     s.lossRate(),
		DeliveryRate: s.rate.get(),
		InFlight:     s.inflight,
		QueueDelay:   time.Duration(s.owd.queueDelayUs()) * time.Microsecond,
		OWDTrend:     s.owd.slope,
		TxPackets:    s.txPackets,
		TxBytes:      s.txBytes,
		AckedPackets: s.ackedPackets,
		AckedBytes:   s.ackedBytes,
		LostPackets:  s.lostPackets,
		LostBytes:    s.lostBytes,
		SpuriousLost: s.spurious,
		LastAck:      s.lastAck,
	}
	if s.haveRTT {
		st.MinRTT = time.Duration(s.minRTT.get())
	}
	if s.owd.have {
		st.OWDRaw = uint32(s.owd.smooth)
		st.OWDMinRaw = uint32(int64(s.owd.min.get()))
	}
	return st
}
