package path

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	if c != DefaultConfig() {
		t.Fatalf("zero Config does not take the defaults:\n%+v\n%+v", c, DefaultConfig())
	}
	c = Config{RingSize: 5000, DownBusyMin: time.Second, DownBusyMax: time.Millisecond}.withDefaults()
	if c.RingSize != 8192 {
		t.Errorf("RingSize 5000 rounded to %d, want 8192", c.RingSize)
	}
	if c.DownBusyMax != time.Second {
		t.Errorf("DownBusyMax below DownBusyMin not raised: %v", c.DownBusyMax)
	}
	for st, want := range map[State]string{Probing: "probing", Active: "active", Degraded: "degraded", Down: "down"} {
		if st.String() != want {
			t.Errorf("State(%d).String() = %q, want %q", st, st.String(), want)
		}
	}
}

// RFC 6298 by hand, in ms:
//
//	R=100: srtt=100, rttvar=50, RTO=100+4*50=300
//	R=120: rttvar=(3*50+|100-120|)/4=42.5, srtt=(7*100+120)/8=102.5, RTO=102.5+170=272.5
//	R=60:  rttvar=(3*42.5+|102.5-60|)/4=42.5, srtt=(7*102.5+60)/8=97.1875, RTO=267.1875
func TestRFC6298Sequence(t *testing.T) {
	s := NewSender(Config{}, base)
	st := s.Stats()
	eqDur(t, "initial SRTT", st.SRTT, 100*time.Millisecond)
	eqDur(t, "initial RTTVar", st.RTTVar, 50*time.Millisecond)
	eqDur(t, "initial MinRTT", st.MinRTT, 0)

	sendAck(s, 100, 0, 100, 0)
	st = s.Stats()
	eqDur(t, "SRTT#1", st.SRTT, dms(100))
	eqDur(t, "RTTVar#1", st.RTTVar, dms(50))
	eqDur(t, "RTO#1", st.RTO, dms(300))
	eqDur(t, "MinRTT#1", st.MinRTT, dms(100))
	eqDur(t, "LatestRTT#1", st.LatestRTT, dms(100))

	sendAck(s, 100, 200, 320, 0)
	st = s.Stats()
	eqDur(t, "SRTT#2", st.SRTT, dms(102.5))
	eqDur(t, "RTTVar#2", st.RTTVar, dms(42.5))
	eqDur(t, "RTO#2", st.RTO, dms(272.5))
	eqDur(t, "MinRTT#2", st.MinRTT, dms(100))

	sendAck(s, 100, 400, 460, 0)
	st = s.Stats()
	eqDur(t, "SRTT#3", st.SRTT, dms(97.1875))
	eqDur(t, "RTTVar#3", st.RTTVar, dms(42.5))
	eqDur(t, "RTO#3", st.RTO, dms(267.1875))
	eqDur(t, "MinRTT#3", st.MinRTT, dms(60))
	eqDur(t, "LatestRTT#3", st.LatestRTT, dms(60))
}

// R=10 ms: srtt 10, rttvar 5, RTO 30 ms → clamped up to MinRTO.
func TestRTOClamp(t *testing.T) {
	s := NewSender(Config{}, base)
	sendAck(s, 100, 0, 10, 0)
	eqDur(t, "RTO", s.Stats().RTO, 200*time.Millisecond)
	s = NewSender(Config{MaxRTO: 250 * time.Millisecond}, base)
	sendAck(s, 100, 0, 1000, 0) // 1000 + 4*500 → 3000 ms → clamped
	eqDur(t, "RTO", s.Stats().RTO, 250*time.Millisecond)
}

// RFC 9002 §5.3 by hand, in ms, min_rtt = 60 from the first sample:
//
//	latest 90, ack delay 20: 90 ≥ 60+20 → adjusted 70;
//	  rttvar = (3*30+|60-70|)/4 = 25, srtt = (7*60+70)/8 = 61.25
//	latest 70, ack delay 20: 70 < 80 → not subtracted, adjusted 70;
//	  rttvar = (3*25+|61.25-70|)/4 = 20.9375, srtt = (7*61.25+70)/8 = 62.34375
func TestAckDelaySubtraction(t *testing.T) {
	s := NewSender(Config{}, base)
	sendAck(s, 100, 0, 60, 5*time.Millisecond) // first sample: delay ignored
	st := s.Stats()
	eqDur(t, "SRTT#1", st.SRTT, dms(60))
	eqDur(t, "RTTVar#1", st.RTTVar, dms(30))

	sendAck(s, 100, 100, 190, 20*time.Millisecond)
	st = s.Stats()
	eqDur(t, "LatestRTT#2", st.LatestRTT, dms(90))
	eqDur(t, "SRTT#2", st.SRTT, dms(61.25))
	eqDur(t, "RTTVar#2", st.RTTVar, dms(25))
	eqDur(t, "MinRTT#2", st.MinRTT, dms(60))

	sendAck(s, 100, 200, 270, 20*time.Millisecond)
	st = s.Stats()
	eqDur(t, "SRTT#3", st.SRTT, dms(62.34375))
	eqDur(t, "RTTVar#3", st.RTTVar, dms(20.9375))
}

