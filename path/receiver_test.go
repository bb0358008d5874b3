package path

import (
	"testing"
	"time"
)

// Ack decisions with AckEvery 4, AckDelay 5 ms.
func TestReceiverAckDecision(t *testing.T) {
	r := NewReceiver(Config{})
	if r.AckDue(ms(100)) {
		t.Fatal("ack due before any packet")
	}
	if r.OnPacket(1, 100, 0, 0, true, ms(0)) {
		t.Error("first packet: ackNow")
	}
	if r.AckDue(ms(4.999)) {
		t.Error("ack due before AckDelay")
	}
	if !r.AckDue(ms(5)) {
		t.Error("ack not due at AckDelay")
	}
	a := r.BuildAck(ms(5))
	if a.Largest != 1 || a.Bitmap != 0 || a.AckDelay != 5*time.Millisecond || a.RxPackets != 1 || a.RxBytes != 100 {
		t.Errorf("ack = %+v", a)
	}
	if r.AckDue(ms(100)) {
		t.Error("ack due right after BuildAck")
	}

	// AckEvery: the 4th ack-eliciting packet since the last ack.
	for seq := uint32(2); seq <= 4; seq++ {
		if r.OnPacket(seq, 100, 0, 0, true, ms(10)) {
			t.Errorf("seq %d: ackNow before AckEvery", seq)
		}
	}
	if !r.OnPacket(5, 100, 0, 0, true, ms(11)) {
		t.Error("seq 5: no ackNow at AckEvery")
	}
	if !r.AckDue(ms(11)) {
		t.Error("AckDue false with immediate ack pending")
	}
	r.BuildAck(ms(11))

	// Non-eliciting packets never trigger or arm an ack.
	for seq := uint32(6); seq <= 12; seq++ {
		if r.OnPacket(seq, 50, 0, 0, false, ms(12)) {
			t.Errorf("non-eliciting seq %d: ackNow", seq)
		}
	}
	if r.AckDue(ms(1000)) {
		t.Error("non-eliciting packets armed the ack timer")
	}
	if !r.Pending() {
		t.Error("non-eliciting packets not pending")
	}

	// A gap: seq 14 (13 missing) → immediate.
	if !r.OnPacket(14, 100, 0, 0, true, ms(20)) {
		t.Error("hole opened: no ackNow")
	}
	a = r.BuildAck(ms(20))
	// 13 missing (bit 0), 12..1 received (bits 1..12).
	if a.Largest != 14 || a.Bitmap != 0x1FFE {
		t.Errorf("ack after gap: largest %d bitmap %#x, want 14, 0x1ffe", a.Largest, a.Bitmap)
	}
	// Seq 13 fills the hole → immediate.
	if !r.OnPacket(13, 100, 0, 0, true, ms(21)) {
		t.Error("hole filled: no ackNow")
	}
	r.BuildAck(ms(21))
	// Non-eliciting late packet: counted, no ack.
	st := r.Stats()
	if st.RxPackets != 14 || st.OutOfOrder != 2 || st.Duplicates != 0 {
		t.Errorf("stats %+v", st)
	}

	// Duplicates: of the largest and of a bitmap seq.
	if r.OnPacket(14, 100, 0, 0, true, ms(22)) || r.OnPacket(13, 100, 0, 0, true, ms(22)) {
		t.Error("duplicate triggered an ack")
	}
	st = r.Stats()
	if st.Duplicates != 2 || st.RxPackets != 14 || st.RxBytes != 5*100+7*50+2*100 {
		t.Errorf("after dups: %+v", st)
	}
	if r.AckDue(ms(1000)) {
		t.Error("duplicates armed the ack timer")
	}

	// PING: ack now.
	r.OnPacket(15, 40, 0, 0, true, ms(30))
	if !r.OnPing() || !r.AckDue(ms(30)) {
		t.Error("PING did not make an ack due")
	}
	// Ack delay is measured from the largest's arrival, truncated to µs.
	a = r.BuildAck(ms(30).Add(1234567 * time.Nanosecond))
	if a.AckDelay != 1234*time.Microsecond {
		t.Errorf("AckDelay = %v, want 1.234ms", a.AckDelay)
	}
	if a.RxPackets != 15 {
		t.Errorf("RxPackets = %d, want 15", a.RxPackets)
	}
}

func TestReceiverOnPingBeforeAnything(t *testing.T) {
	r := NewReceiver(Config{})
	if r.OnPing() {
		t.Error("OnPing with nothing received asked for an ack")
	}
	if a := r.BuildAck(ms(0)); a != (Ack{}) {
		t.Errorf("empty BuildAck = %+v", a)
	}
}

