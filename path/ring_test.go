package path

import (
	"testing"
	"time"
)

// The sent ring stays small while few packets are in flight, grows to hold
// every packet in flight (none is counted lost for want of a slot), and Shrink
// gives it back once the path is idle; at RingSize it wraps as before.
func TestSenderRingGrowsAndShrinks(t *testing.T) {
	s := NewSender(Config{}, base)
	now := base
	send := func(n int) (first uint32) {
		first = s.NextSeq()
		for range n {
			now = now.Add(10 * time.Microsecond)
			s.OnSent(s.NextSeq(), 1400, true, now)
		}
		return first
	}
	unacked := s.NextSeq()
	ackAll := func() {
		now = now.Add(time.Millisecond)
		// Bitmaps cover 64 below the largest: ack the range in steps, oldest
		// first.
		for l := unacked + 64; int32(l-s.NextSeq()) < 64; l += 65 {
			s.OnAck(Ack{Largest: min(l, s.NextSeq()-1), Bitmap: allBelow}, now)
		}
		unacked = s.NextSeq()
	}
	// A path with a few packets in flight at a time.
	for range 100 {
		send(8)
		ackAll()
	}
	if n := len(s.ring); n != minRing {
		t.Fatalf("ring of %d after 800 packets 8 at a time, want %d", n, minRing)
	}
	// A burst of 3000 in flight: the ring holds them all.
	send(3000)
	if n := len(s.ring); n < 3000 || n > 4096 {
		t.Fatalf("ring of %d with 3000 in flight", n)
	}
	if s.Shrink() {
		t.Fatal("shrunk with packets in flight")
	}
	ackAll()
	if st := s.Stats(); st.LostPackets != 0 || st.InFlight != 0 {
		t.Fatalf("lost %d, in flight %d after acking everything", st.LostPackets, st.InFlight)
	}
	if !s.Shrink() || len(s.ring) != minRing || len(s.q) != minRing {
		t.Fatalf("ring of %d after Shrink on an idle path", len(s.ring))
	}
	// The path goes on after it: packets are tracked and acked as before.
	send(8)
	ackAll()
	if st := s.Stats(); st.LostPackets != 0 || st.AckedPackets != 800+3000+8 {
		t.Fatalf("after the shrink: lost %d, acked %d", st.LostPackets, st.AckedPackets)
	}
	// At RingSize the ring wraps: a packet whose slot is reused unacked is lost.
	small := NewSender(Config{RingSize: 128}, base)
	for i := range 200 {
		small.OnSent(small.NextSeq(), 1400, true, base.Add(time.Duration(i)*time.Microsecond))
	}
	if n, lost := len(small.ring), small.Stats().LostPackets; n != 128 || lost != 200-128 {
		t.Fatalf("RingSize 128, 200 unacked: ring of %d, %d lost (want 128, 72)", n, lost)
	}
}