// Only an ack whose largest seq is newly acked gives an RTT sample.
func TestRTTSampleOnlyFromNewLargest(t *testing.T) {
	s := NewSender(Config{}, base)
	s.OnSent(1, 100, true, ms(0))
	s.OnSent(2, 100, true, ms(10))
	s.OnAck(Ack{Largest: 2, Bitmap: 1}, ms(60)) // RTT of seq 2 = 50
	eqDur(t, "SRTT", s.Stats().SRTT, dms(50))
	s.OnAck(Ack{Largest: 2, Bitmap: 1}, ms(500)) // duplicate ack: no sample
	eqDur(t, "SRTT after dup ack", s.Stats().SRTT, dms(50))
	eqDur(t, "LatestRTT after dup ack", s.Stats().LatestRTT, dms(50))
	// A packet that is not ack-eliciting alone gives no sample either.
	s.OnSent(3, 60, false, ms(600))
	s.OnAck(Ack{Largest: 3}, ms(900))
	eqDur(t, "SRTT after non-eliciting", s.Stats().SRTT, dms(50))
	if st := s.Stats(); st.AckedPackets != 3 || st.AckedBytes != 260 {
		t.Errorf("acked %d pkts %d bytes, want 3, 260", st.AckedPackets, st.AckedBytes)
	}
}

// An RTT sample is full-size when its packet is at least 3/4 of the largest
// ack-eliciting one sent: a 40-byte probe's is not, a 1200-byte and a
// 900-byte data packet's are, an 899-byte one's is not.
func TestFullSizeSample(t *testing.T) {
	s := NewSender(Config{}, base)
	for i, c := range []struct {
		size int
		full bool
	}{{1200, true}, {40, false}, {900, true}, {899, false}} {
		seq := uint32(i + 1)
		s.OnSent(seq, c.size, true, ms(float64(100*i)))
		r := s.OnAck(Ack{Largest: seq}, ms(float64(100*i+20)))
		if r.RTT != dms(20) || r.FullSize != c.full {
			t.Errorf("%d bytes: RTT %v, full-size %v; want 20ms, %v", c.size, r.RTT, r.FullSize, c.full)
		}
	}
}

// Seqs 1..5 sent at 0..4 ms, 100 bytes each. Ack at 104 ms: largest 5,
// bitmap acks 4 (bit 0) and 1 (bit 3). RTT 100 → loss delay 9/8*100 = 112.5.
//
//	seq 2: 5-2 = 3 ≥ ReorderThreshold → lost at once
//	seq 3: 5-3 = 2, sent at 2 ms, lost when now ≥ 2+112.5 = 114.5 ms
func TestLossPacketAndTimeThreshold(t *testing.T) {
	s := NewSender(Config{}, base)
	for i := 0; i < 5; i++ {
		s.OnSent(s.NextSeq(), 100, true, ms(float64(i)))
	}
	if st := s.Stats(); st.InFlight != 500 || st.TxPackets != 5 || st.TxBytes != 500 {
		t.Fatalf("after send: %+v", st)
	}
	s.OnAck(Ack{Largest: 5, Bitmap: 1<<0 | 1<<3}, ms(104))
	st := s.Stats()
	if st.LostPackets != 1 || st.LostBytes != 100 {
		t.Errorf("packet threshold: lost %d/%d B, want 1/100", st.LostPackets, st.LostBytes)
	}
	if st.InFlight != 100 {
		t.Errorf("InFlight = %d, want 100 (seq 3)", st.InFlight)
	}
	if p, b := s.TakeLost(); p != 1 || b != 100 {
		t.Errorf("TakeLost = %d,%d want 1,100", p, b)
	}
	if p, b := s.TakeLost(); p != 0 || b != 0 {
		t.Errorf("second TakeLost = %d,%d want 0,0", p, b)
	}
	s.OnTimer(ms(114.4))
	if st := s.Stats(); st.LostPackets != 1 || st.InFlight != 100 {
		t.Errorf("at 114.4 ms seq 3 already lost: %+v", st)
	}
	s.OnTimer(ms(114.5))
	if st := s.Stats(); st.LostPackets != 2 || st.InFlight != 0 {
		t.Errorf("at 114.5 ms seq 3 not lost: lost=%d inflight=%d", st.LostPackets, st.InFlight)
	}
	if p, _ := s.TakeLost(); p != 1 {
		t.Errorf("TakeLost after timer = %d, want 1", p)
	}
}