// Received 1,2,3,5,7 then 4: largest 7; bits: 6 no, 5,4,3,2,1 yes = 0x3E.
func TestReceiverBitmapOutOfOrder(t *testing.T) {
	r := NewReceiver(Config{})
	for _, seq := range []uint32{1, 2, 3, 5, 7, 4} {
		r.OnPacket(seq, 10, 0, 0, true, ms(0))
	}
	if a := r.BuildAck(ms(1)); a.Largest != 7 || a.Bitmap != 0x3E {
		t.Errorf("largest %d bitmap %#x, want 7 0x3e", a.Largest, a.Bitmap)
	}

	// A jump of exactly 64 keeps the old largest in the top bit; more drops it.
	r = NewReceiver(Config{})
	r.OnPacket(1, 10, 0, 0, true, ms(0))
	r.OnPacket(65, 10, 0, 0, true, ms(0))
	if a := r.BuildAck(ms(0)); a.Bitmap != 1<<63 {
		t.Errorf("jump 64: bitmap %#x", a.Bitmap)
	}
	r.OnPacket(66, 10, 0, 0, true, ms(0))
	if a := r.BuildAck(ms(0)); a.Bitmap != 1 {
		t.Errorf("66 after 65: bitmap %#x, want 1 (seq 1 shifted out)", a.Bitmap)
	}
	r.OnPacket(200, 10, 0, 0, true, ms(0))
	if a := r.BuildAck(ms(0)); a.Bitmap != 0 || a.Largest != 200 {
		t.Errorf("jump 134: %+v", a)
	}
	// Far below the window: counted as received (cannot tell), TooOld.
	r.OnPacket(100, 10, 0, 0, true, ms(0))
	if st := r.Stats(); st.TooOld != 1 || st.RxPackets != 5 {
		t.Errorf("too old: %+v", st)
	}
}

// Receiver seq wrap: FFFFFFFF, 0, then 2: largest 2, bits 1 (0), 2 (FFFFFFFF).
func TestReceiverSeqWrap(t *testing.T) {
	r := NewReceiver(Config{})
	r.OnPacket(0xFFFFFFFF, 10, 0, 0, true, ms(0))
	r.OnPacket(0, 10, 0, 0, true, ms(0))
	r.OnPacket(2, 10, 0, 0, true, ms(0))
	if a := r.BuildAck(ms(0)); a.Largest != 2 || a.Bitmap != 0b110 {
		t.Errorf("largest %#x bitmap %#b", a.Largest, a.Bitmap)
	}
	r.OnPacket(1, 10, 0, 0, true, ms(0))
	if a := r.BuildAck(ms(0)); a.Bitmap != 0b111 {
		t.Errorf("after 1: bitmap %#b", a.Bitmap)
	}
}

// Receiver OWD: tx clock near wrap; owd 10000, 10800, 9200 µs.
//
//	#1: s = 10000, dev = 0
//	#2: dev = 0 + (800-0)/4 = 200; s = 10000 + 800/8 = 10100
//	#3: |9200-10100| = 900: dev = 200 + (900-200)/4 = 375; s = 10100 + trunc(-900/8) = 9988
func TestReceiverOWD(t *testing.T) {
	r := NewReceiver(Config{})
	tx := uint32(0xFFFFFF00)
	for i, owd := range []uint32{10000, 10800, 9200} {
		r.OnPacket(uint32(i+1), 10, tx, tx+owd, true, ms(float64(i)))
	}
	if r.OWDRaw() != 9988 || r.OWDJitter() != 375*time.Microsecond {
		t.Errorf("owd %d jitter %v, want 9988 375µs", r.OWDRaw(), r.OWDJitter())
	}
	// The ack carries the raw OWD of the largest packet, not the smoothed one.
	if a := r.BuildAck(ms(3)); a.OWDRaw != 9200 {
		t.Errorf("ack OWDRaw %d, want 9200", a.OWDRaw)
	}
	// Raw OWD values wrapping past 2^32: 0xFFFFFFF0 then 0x10 (+32).
	r = NewReceiver(Config{})
	r.OnPacket(1, 10, 0, 0xFFFFFFF0, true, ms(0))
	r.OnPacket(2, 10, 0, 0x10, true, ms(1))
	if r.OWDRaw() != 0xFFFFFFF4 || r.OWDJitter() != 8*time.Microsecond {
		t.Errorf("wrapped: owd %#x jitter %v, want 0xfffffff4 8µs", r.OWDRaw(), r.OWDJitter())
	}
}

// AckSpacing (1 ms): AckEvery packets pending within 1 ms of the last ack wait
// for the spacing (the ack timer sends them) or for AckMaxPending packets.
func TestReceiverAckSpacing(t *testing.T) {
	r := NewReceiver(Config{})
	r.OnPacket(1, 100, 0, 0, true, ms(0))
	r.BuildAck(ms(0))
	seq := uint32(2)
	for ; seq <= 5; seq++ { // the 4th arrives 0.4 ms after the ack
		if r.OnPacket(seq, 100, 0, 0, true, ms(0.1*float64(seq-1))) {
			t.Fatalf("seq %d: ackNow within AckSpacing", seq)
		}
	}
	if r.AckDue(ms(0.99)) {
		t.Error("ack due before AckSpacing")
	}
	if !r.AckDue(ms(1)) {
		t.Error("ack not due once AckSpacing has passed with AckEvery pending")
	}
	for ; r.Unacked() < AckMaxPending-1; seq++ {
		if r.OnPacket(seq, 100, 0, 0, true, ms(0.5)) {
			t.Fatalf("seq %d: ackNow with %d pending", seq, r.Unacked())
		}
	}
	if !r.OnPacket(seq, 100, 0, 0, true, ms(0.5)) {
		t.Errorf("no ackNow at %d pending", AckMaxPending)
	}
	r.BuildAck(ms(0.5))
	// Past the spacing, AckEvery acks at once as before.
	for seq++; r.Unacked() < 3; seq++ {
		r.OnPacket(seq, 100, 0, 0, true, ms(2))
	}
	if !r.OnPacket(seq, 100, 0, 0, true, ms(2)) {
		t.Error("no ackNow at AckEvery 1.5 ms after the last ack")
	}
}
