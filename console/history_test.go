package console

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
	"unsafe"
)

func isNaN(v float32) bool { return math.IsNaN(float64(v)) }

func TestRingSequenceAndGaps(t *testing.T) {
	var r ring
	if from, rx, _, _ := r.since(0); from != 0 || rx != nil {
		t.Fatalf("empty ring: from %d, %v", from, rx)
	}
	r.put(1000, 1, 2, 3)
	r.put(1001, 4, 5, 6)
	r.put(1004, 7, 8, 9) // 1002 and 1003 missed: gaps
	from, rx, tx, rtt := r.since(0)
	if from != 1000 || len(rx) != 5 {
		t.Fatalf("from %d, %d samples; want 1000, 5", from, len(rx))
	}
	if rx[0] != 1 || tx[1] != 5 || rtt[4] != 9 || !isNaN(rx[2]) || !isNaN(rtt[3]) {
		t.Fatalf("rx %v tx %v rtt %v", rx, tx, rtt)
	}
	// After a second: only what came later.
	from, rx, _, _ = r.since(1001)
	if from != 1002 || len(rx) != 3 || rx[2] != 7 {
		t.Fatalf("since 1001: from %d, %v", from, rx)
	}
	if _, rx, _, _ = r.since(1004); rx != nil {
		t.Fatalf("since the last sample: %v, want none", rx)
	}
	// The same second again replaces its sample.
	r.put(1004, 70, 80, 90)
	if _, rx, _, _ = r.since(1003); len(rx) != 1 || rx[0] != 70 {
		t.Fatalf("rewritten second: %v", rx)
	}
}

func TestRingKeepsTenMinutes(t *testing.T) {
	var r ring
	const start = 5000
	for s := int64(start); s < start+historyLen+250; s++ {
		r.put(s, float32(s), 0, 0)
	}
	from, rx, _, _ := r.since(0)
	last := int64(start + historyLen + 249)
	if from != last-historyLen+1 || len(rx) != historyLen {
		t.Fatalf("from %d, %d samples; want %d, %d", from, len(rx), last-historyLen+1, historyLen)
	}
	for k, v := range rx {
		if v != float32(from+int64(k)) {
			t.Fatalf("sample %d = %v, want %v", k, v, from+int64(k))
		}
	}
	// since before the window: the window, not more.
	if from2, rx2, _, _ := r.since(start); from2 != from || len(rx2) != historyLen {
		t.Fatalf("since %d: from %d, %d samples", start, from2, len(rx2))
	}
}

func TestRingRestarts(t *testing.T) {
	var r ring
	r.put(100, 1, 1, 1)
	r.put(101, 2, 2, 2)
	// The clock stepped back: the old samples would be out of order.
	r.put(50, 3, 3, 3)
	if from, rx, _, _ := r.since(0); from != 50 || !slices.Equal(rx, []float32{3}) {
		t.Fatalf("after a step back: from %d, %v", from, rx)
	}
	// A pause longer than the window leaves nothing of before.
	r.put(50+historyLen+10, 4, 4, 4)
	if from, rx, _, _ := r.since(0); from != 50+historyLen+10 || len(rx) != 1 {
		t.Fatalf("after a long pause: from %d, %d samples", from, len(rx))
	}
	// A shorter pause is a run of gaps, and the window moves on.
	r.put(50+historyLen+10+historyLen-1, 5, 5, 5)
	from, rx, _, _ := r.since(0)
	if from != 50+historyLen+10 || len(rx) != historyLen || rx[0] != 4 || rx[historyLen-1] != 5 || !isNaN(rx[1]) {
		t.Fatalf("after a pause: from %d, %d samples, first %v last %v", from, len(rx), rx[0], rx[len(rx)-1])
	}
}

func TestSeriesJSON(t *testing.T) {
	b, err := json.Marshal(series{1, nan, 12345678, 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "[1,null,1.2346e+07,0.5]" {
		t.Fatalf("%s", b)
	}
	var back []*float64
	if err := json.Unmarshal(b, &back); err != nil || back[1] != nil || *back[2] != 12346000 {
		t.Fatalf("does not read back: %v %v", back, err)
	}
}

// The bound: the history of 100 watched paths within 1 MB.
func TestHistorySize(t *testing.T) {
	if n := 100 * unsafe.Sizeof(pathHist{}); n > 1<<20 {
		t.Fatalf("100 paths of history take %d bytes, over 1 MiB", n)
	}
}