// Packets above the largest acked one are never declared lost by the
// thresholds, however old: there is no evidence yet.
func TestNoLossAboveLargest(t *testing.T) {
	s := NewSender(Config{}, base)
	for i := 0; i < 10; i++ {
		s.OnSent(s.NextSeq(), 100, true, ms(float64(i)))
	}
	s.OnAck(Ack{Largest: 2, Bitmap: 1}, ms(50))
	s.OnTimer(ms(150))
	if st := s.Stats(); st.LostPackets != 0 || st.InFlight != 800 {
		t.Errorf("lost %d, inflight %d; want 0, 800", st.LostPackets, st.InFlight)
	}
}

// Seqs 1..10, 100 bytes. Ack: largest 10, bitmap bits 0,2,3,6 = seqs 9,7,6,3.
// Acked 10,9,7,6,3; lost (≥3 below 10) 5,4,2,1; seq 8 (2 below) pending.
// A later ack also covering 8 and 5 acks 8 and counts 5 as spurious.
func TestBitmapAckWithHoles(t *testing.T) {
	s := NewSender(Config{}, base)
	for i := 0; i < 10; i++ {
		s.OnSent(s.NextSeq(), 100, true, ms(float64(i)))
	}
	bm := uint64(1<<0 | 1<<2 | 1<<3 | 1<<6)
	s.OnAck(Ack{Largest: 10, Bitmap: bm}, ms(50))
	st := s.Stats()
	if st.AckedPackets != 5 || st.AckedBytes != 500 || st.LostPackets != 4 || st.InFlight != 100 {
		t.Fatalf("acked %d (%d B) lost %d inflight %d; want 5 (500 B), 4, 100",
			st.AckedPackets, st.AckedBytes, st.LostPackets, st.InFlight)
	}
	s.OnAck(Ack{Largest: 10, Bitmap: bm | 1<<1 | 1<<4}, ms(52))
	st = s.Stats()
	if st.AckedPackets != 6 || st.InFlight != 0 || st.SpuriousLost != 1 || st.LostPackets != 4 {
		t.Errorf("second ack: acked %d inflight %d spurious %d lost %d; want 6, 0, 1, 4",
			st.AckedPackets, st.InFlight, st.SpuriousLost, st.LostPackets)
	}
}

// An ack for a seq never sent is ignored.
func TestAckBeyondSentIgnored(t *testing.T) {
	s := NewSender(Config{}, base)
	s.OnAck(Ack{Largest: 1}, ms(1))
	s.OnSent(1, 100, true, ms(0))
	s.OnAck(Ack{Largest: 2, Bitmap: 1}, ms(10))
	if st := s.Stats(); st.AckedPackets != 0 || st.InFlight != 100 {
		t.Errorf("bogus ack changed state: %+v", st)
	}
}

// Sender and Receiver around seq 2^32: sender sends FFFFFFFD..2, the
// receiver gets FFFFFFFD, FFFFFFFF, 0, 2. Ack: largest 2, bitmap
// bit1 (0), bit2 (FFFFFFFF), bit4 (FFFFFFFD) = 0x16. Seq FFFFFFFE is 4
// below 2 → lost; seq 1 is 1 below → pending.
func TestSeqWrap(t *testing.T) {
	s := NewSender(Config{}, base)
	s.next = 0xFFFFFFFD
	r := NewReceiver(Config{})
	want := []uint32{0xFFFFFFFD, 0xFFFFFFFE, 0xFFFFFFFF, 0, 1, 2}
	for i, w := range want {
		seq := s.NextSeq()
		if seq != w {
			t.Fatalf("NextSeq #%d = %#x, want %#x", i, seq, w)
		}
		s.OnSent(seq, 100+i, true, ms(float64(i)))
		if seq != 0xFFFFFFFE && seq != 1 {
			r.OnPacket(seq, 100+i, 0, 0, true, ms(float64(i)+20))
		}
	}
	a := r.BuildAck(ms(30))
	if a.Largest != 2 || a.Bitmap != 0x16 || a.RxPackets != 4 {
		t.Fatalf("ack = %+v, want largest 2 bitmap 0x16 rx 4", a)
	}
	s.OnAck(a, ms(40))
	st := s.Stats()
	if st.AckedPackets != 4 || st.LostPackets != 1 || st.LostBytes != 101 || st.InFlight != 104 {
		t.Errorf("acked %d lost %d (%d B) inflight %d; want 4, 1 (101 B), 104",
			st.AckedPackets, st.LostPackets, st.LostBytes, st.InFlight)
	}
	eqDur(t, "SRTT", st.SRTT, dms(35)) // seq 2 sent at 5, acked at 40
}

