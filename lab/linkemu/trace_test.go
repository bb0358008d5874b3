package linkemu

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func mustTrace(t *testing.T, ms ...uint32) *Trace {
	t.Helper()
	tr, err := NewTrace(ms)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// everyMs is one opportunity per ms over a period of n ms: 12.032 Mbit/s.
func everyMs(t *testing.T, n int) *Trace {
	t.Helper()
	ms := make([]uint32, n)
	for i := range ms {
		ms[i] = uint32(i + 1)
	}
	return mustTrace(t, ms...)
}

func TestParseTrace(t *testing.T) {
	in := "# a comment\n1\n\n  2 \n2\n# another\n7\n"
	tr, err := ParseTrace(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tr.ms, []uint32{1, 2, 2, 7}) || tr.Period() != 7*ms || tr.Opportunities() != 4 {
		t.Errorf("parsed %v, period %v, %d opportunities", tr.ms, tr.Period(), tr.Opportunities())
	}
	// WriteTo writes plain Mahimahi text that parses back to the same.
	var buf bytes.Buffer
	n, err := tr.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) || buf.String() != "1\n2\n2\n7\n" {
		t.Errorf("WriteTo: %q, n=%d, err %v", buf.String(), n, err)
	}
	long := everyMs(t, 50_000) // more than WriteTo's buffer
	buf.Reset()
	if n, err := long.WriteTo(&buf); err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteTo: n=%d of %d, err %v", n, buf.Len(), err)
	}
	back, err := ParseTrace(&buf)
	if err != nil || !slices.Equal(back.ms, long.ms) {
		t.Errorf("round trip of %d times: err %v, equal %v", len(long.ms), err, err == nil && slices.Equal(back.ms, long.ms))
	}

	for _, c := range []struct{ in, want string }{
		{"1\n2\nx\n", "line 3: \"x\" is not a number"},
		{"1\n2.5\n", "line 2: \"2.5\" is not a number"},
		{"# c\n\n3\n-1\n", "line 4: negative time -1"},
		{"1\n99999999999\n", "line 2: time 99999999999 ms out of range"},
		{"1\n1\n1\n1\n1\n1\n1\n1\n1\n1\n7\n5\n", "line 12: time 5 before 7 on line 11"},
		{"", "empty"},
		{"# only comments\n\n", "empty"},
		{"0\n0\n", "line 2: last time is 0"},
	} {
		_, err := ParseTrace(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.in, err, c.want)
		}
	}
	if _, err := NewTrace([]uint32{3, 1}); err == nil || !strings.Contains(err.Error(), "index 1: time 1 before 3 on index 0") {
		t.Errorf("NewTrace out of order: %v", err)
	}
	if _, err := NewTrace(nil); err == nil {
		t.Error("NewTrace accepted no times")
	}
	// NewTrace copies: changing the caller's slice changes nothing.
	ms := []uint32{1, 2}
	tr = mustTrace(t, ms...)
	ms[1] = 0
	if tr.Period() != 2*time.Millisecond {
		t.Error("NewTrace kept the caller's slice")
	}
}

