package path

import (
	"testing"
	"time"
)

// steady drives a Sender and Receiver through one packet of a busy path
// (10 µs apart, 2000 packets in flight, an ack every 4 packets, the timer
// every 500). It is the body of the allocation test and the benchmarks.
type steady struct {
	s   *Sender
	r   *Receiver
	now time.Time
	i   uint64
}

func newSteady() *steady {
	return &steady{s: NewSender(Config{}, base), r: NewReceiver(Config{}), now: base}
}

func (st *steady) senderPacket() {
	st.i++
	st.now = st.now.Add(10 * time.Microsecond)
	seq := st.s.NextSeq()
	st.s.OnSent(seq, 1400, true, st.now)
	if st.i%4 == 0 && st.i > 2000 {
		st.s.OnAck(Ack{Largest: seq - 2000, Bitmap: allBelow, AckDelay: 100 * time.Microsecond,
			OWDRaw: uint32(10000 + st.i%64)}, st.now)
	}
	if st.i%500 == 0 {
		st.s.OnTimer(st.now)
		_ = st.s.Stats()
	}
}

func (st *steady) receiverPacket() {
	st.i++
	st.now = st.now.Add(10 * time.Microsecond)
	seq := uint32(st.i)
	if st.i%50 == 0 {
		seq -= 2 // a little reordering
	}
	tx := uint32(st.i * 10)
	if st.r.OnPacket(seq, 1400, tx, tx+20000+uint32(st.i%128), true, st.now) || st.r.AckDue(st.now) {
		_ = st.r.BuildAck(st.now)
	}
}

func TestZeroAllocs(t *testing.T) {
	st := newSteady()
	for range 10000 { // warm up past the first rate/loss rounds
		st.senderPacket()
		st.receiverPacket()
	}
	if n := testing.AllocsPerRun(5000, st.senderPacket); n != 0 {
		t.Errorf("Sender OnSent/OnAck/OnTimer/Stats: %v allocs per packet", n)
	}
	if n := testing.AllocsPerRun(5000, st.receiverPacket); n != 0 {
		t.Errorf("Receiver OnPacket/AckDue/BuildAck: %v allocs per packet", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = st.r.Stats(); st.r.OnPing() }); n != 0 {
		t.Errorf("Receiver Stats/OnPing: %v allocs", n)
	}
	// The liveness machinery (Down, probing, revival) allocates nothing either.
	m := newSim(Config{}, 20*time.Millisecond)
	m.fwd = make([]simPkt, 0, 4096)
	m.rev = make([]simAck, 0, 4096)
	m.probes = make([]time.Time, 0, 4096)
	m.downAt = make([]time.Time, 0, 64)
	m.dataGap = time.Millisecond
	m.run(time.Second)
	cycle := 0
	n := testing.AllocsPerRun(20, func() {
		cycle++
		m.fwdUp = cycle%2 == 0
		m.run(time.Second)
	})
	if n != 0 {
		t.Errorf("sim with Down/revive cycles: %v allocs per second", n)
	}
	if len(m.downAt) < 5 {
		t.Errorf("sim cycles did not go Down (%d downs)", len(m.downAt))
	}
}

func BenchmarkSenderOnSentOnAck(b *testing.B) {
	st := newSteady()
	b.ReportAllocs()
	for b.Loop() {
		st.senderPacket()
	}
}

func BenchmarkReceiverOnPacketBuildAck(b *testing.B) {
	st := newSteady()
	b.ReportAllocs()
	for b.Loop() {
		st.receiverPacket()
	}
}
