package replay

import (
	"encoding/binary"
	"flag"
	"github.com/braid-vpn/braid/internal/fuzzin"
	"math"
	"math/bits"
	"testing"
	"time"
)

// windowModel is the reference: a set of accepted counters and the documented
// window rule. A counter is accepted iff it is not 2^64-1, and nothing was
// accepted yet, or it is newer than the newest accepted one, or it is less
// than Size() behind the newest and was not accepted before.
type windowModel struct {
	size    uint64
	seen    map[uint64]bool
	high    uint64
	hasHigh bool
}

func (m *windowModel) accepts(c uint64) bool {
	switch {
	case c == math.MaxUint64:
		return false
	case !m.hasHigh || c > m.high:
		return true
	case m.high-c >= m.size:
		return false
	}
	return !m.seen[c]
}

func (m *windowModel) record(c uint64) {
	m.seen[c] = true
	if !m.hasHigh || c > m.high {
		m.high, m.hasHigh = c, true
	}
	// Forget what can never matter again, so the map stays small.
	if len(m.seen) > 4096 {
		for k := range m.seen {
			if m.high-k >= m.size {
				delete(m.seen, k)
			}
		}
	}
}

// wantSize is New's documented sizing: 0 or negative selects DefaultSize,
// then clamp to [MinSize, MaxSize] and round up to a power of two.
func wantSize(n int) uint64 {
	if n <= 0 {
		n = DefaultSize
	}
	n = min(max(n, MinSize), MaxSize)
	return 1 << bits.Len64(uint64(n-1))
}

var fuzzSizes = []int{0, 1, MinSize, MinSize + 1, 200, 256, 1000, 4096}

// FuzzWindow feeds a Window adversarial counters — in order, behind, at the
// window edge, far jumps, the top of the counter space, replays of earlier
// counters, Resets — through Check, Update and Check+Update, and requires every
// decision, Highest and Size to agree with windowModel. Check must never
// record anything.
func FuzzWindow(f *testing.F) {
	limitFuzzMinimize()
	u64 := func(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	// Op kinds (low 3 bits): 0 newest+1, 1 newest-u16, 2 newest+u16, 3 absolute
	// u64, 4 2^64-1-u8, 5 newest-size+i8 (window edge), 6 Reset, 7 replay.
	// Bits 3-4: 0/3 Check then Update, 1 Check only, 2 Update only.
	f.Add(cat([]byte{2}, []byte{0, 0, 0, 0, 0, 0, 0x05, 0x00, 0x01, 0x01, 0x05, 0, 0x05, 0xff, 0x05, 0x01, 0x07, 0}))
	f.Add(cat([]byte{3, 3}, u64(1000), []byte{5, 0x7f, 5, 0x80, 5, 0x81, 5, 0x82, 0x0d, 0, 0x15, 0, 7, 1}))
	f.Add(cat([]byte{5, 4, 0}, []byte{0x0c, 4, 1, 4, 2, 1, 0, 2, 7, 0, 0}))
	f.Add(cat([]byte{4, 3}, u64(1<<40), []byte{2, 0xff, 0xff, 1, 0, 0x40, 6, 0, 3}, u64(5), []byte{7, 1, 7, 0}))
	f.Add(cat([]byte{7, 2, 0x01, 0x40, 2, 0x01, 0x41, 1, 0x02, 0x81, 0x0f, 0x00, 0x00, 7, 2}))
	f.Add(cat([]byte{0, 3}, u64(math.MaxUint64-2), []byte{4, 1, 4, 0, 4, 2, 0, 0, 1, 0, 1}))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1 || len(data) > 512 {
			return
		}
		wd := time.AfterFunc(10*time.Second, func() { panic("FuzzWindow: one input ran for 10s (hang)") })
		defer wd.Stop()

		sizeReq := fuzzSizes[data[0]%8]
		data = data[1:]
		w := New(sizeReq)
		m := &windowModel{size: wantSize(sizeReq), seen: map[uint64]bool{}}
		if uint64(w.Size()) != m.size {
			t.Fatalf("New(%d).Size() = %d, want %d", sizeReq, w.Size(), m.size)
		}
		take := func(n int) []byte { return fuzzin.Take(&data, n) }
		var recent []uint64
		for op := 0; len(data) > 0; op++ {
			k := take(1)[0]
			var c uint64
			switch k & 7 {
			case 0:
				c = m.high + 1
			case 1:
				c = m.high - uint64(binary.BigEndian.Uint16(take(2)))
			case 2:
				c = m.high + uint64(binary.BigEndian.Uint16(take(2)))
			case 3:
				c = binary.BigEndian.Uint64(take(8))
			case 4:
				c = math.MaxUint64 - uint64(take(1)[0])
			case 5:
				c = m.high - m.size + uint64(int64(int8(take(1)[0])))
			case 6:
				w.Reset()
				clear(m.seen)
				m.high, m.hasHigh = 0, false
				if _, ok := w.Highest(); ok {
					t.Fatalf("op %d: Highest reports a counter after Reset", op)
				}
				continue
			case 7:
				i := int(take(1)[0])
				if len(recent) == 0 {
					c = uint64(i)
				} else {
					c = recent[len(recent)-1-i%len(recent)]
				}
			}
			if len(recent) == 16 {
				copy(recent, recent[1:])
				recent = recent[:15]
			}
			recent = append(recent, c)

			want := m.accepts(c)
			mode := (k >> 3) & 3
			if mode != 2 {
				if got := w.Check(c); got != want {
					t.Fatalf("op %d: Check(%d) = %v, model %v (newest %d/%v, size %d, seen %v)", op, c, got, want, m.high, m.hasHigh, m.size, m.seen[c])
				}
			}
			if mode != 1 {
				got := w.Update(c)
				if got != want {
					t.Fatalf("op %d: Update(%d) = %v, model %v (newest %d/%v, size %d, seen %v)", op, c, got, want, m.high, m.hasHigh, m.size, m.seen[c])
				}
				if got {
					m.record(c)
				}
				// A second Update of the same counter is always a replay.
				if k&0x80 != 0 && w.Update(c) {
					t.Fatalf("op %d: Update(%d) accepted twice in a row", op, c)
				}
			}
			// Check is side-effect free, so probing around the counter and the
			// window edge is free too, and catches stale or missing bits.
			for _, p := range [...]uint64{c - 1, c + 1, c - 64, c + 64, m.high - (m.size - 1), m.high - m.size, m.high - uint64(k)} {
				if got, want := w.Check(p), m.accepts(p); got != want {
					t.Fatalf("op %d (counter %d): probe Check(%d) = %v, model %v (newest %d/%v, size %d)", op, c, p, got, want, m.high, m.hasHigh, m.size)
				}
			}
			h, ok := w.Highest()
			if ok != m.hasHigh || (ok && h != m.high) {
				t.Fatalf("op %d: Highest = %d,%v, model %d,%v", op, h, ok, m.high, m.hasHigh)
			}
		}
	})
}

// limitFuzzMinimize shortens -fuzzminimizetime to 5s unless it was given.
// The engine minimises every new interesting input for up to that long (60s
// by default) by trying O(len²) sub-slices, and with -parallel=1 fuzzing
// stops meanwhile: with the default, most of a 10-minute run went there.
func limitFuzzMinimize() {
	given := false
	flag.Visit(func(fl *flag.Flag) { given = given || fl.Name == "test.fuzzminimizetime" })
	if !given && flag.Lookup("test.fuzzminimizetime") != nil {
		_ = flag.Set("test.fuzzminimizetime", "5s")
	}
}