// A ring slot reused before its packet was acked counts as lost.
func TestRingOverwriteIsLoss(t *testing.T) {
	s := NewSender(Config{RingSize: 64}, base)
	for i := 0; i < 65; i++ {
		s.OnSent(s.NextSeq(), 10, true, ms(float64(i)))
	}
	if st := s.Stats(); st.LostPackets != 1 || st.InFlight != 640 {
		t.Errorf("lost %d inflight %d, want 1, 640", st.LostPackets, st.InFlight)
	}
	// The overwritten seq 1 can no longer be acked; seq 65 can.
	s.OnAck(Ack{Largest: 65}, ms(100))
	if st := s.Stats(); st.AckedPackets != 1 {
		t.Errorf("acked %d, want 1", st.AckedPackets)
	}
}

// 1000-byte packets every 1 ms, each acked 50 ms later. RTT is always 50 ms,
// so srtt = 50 ms and an interval lasts at least srtt/2 = 25 ms. The first ack
// (t=50) opens the interval; it closes at the first ack ≥ 25 ms later (t=75),
// with the 25 acks of t=51..75: 25 000 B / 0.025 s = 1 000 000 B/s.
//
// The receiver times the intervals: each ack carries its cumulative RxBytes and the
// raw one-way delay (a constant 25 ms here), so the receiver's clock advances exactly
// like the send times.
func TestDeliveryRate(t *testing.T) {
	s := NewSender(Config{}, base)
	sizes := map[uint32]int{}
	var rxBytes uint64
	feed := func(fromMs, toMs, size int) {
		for ts := fromMs; ts < toMs; ts++ {
			sizes[s.NextSeq()] = size
			s.OnSent(s.NextSeq(), size, true, ms(float64(ts)))
			if ts >= 50 {
				// ack the packet sent 50 ms ago (seq = ts-49 here, as seqs start at 1)
				seq := s.NextSeq() - 51
				rxBytes += uint64(sizes[seq])
				s.OnAck(Ack{Largest: seq, Bitmap: allBelow, RxBytes: rxBytes, OWDRaw: 25000}, ms(float64(ts)))
			}
		}
	}
	feed(0, 75, 1000)
	if r := s.Stats().DeliveryRate; r != 0 {
		t.Fatalf("rate before first full interval = %v, want 0", r)
	}
	// One more step: ack at t=75 closes the first interval.
	feed(75, 101, 1000)
	if r := s.Stats().DeliveryRate; r != 1e6 {
		t.Fatalf("rate = %v, want 1e6", r)
	}
	feed(101, 2000, 1000)
	if r := s.Stats().DeliveryRate; r != 1e6 {
		t.Fatalf("steady rate = %v, want 1e6", r)
	}
	// Half-size packets: 500 000 B/s samples; the max filter keeps 1e6
	// for the rate window (5 s), then forgets it.
	feed(2000, 4000, 500)
	if r := s.Stats().DeliveryRate; r != 1e6 {
		t.Fatalf("rate 2 s after drop = %v, want 1e6 (max filter)", r)
	}
	feed(4000, 8500, 500)
	if r := s.Stats().DeliveryRate; r != 5e5 {
		t.Fatalf("rate 6.5 s after drop = %v, want 5e5", r)
	}
}

// Sparse traffic (the pipe runs dry between packets) may not lower the
// delivery rate estimate even after the window: it measures the application.
func TestDeliveryRateAppLimited(t *testing.T) {
	s := NewSender(Config{}, base)
	ts := 0
	rx := func(seq uint32) uint64 { return uint64(seq) * 1000 } // every packet is 1000 B
	for ; ts < 1000; ts++ {
		s.OnSent(s.NextSeq(), 1000, true, ms(float64(ts)))
		if ts >= 50 {
			seq := s.NextSeq() - 51
			s.OnAck(Ack{Largest: seq, Bitmap: allBelow, RxBytes: rx(seq), OWDRaw: 25000}, ms(float64(ts)))
		}
	}
	for ; ts < 1050; ts++ { // drain
		seq := s.NextSeq() - 1 - uint32(1049-ts)
		s.OnAck(Ack{Largest: seq, Bitmap: allBelow, RxBytes: rx(seq), OWDRaw: 25000}, ms(float64(ts)))
	}
	if r := s.Stats().DeliveryRate; r != 1e6 {
		t.Fatalf("rate = %v, want 1e6", r)
	}
	if s.Stats().InFlight != 0 {
		t.Fatalf("not drained: %d", s.Stats().InFlight)
	}
	for ; ts < 10000; ts += 200 { // one packet per 200 ms for 9 s
		seq := s.NextSeq()
		s.OnSent(seq, 1000, true, ms(float64(ts)))
		s.OnAck(Ack{Largest: seq, Bitmap: allBelow, RxBytes: rx(seq), OWDRaw: 25000}, ms(float64(ts+50)))
	}
	if r := s.Stats().DeliveryRate; r != 1e6 {
		t.Errorf("app-limited samples lowered the rate to %v", r)
	}
}