func TestReadTraceFile(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.up"), filepath.Join(dir, "bad.up")
	must(t, os.WriteFile(good, []byte("5\n10\n"), 0o644))
	must(t, os.WriteFile(bad, []byte("5\nten\n"), 0o644))
	tr, err := ReadTraceFile(good)
	if err != nil || tr.Period() != 10*ms {
		t.Fatalf("%v, %v", tr, err)
	}
	if _, err := ReadTraceFile(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad file: %v, want its name and line 2", err)
	}
	missing := filepath.Join(dir, "missing")
	if _, err := ReadTraceFile(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
}

func TestTraceRate(t *testing.T) {
	tr := everyMs(t, 1)
	if r := tr.MeanRate(); r != 12_032_000 {
		t.Errorf("1 opportunity per ms = %v bit/s, want 12.032 Mbit/s", r)
	}
	// Saturated with full-size frames, one leaves each ms: frame i at
	// (i+1) ms, 12.032 Mbit/s.
	s := NewTraceSerializer(tr, 0, 0)
	for i := range 5000 {
		if dep, _ := s.Admit(0, TraceMTU); dep != time.Duration(i+1)*ms {
			t.Fatalf("frame %d departs %v, want %v", i, dep, time.Duration(i+1)*ms)
		}
	}
	// Any frame size: bytes through in 1 s = 1504 × 1000 to within a frame.
	s = NewTraceSerializer(tr, 0, 0)
	var bytes int
	for i := 0; ; i++ {
		size := 60 + i*37%1400
		if dep, _ := s.Admit(0, size); dep > time.Second {
			break
		}
		bytes += size
	}
	if bytes > 1504_000 || bytes < 1504_000-1460 {
		t.Errorf("%d bytes out in the first second, want 1504000 less a partial frame", bytes)
	}
}

// The bytes of one opportunity serve the head frames in order; a frame
// leaves with its last byte.
func TestTracePartialOpportunities(t *testing.T) {
	s := NewTraceSerializer(mustTrace(t, 1, 2, 3, 4), 0, 0)
	admitAll(t, s, []admission{
		{0, 752, 1 * ms, true},  // half of the 1 ms opportunity
		{0, 752, 1 * ms, true},  // the other half
		{0, 1604, 3 * ms, true}, // all of 2 ms and 100 B of 3 ms
		{0, 1404, 3 * ms, true}, // the rest of 3 ms
		{0, 1, 4 * ms, true},
		{0, 3008, 6 * ms, true}, // 1503 B of 4 ms, 1504 of 5 (= 1 ms of the next period), 1 of 6
	})
}

// An opportunity that finds the queue empty is lost, also the rest of a
// partly used one.
func TestTraceIdleLoss(t *testing.T) {
	s := NewTraceSerializer(everyMs(t, 10), 0, 0)
	admitAll(t, s, []admission{
		{0, 100, 1 * ms, true},                        // 1404 B of the 1 ms opportunity left
		{5500 * time.Microsecond, 1504, 6 * ms, true}, // they, and 2-5 ms, are gone
		{5500 * time.Microsecond, 1504, 7 * ms, true},
		{9 * ms, 100, 9 * ms, true},    // an opportunity serves a frame arriving at its time
		{9 * ms, 100, 9 * ms, true},    // and the next in the same opportunity
		{9*ms + 1, 100, 10 * ms, true}, // after it: the next
		{30 * ms, 1504, 30 * ms, true}, // two periods later: the period's last
	})
}

// The trace repeats shifted by its period; opportunities at the period's
// end and at 0 of the next repetition are in the same ms.
func TestTraceWrap(t *testing.T) {
	s := NewTraceSerializer(mustTrace(t, 2, 5, 5, 10), 0, 0) // 2 5 5 10 12 15 15 20 22 25 25 30 32 ...
	admitAll(t, s, []admission{
		{10*ms + 1, 1504, 12 * ms, true},
		{16 * ms, 1504, 20 * ms, true},
		{16 * ms, 1504, 22 * ms, true},
		{16 * ms, 1504, 25 * ms, true},
		{16 * ms, 1504, 25 * ms, true},
		{16 * ms, 1504, 30 * ms, true},
		{16 * ms, 1504, 32 * ms, true},
	})
	s = NewTraceSerializer(mustTrace(t, 0, 10), 0, 0) // 0 10 10 20 20 ...
	admitAll(t, s, []admission{
		{0, 1504, 0, true},
		{0, 1504, 10 * ms, true},
		{0, 1504, 10 * ms, true},
		{10 * ms, 1504, 20 * ms, true},
		{15 * ms, 1504, 20 * ms, true},
		{15 * ms, 1504, 30 * ms, true},
	})
}

func TestTraceOfferedBytes(t *testing.T) {
	tr := mustTrace(t, 2, 5, 5, 10)
	for _, c := range []struct {
		d    time.Duration
		opps uint64
	}{
		{-ms, 0}, {0, 0}, {2 * ms, 0}, {2*ms + 1, 1}, {5 * ms, 1}, {5*ms + 1, 3},
		{10 * ms, 3}, {10*ms + 1, 4}, {12*ms + 1, 5}, {20 * ms, 7}, {20*ms + 1, 8}, {25*ms + 1, 11},
		{100 * time.Second, 39_999}, {100*time.Second + 1, 40_000},
	} {
		if got := tr.OfferedBytes(c.d); got != c.opps*TraceMTU {
			t.Errorf("OfferedBytes(%v) = %d (%.2f opportunities), want %d", c.d, got, float64(got)/TraceMTU, c.opps)
		}
	}
	tr = mustTrace(t, 0, 10)
	for d, opps := range map[time.Duration]uint64{0: 0, 1: 1, 10 * ms: 1, 10*ms + 1: 3, 20 * ms: 3, 20*ms + 1: 5} {
		if got := tr.OfferedBytes(d); got != opps*TraceMTU {
			t.Errorf("0,10: OfferedBytes(%v) = %d, want %d opportunities", d, got, opps)
		}
	}
}

// The queue limits apply as with a rate; a dropped frame takes no bytes.
func TestTraceQueueLimit(t *testing.T) {
	s := NewTraceSerializer(everyMs(t, 100), 0, 3)
	admitAll(t, s, []admission{
		{0, 1504, 1 * ms, true},
		{0, 1504, 2 * ms, true},
		{0, 1504, 3 * ms, true},
		{0, 1504, 0, false},
		{999 * time.Microsecond, 100, 0, false},
		{1 * ms, 1504, 4 * ms, true}, // the first left at 1 ms
	})
	s = NewTraceSerializer(everyMs(t, 100), 3000, 0)
	admitAll(t, s, []admission{
		{0, 1500, 1 * ms, true},
		{0, 1500, 2 * ms, true},
		{0, 1, 0, false},
	})
	// A pipe with a trace and no limit gets the default one.
	p := newPipe(Shape{Trace: everyMs(t, 1)}, AtoB)
	fwd := 0
	for range DefaultQueuePackets + 10 {
		if _, v := p.admit(0, 100); v == forward {
			fwd++
		}
	}
	if fwd != DefaultQueuePackets {
		t.Errorf("forwarded %d of a burst, want the default limit %d", fwd, DefaultQueuePackets)
	}
}

// A restart makes its time 0 of the trace and sends the cursor back.
func TestTraceRestart(t *testing.T) {
	p := newPipe(Shape{Trace: mustTrace(t, 5, 10)}, AtoB)
	p.restart(time.Second)
	if at, v := p.admit(time.Second, 1504); v != forward || at != time.Second+5*ms {
		t.Errorf("after a restart at 1s: (%v, %v), want 1.005s", at, v)
	}
	if got := p.offered(time.Second + 10*ms + 1); got != 2*TraceMTU {
		t.Errorf("offered %d, want 2 opportunities", got)
	}
	p.restart(2 * time.Second)
	if got := p.offered(2*time.Second + 5*ms); got != 0 {
		t.Errorf("offered %d right after the restart", got)
	}
	if at, _ := p.admit(2*time.Second, 1504); at != 2*time.Second+5*ms {
		t.Errorf("after a restart at 2s: %v, want 2.005s", at)
	}
	if got := newPipe(Shape{Rate: 1e6}, AtoB).offered(time.Hour); got != 0 {
		t.Errorf("no trace, offered %d", got)
	}
}

func TestTraceShapeValidate(t *testing.T) {
	tr := everyMs(t, 1)
	for _, s := range []Shape{
		{Trace: tr, Rate: 1e6},
		{Trace: tr, Medium: NewMedium(1e6, 0)},
		{Trace: &Trace{}},
		{Schedule: &Schedule{Steps: []Step{{At: 2}, {At: 1}}}},
	} {
		if s.Validate() == nil {
			t.Errorf("%+v accepted", s)
		}
	}
	if err := (Shape{Trace: tr, Schedule: &Schedule{}, QueuePackets: 5}).Validate(); err != nil {
		t.Error(err)
	}
}
