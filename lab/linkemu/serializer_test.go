package linkemu

import (
	"testing"
	"time"
)

const ms = time.Millisecond

// admission is a frame offered at now and when it departs, if admitted.
type admission struct {
	now  time.Duration
	size int
	dep  time.Duration
	ok   bool
}

func admitAll(t *testing.T, s *Serializer, steps []admission) {
	t.Helper()
	for i, st := range steps {
		dep, ok := s.Admit(st.now, st.size)
		if ok != st.ok || (ok && dep != st.dep) {
			t.Errorf("frame %d (t=%v, %d B): got (%v, %v), want (%v, %v)", i, st.now, st.size, dep, ok, st.dep, st.ok)
		}
	}
}

// backlog is what waits or is on the wire at now: bytes and frames.
func backlog(s *Serializer, now time.Duration) (bytes, packets int) {
	s.expire(now)
	return s.bytes, s.n
}

// At 10 Mbit/s a 1250-byte frame takes exactly 1 ms.
func TestSerializerDepartures(t *testing.T) {
	s := NewSerializer(10_000_000, 0, 0)
	admitAll(t, s, []admission{
		{0, 1250, 1 * ms, true}, // idle line: starts at once
		{0, 1250, 2 * ms, true}, // waits for the first
		{500 * time.Microsecond, 625, 2500 * time.Microsecond, true}, // 0.5 ms frame behind them
		{5 * ms, 1250, 6 * ms, true},                                 // line idle again
		{5500 * time.Microsecond, 1250, 7 * ms, true},                // busy until 6 ms
		{20 * ms, 100, 20*ms + 80*time.Microsecond, true},
	})
}

// 1 byte at 3 Mbit/s is 2666.67 ns: the remainders must add up instead of
// being lost, so the third back-to-back frame leaves at exactly 8 µs.
func TestSerializerCarry(t *testing.T) {
	s := NewSerializer(3_000_000, 0, 0)
	want := []time.Duration{2666, 5333, 8000, 10666, 13333, 16000}
	for i, w := range want {
		if dep, _ := s.Admit(0, 1); dep != w {
			t.Errorf("frame %d departs %v, want %v", i, dep, w)
		}
	}
	// 3000 frames of 1250 B back to back at 3 Mbit/s: exactly 10 s.
	s = NewSerializer(3_000_000, 0, 0)
	var dep time.Duration
	for i := 0; i < 3000; i++ {
		dep, _ = s.Admit(0, 1250)
	}
	if dep != 10*time.Second {
		t.Errorf("3000 frames depart at %v, want 10s", dep)
	}
}

func TestSerializerByteLimit(t *testing.T) {
	s := NewSerializer(10_000_000, 2500, 0)
	admitAll(t, s, []admission{
		{0, 1250, 1 * ms, true},
		{0, 1250, 2 * ms, true},
		{0, 1250, 0, false},          // 3750 > 2500
		{0, 1, 0, false},             // still full
		{1 * ms, 1250, 3 * ms, true}, // first departed at 1 ms: 1250 + 1250 fits
		{1 * ms, 100, 0, false},
	})
	if b, p := backlog(s, 1*ms); b != 2500 || p != 2 {
		t.Errorf("backlog at 1ms = %d B / %d, want 2500 / 2", b, p)
	}
	if b, p := backlog(s, 2500*time.Microsecond); b != 1250 || p != 1 {
		t.Errorf("backlog at 2.5ms = %d B / %d, want 1250 / 1", b, p)
	}
	if b, p := backlog(s, 3*ms); b != 0 || p != 0 {
		t.Errorf("backlog at 3ms = %d B / %d, want 0", b, p)
	}
}

func TestSerializerPacketLimit(t *testing.T) {
	s := NewSerializer(8_000_000, 0, 3) // 1000 B = 1 ms
	for i := 0; i < 3; i++ {
		if _, ok := s.Admit(0, 1000); !ok {
			t.Fatalf("frame %d dropped below the limit", i)
		}
	}
	if _, ok := s.Admit(0, 40); ok {
		t.Fatal("fourth frame admitted over a 3-packet limit")
	}
	// The dropped frame must not have moved the schedule.
	if dep, ok := s.Admit(999*time.Microsecond, 1000); ok {
		t.Fatalf("admitted at 0.999 ms (departs %v), first frame still on the wire", dep)
	}
	if dep, ok := s.Admit(1*ms, 1000); !ok || dep != 4*ms {
		t.Fatalf("at 1 ms: got (%v, %v), want (4ms, true)", dep, ok)
	}
}

func TestSerializerUnlimitedRate(t *testing.T) {
	s := NewSerializer(0, 10, 1)
	for i := 0; i < 100; i++ {
		now := time.Duration(i) * time.Microsecond
		if dep, ok := s.Admit(now, 1500); !ok || dep != now {
			t.Fatalf("rate 0: got (%v, %v), want (%v, true)", dep, ok, now)
		}
	}
}

// The ring grows past its initial size without losing order or counts.
func TestSerializerGrowth(t *testing.T) {
	s := NewSerializer(8_000, 0, 0) // 1 byte = 1 ms
	for i := 0; i < 1000; i++ {
		if dep, _ := s.Admit(0, 1); dep != time.Duration(i+1)*ms {
			t.Fatalf("frame %d departs %v", i, dep)
		}
	}
	if b, p := backlog(s, 500*ms-1); b != 501 || p != 501 {
		t.Errorf("backlog just before 500 ms = %d/%d, want 501/501", b, p)
	}
}