// OWD from acks, across the 2^32 wrap of the raw value:
//
//	raw1 = 0xFFFFFC18 (u1): smooth = u1, min = u1
//	raw2 = raw1+1800 = 0x320 (wrapped): smooth = u1 + 1800/8 = u1+225; queue 225 µs
//	raw3 = raw1-400: smooth = u1+225 + trunc(-625/8) = u1+147; min u1-400; queue 547 µs
func TestOWDMinQueueDelay(t *testing.T) {
	s := NewSender(Config{}, base)
	raw1 := uint32(0xFFFFFC18)
	ackOWD := func(at float64, raw uint32) {
		seq := s.NextSeq()
		s.OnSent(seq, 100, true, ms(at))
		s.OnAck(Ack{Largest: seq, OWDRaw: raw}, ms(at+40))
	}
	ackOWD(0, raw1)
	st := s.Stats()
	if st.OWDRaw != raw1 || st.OWDMinRaw != raw1 || st.QueueDelay != 0 {
		t.Fatalf("#1: %#x %#x %v", st.OWDRaw, st.OWDMinRaw, st.QueueDelay)
	}
	ackOWD(100, raw1+1800)
	st = s.Stats()
	if st.OWDRaw != raw1+225 || st.OWDMinRaw != raw1 || st.QueueDelay != 225*time.Microsecond {
		t.Fatalf("#2: owd %#x min %#x q %v; want %#x %#x 225µs", st.OWDRaw, st.OWDMinRaw, st.QueueDelay, raw1+225, raw1)
	}
	ackOWD(200, raw1-400)
	st = s.Stats()
	if st.OWDRaw != raw1+147 || st.OWDMinRaw != raw1-400 || st.QueueDelay != 547*time.Microsecond {
		t.Fatalf("#3: owd %#x min %#x q %v; want %#x %#x 547µs", st.OWDRaw, st.OWDMinRaw, st.QueueDelay, raw1+147, raw1-400)
	}
	// A stale ack (largest not new) carries an old OWD: ignored.
	s.OnSent(s.NextSeq(), 100, true, ms(300))
	s.OnSent(s.NextSeq(), 100, true, ms(301))
	s.OnAck(Ack{Largest: 5, OWDRaw: raw1 + 100000}, ms(341))
	s.OnAck(Ack{Largest: 4, OWDRaw: raw1 + 900000}, ms(342))
	st = s.Stats()
	if want := raw1 + 147 + (100000-147)/8; st.OWDRaw != want {
		t.Errorf("stale ack moved OWD: %#x want %#x", st.OWDRaw, want)
	}
}

// OWD rising by 100 µs per ms (a queue filling at 10 % of the link) gives a
// trend of 0.1 s/s; a flat OWD gives 0.
func TestOWDTrend(t *testing.T) {
	for _, tc := range []struct {
		name  string
		slope float64
	}{{"rising", 0.1}, {"flat", 0}, {"falling", -0.05}} {
		s := NewSender(Config{}, base)
		for ts := 0; ts < 400; ts++ {
			seq := s.NextSeq()
			s.OnSent(seq, 100, true, ms(float64(ts)))
			raw := uint32(int64(0xFFFF0000) + int64(tc.slope*1000*float64(ts)))
			s.OnAck(Ack{Largest: seq, OWDRaw: raw}, ms(float64(ts)+40))
		}
		if got := s.Stats().OWDTrend; math.Abs(got-tc.slope) > 1e-6 {
			t.Errorf("%s: trend = %v, want %v", tc.name, got, tc.slope)
		}
	}
}

