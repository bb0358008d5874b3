package ccsim

import (
	"testing"
	"time"
)

// One Reno flow alone on a 10 Mbit/s link with a buffer of one BDP keeps the link
// busy (a buffer of one BDP is exactly what Reno's halving needs) and loses only
// at the buffer.
func TestSingleRenoFillsLink(t *testing.T) {
	s := New(Config{Seed: 7})
	l := s.AddLink(LinkConfig{Name: "bn", Rate: 10e6, Delay: 10 * time.Millisecond, Buffer: 25000})
	f, err := s.AddFlow(FlowConfig{Name: "tcp", CC: "reno", Routes: [][]*Link{{l}}})
	if err != nil {
		t.Fatal(err)
	}
	s.Run(60 * time.Second)
	g := f.Goodput(0, 10*time.Second, 60*time.Second)
	if g < 9.0e6 || g > 10e6 {
		t.Errorf("goodput %.2f Mbit/s, want 9..10", g/1e6)
	}
	if l.QueueDrops == 0 || l.Lost != 0 {
		t.Errorf("drops %d, random losses %d: want tail drops only", l.QueueDrops, l.Lost)
	}
	if st := f.Path(0).Stats(); st.CongestionEvents < 10 || st.RTOs != 0 {
		t.Errorf("%d congestion events, %d RTOs: want a sawtooth without timeouts", st.CongestionEvents, st.RTOs)
	}
	t.Logf("goodput %.2f Mbit/s, drops %d, events %d, mean queue %.0f B", g/1e6, l.QueueDrops, f.Path(0).Stats().CongestionEvents, l.MeanQueue(10*time.Second, 60*time.Second))
}

// The same seed gives the same run.
func TestDeterministic(t *testing.T) {
	run := func() uint64 {
		s := New(Config{Seed: 3})
		l := s.AddLink(LinkConfig{Rate: 5e6, Delay: 15 * time.Millisecond, Buffer: 20000, Loss: 0.001})
		f, _ := s.AddFlow(FlowConfig{CC: "cubic", Routes: [][]*Link{{l}, {l}}})
		s.Run(10 * time.Second)
		return f.Acked(0)*31 + f.Acked(1)
	}
	if a, b := run(), run(); a != b {
		t.Errorf("two runs differ: %d vs %d", a, b)
	}
}
