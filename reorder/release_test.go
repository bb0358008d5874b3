package reorder

import (
	"testing"
	"time"
)

// Release gives the memory back only while nothing is held; the flows go on
// where they were (the next packet is in order, an old copy is still a
// duplicate), and the memory is taken again with the next packet.
func TestReleaseKeepsFlows(t *testing.T) {
	b := New[int](Config{Mode: Fixed, Hold: 50 * time.Millisecond, StartAtZero: true})
	if !b.Released() {
		t.Fatal("memory taken before any packet")
	}
	now := time.Unix(1000, 0)
	var out []int
	for seq := range uint32(5) {
		out, _ = b.Push(7, seq, int(seq), now, out[:0])
	}
	out, _ = b.Push(9, 1, 100, now, out[:0]) // flow 9 waits for its 0
	if len(out) != 0 || b.Release() || b.Released() {
		t.Fatalf("released with a packet held (out %v)", out)
	}
	out, _ = b.Push(9, 0, 99, now, out[:0])
	if len(out) != 2 || !b.Release() || !b.Released() {
		t.Fatalf("memory kept with nothing held (out %v)", out)
	}
	out, dup := b.Push(7, 3, 3, now, out[:0])
	if !dup || len(out) != 0 {
		t.Fatalf("an old copy after the release: dup %v, out %v", dup, out)
	}
	if b.Released() {
		t.Fatal("a packet did not take the memory")
	}
	out, _ = b.Push(7, 5, 5, now, out[:0])
	out, _ = b.Push(9, 2, 101, now, out)
	if len(out) != 2 || out[0] != 5 || out[1] != 101 {
		t.Fatalf("after the release the flows did not go on: %v", out)
	}
	if st := b.Stats(); st.Skipped != 0 || st.Timeouts != 0 || st.Held != 0 {
		t.Fatalf("stats %+v", st)
	}
}