func TestWinFilter(t *testing.T) {
	f := winFilter{max: true}
	f.update(0, 10, 100)
	f.update(1, 5, 100)
	if f.get() != 10 {
		t.Fatalf("max = %v, want 10", f.get())
	}
	f.update(60, 6, 100) // past a quarter window: becomes the 2nd choice
	if f.get() != 10 {
		t.Fatalf("max = %v, want 10", f.get())
	}
	f.update(101, 3, 100) // 10 expired → 6 (from t=60) is the best in window
	if f.get() != 6 {
		t.Fatalf("after expiry max = %v, want 6", f.get())
	}
	f.update(102, 7, 100)
	if f.get() != 7 {
		t.Fatalf("max = %v, want 7", f.get())
	}
	g := winFilter{}
	g.update(0, 10, 100)
	g.update(5, 12, 100)
	g.update(10, 4, 100)
	if g.get() != 4 {
		t.Fatalf("min = %v, want 4", g.get())
	}
	g.update(200, 9, 100) // everything older than the window: reset
	if g.get() != 9 {
		t.Fatalf("min after window = %v, want 9", g.get())
	}
}

// Acks that arrive in a bunch must not inflate the rate: the receiver's clock, not
// the ack arrival, times the interval. Packets of 1000 B are sent every 1 ms and
// arrive 20 ms later (OWD 20 ms); the acks come back in bunches of 20 every 20 ms.
// Timed at ack arrival the bunches would look like 1000 B per 0 ms; timed at the
// receiver every interval is exactly 1e6 B/s.
func TestDeliveryRateAckCompression(t *testing.T) {
	s := NewSender(Config{}, base)
	for ts := 0; ts < 2000; ts++ {
		s.OnSent(s.NextSeq(), 1000, true, ms(float64(ts)))
		if ts%20 == 19 && ts >= 60 {
			// one bunch: every packet sent 40..21 ms ago, acked at once
			last := s.NextSeq() - 21
			for seq := last - 19; seq <= last; seq++ {
				s.OnAck(Ack{Largest: seq, Bitmap: allBelow, RxBytes: uint64(seq) * 1000, OWDRaw: 20000}, ms(float64(ts)))
			}
		}
	}
	if r := s.Stats().DeliveryRate; r < 0.99e6 || r > 1.01e6 {
		t.Fatalf("rate = %v under ack compression, want 1e6", r)
	}
}

// Probes alone (the pipe runs dry between them) must not create a rate estimate:
// an idle path stays "unknown" (0) rather than measuring its probes.
func TestDeliveryRateProbesOnly(t *testing.T) {
	s := NewSender(Config{}, base)
	for ts := 0; ts < 5000; ts += 400 {
		seq := s.NextSeq()
		s.OnSent(seq, 80, true, ms(float64(ts)))
		s.OnAck(Ack{Largest: seq, Bitmap: allBelow, RxBytes: uint64(seq) * 80, OWDRaw: 1000}, ms(float64(ts+2)))
	}
	if r := s.Stats().DeliveryRate; r != 0 {
		t.Fatalf("probes produced a rate estimate of %v B/s", r)
	}
}

// Pure acks sent on an otherwise idle path (the peer's traffic being acknowledged)
// are acked in turn; those samples measure the ack traffic, not the path, and must
// not become the rate estimate either.
func TestDeliveryRateAcksOnly(t *testing.T) {
	s := NewSender(Config{}, base)
	var rx uint64
	for ts := 0; ts < 5000; ts += 20 {
		seq := s.NextSeq()
		s.OnSent(seq, 60, false, ms(float64(ts)))
		rx += 60
		s.OnAck(Ack{Largest: seq, Bitmap: allBelow, RxBytes: rx, OWDRaw: 1000}, ms(float64(ts+2)))
	}
	if r := s.Stats().DeliveryRate; r != 0 {
		t.Fatalf("acks-only traffic produced a rate estimate of %v B/s", r)
	}
}

// A probe outstanding across a whole interval keeps the pipe from looking empty,
// but an interval that carried no data still must not create an estimate.
func TestDeliveryRateNoDataInterval(t *testing.T) {
	s := NewSender(Config{}, base)
	var rx uint64
	for ts := 0; ts < 5000; ts += 400 {
		ping := s.NextSeq()
		s.OnSent(ping, 60, true, ms(float64(ts)))
		for k := 1; k <= 5; k++ { // acks for the peer's traffic while the ping is out
			s.OnSent(s.NextSeq(), 50, false, ms(float64(ts+k)))
		}
		rx += 60 + 5*50
		s.OnAck(Ack{Largest: s.NextSeq() - 1, Bitmap: allBelow, RxBytes: rx, OWDRaw: 1000}, ms(float64(ts+30)))
	}
	if r := s.Stats().DeliveryRate; r != 0 {
		t.Fatalf("an interval without data produced a rate estimate of %v B/s", r)
	}
}

// The signals a congestion controller takes from the Sender: what an ack newly
// acknowledged (ack-eliciting bytes only, the RTT sample, the send time of the
// newest of them), and for losses the send time of the newest lost packet.
//
//	seq 1 (elicting, 100 B, sent 0 ms), 2 (pure ack, 40 B, 1 ms), 3..5 (100 B, 2..4 ms)
//	ack at 50 ms of 5 and 1 (bitmap bit 3 = seq 1) and 2 (bit 2):
//	  newly acked eliciting: 1 and 5 = 200 B, newest sent 4 ms, RTT sample 50-4 = 46 ms
//	  lost: 3 (5-3 = 2 < 3, 48 ms < 9/8·46) no; none by threshold yet
//	ack at 60 ms of 7 (seqs 6, 7 sent at 5, 6 ms): seq 3 and 4 are ≥ 3 below 7 → lost,
//	  newest lost sent 3 ms
func TestCongestionSignals(t *testing.T) {
	s := NewSender(Config{}, base)
	s.OnSent(s.NextSeq(), 100, true, ms(0))
	s.OnSent(s.NextSeq(), 40, false, ms(1))
	for i := 0; i < 3; i++ {
		s.OnSent(s.NextSeq(), 100, true, ms(float64(2+i)))
	}
	if s.InFlight() != 400 {
		t.Fatalf("InFlight %d, want 400", s.InFlight())
	}
	r := s.OnAck(Ack{Largest: 5, Bitmap: 1<<3 | 1<<2}, ms(50))
	if r.Bytes != 200 || r.Packets != 2 || r.RTT != dms(46) || !r.NewestSent.Equal(ms(4)) {
		t.Errorf("ack result %+v, want 200 B, 2 packets, RTT 46ms, newest sent at 4 ms", r)
	}
	if n, _, _ := s.TakeLoss(); n != 0 {
		t.Errorf("%d losses, want 0", n)
	}
	s.OnSent(s.NextSeq(), 100, true, ms(5))
	s.OnSent(s.NextSeq(), 100, true, ms(6))
	r = s.OnAck(Ack{Largest: 7}, ms(60))
	if r.Bytes != 100 || r.RTT != dms(54) || !r.NewestSent.Equal(ms(6)) {
		t.Errorf("second ack result %+v", r)
	}
	n, b, newest := s.TakeLoss()
	if n != 2 || b != 200 || !newest.Equal(ms(3)) {
		t.Errorf("TakeLoss = %d packets %d B newest %v, want 2, 200, 3 ms", n, b, newest.Sub(base))
	}
	// An ack that acknowledges nothing new reports nothing.
	if r := s.OnAck(Ack{Largest: 7}, ms(61)); r != (AckResult{}) {
		t.Errorf("duplicate ack reported %+v", r)
	}
	if s.InFlight() != 100 { // seq 6
		t.Errorf("InFlight %d, want 100", s.InFlight())
	}
}

// rateRun sends size-byte packets every `every` ms from `from` to `to` ms, each
// acked `rtt` ms after it left with raw one-way delay owd µs; before each send
// markAL (if set) says the sender had room (tunnel: MarkAppLimited). Acks and
// sends are processed in time order. It returns the rate samples handed to a
// controller as (rate, app-limited) pairs.
type rateEv struct {
	at   float64
	seq  uint32
	send bool
}

func rateRun(s *Sender, rx *uint64, from, to, every float64, size int, rtt float64, owd uint32, markAL bool) (samples [][2]float64) {
	var evs []rateEv
	for t := from; t < to; t += every {
		evs = append(evs, rateEv{at: t, send: true})
	}
	for len(evs) > 0 {
		// earliest event; an ack at the same time as a send goes first
		bi := 0
		for i, e := range evs {
			if e.at < evs[bi].at || (e.at == evs[bi].at && !e.send && evs[bi].send) {
				bi = i
			}
		}
		e := evs[bi]
		evs = append(evs[:bi], evs[bi+1:]...)
		if e.send {
			if markAL {
				s.MarkAppLimited()
			}
			seq := s.NextSeq()
			s.OnSent(seq, size, true, ms(e.at))
			evs = append(evs, rateEv{at: e.at + rtt, seq: seq})
			continue
		}
		*rx += uint64(size)
		r := s.OnAck(Ack{Largest: e.seq, Bitmap: allBelow, RxBytes: *rx, OWDRaw: owd}, ms(e.at))
		if r.RateSample > 0 {
			al := 0.0
			if r.RateAppLimited {
				al = 1
			}
			samples = append(samples, [2]float64{r.RateSample, al})
		}
	}
	return samples
}

// senderAt1e6 is a Sender after 1 s at 1e6 B/s without a queue (one-way delay
// 25 ms): its estimate is 1e6. rx is the receiver's byte count so far.
func senderAt1e6(t *testing.T) (*Sender, *uint64) {
	t.Helper()
	s := NewSender(Config{}, base)
	rx := new(uint64)
	rateRun(s, rx, 0, 1000, 1, 1000, 50, 25000, false)
	if r := s.Stats().DeliveryRate; r != 1e6 {
		t.Fatalf("rate = %v, want 1e6", r)
	}
	return s, rx
}

// A sender with room on every send (marked app-limited) whose path still keeps a
// queue — one-way delay 20 ms above its minimum at both ends of each interval —
// is limited by the path, not by itself: its samples are real and lower the
// estimate once the window forgets the old one. Without the queue the same
// marked samples may not lower it (TestDeliveryRateAppLimited).
func TestDeliveryRateStandingQueueIsNotAppLimited(t *testing.T) {
	s, rx := senderAt1e6(t)
	// The path now delivers 5e5 B/s through a 20 ms standing queue, for 6 s
	// (longer than the 5 s rate window). The sender thinks it had room.
	samples := rateRun(s, rx, 1100, 7100, 2, 1000, 70, 45000, true)
	if r := s.Stats().DeliveryRate; r != 5e5 {
		t.Errorf("rate after 6 s behind a standing queue = %v, want 5e5", r)
	}
	if len(samples) < 50 {
		t.Fatalf("only %d samples", len(samples))
	}
	for _, sm := range samples[5:] {
		if sm[1] != 0 {
			t.Fatalf("sample %v reported app-limited behind a standing queue", sm)
		}
	}
	// The same marking with the queue gone (25 ms again, 4e5 B/s): app-limited,
	// the estimate stays.
	samples = rateRun(s, rx, 7300, 9300, 2.5, 1000, 50, 25000, true)
	if r := s.Stats().DeliveryRate; r != 5e5 {
		t.Errorf("rate = %v after app-limited samples without a queue, want 5e5", r)
	}
	for _, sm := range samples[2:] {
		if sm[1] != 1 {
			t.Fatalf("sample %v without a queue not reported app-limited", sm)
		}
	}
}

// Intervals that carried only small datagrams (probes, acks) are no rate
// samples for a controller.
func TestRateSampleNeedsData(t *testing.T) {
	s := NewSender(Config{}, base)
	var rx uint64
	if got := rateRun(s, &rx, 0, 2000, 10, 60, 50, 25000, false); len(got) != 0 {
		t.Errorf("probe-sized traffic gave %d rate samples, first %v", len(got), got[0])
	}
	if got := rateRun(s, &rx, 2000, 4000, 10, 1000, 50, 25000, false); len(got) == 0 {
		t.Error("data-sized traffic gave no rate sample")
	}
}

// A sender whose pipe runs empty between packets measures its own traffic even
// when the path shows a queue (another flow's): its samples stay app-limited
// and the estimate stays.
func TestDeliveryRateIdleDespiteQueue(t *testing.T) {
	s, rx := senderAt1e6(t)
	// One packet every 100 ms for 7 s, acked 70 ms later behind a 20 ms queue.
	rateRun(s, rx, 1100, 8100, 100, 1000, 70, 45000, false)
	if r := s.Stats().DeliveryRate; r != 1e6 {
		t.Errorf("sparse traffic behind another flow's queue moved the rate to %v, want 1e6", r)
	}
}

// Overdue lists the ack-eliciting packets still in flight from a packet
// number on that left at or before a time, oldest first, up to a count;
// acked and non-eliciting ones are not listed.
func TestOverdue(t *testing.T) {
	s := NewSender(Config{}, base)
	for i, at := range []float64{0, 10, 20, 30} {
		s.OnSent(uint32(i), 1200, i != 2, ms(at)) // seq 2 elicits no ack
	}
	s.OnAck(Ack{Largest: 0}, ms(40))
	if got := s.Overdue(nil, 0, ms(25), 10); !slices.Equal(got, []uint32{1}) {
		t.Errorf("sent by 25 ms, unacked: %v, want [1]", got)
	}
	if got := s.Overdue(nil, 0, ms(35), 10); !slices.Equal(got, []uint32{1, 3}) {
		t.Errorf("sent by 35 ms, unacked: %v, want [1 3]", got)
	}
	if got := s.Overdue(make([]uint32, 0, 4), 0, ms(35), 1); !slices.Equal(got, []uint32{1}) {
		t.Errorf("at most 1: %v, want [1]", got)
	}
	if got := s.Overdue(nil, 2, ms(35), 10); !slices.Equal(got, []uint32{3}) {
		t.Errorf("from seq 2, sent by 35 ms, unacked: %v, want [3]", got)
	}
	if got := s.Overdue(nil, 0, ms(5), 10); len(got) != 0 {
		t.Errorf("sent by 5 ms, unacked: %v, want none", got)
	}
}
