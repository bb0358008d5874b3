package reorder

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// FuzzBuffer drives one Buffer with an adversarial sequence of Push/PushClass,
// PushUnordered, Abandon, clock advances, Expire, SetHold/SetRecoveryHold, Flush and Reset
// decoded from the fuzz input, and checks every result against a model of what
// the package documentation promises:
//
//   - an item is released at most once, only if it was pushed and not returned
//     as a duplicate, and never a tombstone (item 0, the zero T of Abandon);
//   - per (session, flow bucket, sequence number) at most one item is released:
//     copies are dropped whether the original was delivered or is held;
//   - a flow's releases are in increasing sequence order, except a packet that
//     arrives after its gap was given up ("late"): it is released at its own
//     Push, as the last item, counted in Stats.Late — never from the buffer;
//     and a PushUnordered packet, which may go out ahead of its flow's gaps;
//   - Stats.Held never exceeds MaxHeld and covers every item the buffer owns;
//     Off mode holds nothing; Stats counters add up to what was seen;
//   - after Expire(now) no gap is overdue (NextDeadline is after now), and
//     NextDeadline exists exactly when something is held;
//   - the hold stays within [MinHold, Hold] (exactly Hold outside Adaptive), the
//     recovery hold within [Hold(), max(Hold(), MaxRecoveryHold)];
//   - Flush at the end releases every item the buffer still owns;
//   - the internal lists, free list and deadline heaps stay consistent.
//
// Sequence numbers are generated in an unwrapped int64 space per flow bucket
// and kept within 2^29 of the bucket's start, so that "increasing" is well
// defined across the 2^32 wrap (the sender never runs 2^31 ahead of a gap).
func FuzzBuffer(f *testing.F) {
	limitFuzzMinimize()
	hdr := func(mode, flows, maxHeld, dedup, hold, minHold byte, base uint32) []byte {
		b := []byte{mode, flows, maxHeld, dedup, hold, minHold, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[6:], base)
		return b
	}
	type o = [4]byte
	op := func(b []byte, ops ...o) []byte {
		for _, o := range ops {
			b = append(b, o[:]...)
		}
		return b
	}
	// op encodings (see decode below): push k=0|1|7 (bits 5-6 choose the seq:
	// 0 next, 1 cursor+int8, 2 big jump, 3 replay of an earlier seq; bits 3-4
	// the class; bit 7 PushUnordered), abandon k=2, time k=3, expire k=4, holds k=5, flush/reset k=6.
	inOrder := [4]byte{0x00, 1, 0, 0}
	gap := [4]byte{0x20, 1, 3, 0}     // cursor+3: a gap of two
	back := [4]byte{0x20, 1, 0xfe, 0} // cursor-2: fills it
	dupe := [4]byte{0x60, 1, 1, 0}    // replays an earlier seq
	wait := [4]byte{0x03, 0, 0x10, 0} // +40.96 ms
	f.Add(op(hdr(1, 2, 16, 0, 50, 2, 0), inOrder, gap, back, dupe, inOrder, wait, o{4, 0, 0, 0}))
	f.Add(op(hdr(2, 3, 4, 1, 20, 1, 0xfffffff0), inOrder, gap, gap, wait, o{4, 0, 0, 0}, back, back, dupe, dupe, o{5, 0, 7, 30}))
	f.Add(op(hdr(0, 1, 8, 0, 10, 0, 7), inOrder, gap, back, dupe, o{2, 1, 0, 0}, o{0x40, 1, 0x10, 0x00}, back))
	f.Add(op(hdr(1|4, 0x81, 2, 0, 5, 0, 0), gap, gap, o{0x28, 5, 1, 0}, o{0x28, 2, 4, 0}, back, o{2, 1, 0, 0}, wait, o{6, 7, 0, 0}, inOrder, o{6, 0, 0, 0}))
	f.Add(op(hdr(2|4, 2, 1, 0, 255, 7, 0), o{0x20, 0, 2, 0}, o{0x22, 0, 0xff, 0}, o{0x21, 0, 5, 0}, o{0x38, 3, 3, 0}, o{2, 3, 0, 0}, o{0x60, 3, 0, 0}, wait, wait, o{4, 0, 0, 0}))
	// Tombstones: hold 3, abandon 2, then 2 turns up (the tombstone becomes it).
	f.Add(op(hdr(1|4, 0, 8, 0, 50, 0, 0), o{0x00, 0, 0, 0}, o{0x20, 0, 3, 0}, o{0x22, 0, 0xff, 0}, o{0x20, 0, 0xff, 0}, o{0x20, 0, 0xfe, 0}, o{0x60, 0, 2, 0}))
	// Unordered packets past a gap, a copy, the gap filled, one past a tombstone.
	f.Add(op(hdr(1|4, 0, 8, 0, 50, 0, 0), o{0x00, 0, 0, 0}, o{0xa0, 0, 3, 0}, o{0x20, 0, 1, 0}, o{0xe0, 0, 1, 0}, o{0x20, 0, 0xfd, 0},
		o{0x20, 0, 4, 0}, o{0x22, 0, 0xff, 0}, o{0xa0, 0, 0, 0}, o{0x20, 0, 0xfe, 0}, wait, o{4, 0, 0, 0}))
	// Long pseudo-random runs over every op, for each mode.
	for i := range 4 {
		rng := rand.New(rand.NewPCG(uint64(i), 1))
		b := hdr(byte(i)|byte(rng.IntN(2))<<2, byte(rng.IntN(4)), byte(rng.IntN(24)), byte(i), byte(rng.IntN(64)), byte(rng.IntN(256)), rng.Uint32())
		for range fuzzMaxOps - 4 {
			b = append(b, byte(rng.IntN(256)), byte(rng.IntN(6)), byte(rng.IntN(8)-3), byte(rng.IntN(256)))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Inputs are capped at fuzzMaxOps ops: the engine minimises every new
		// interesting input by trying O(len²) sub-slices, and longer inputs
		// stall fuzzing for the whole -fuzzminimizetime each time.
		if len(data) < 10 || len(data) > 10+4*fuzzMaxOps {
			return
		}
		wd := time.AfterFunc(10*time.Second, func() { panic("FuzzBuffer: one input ran for 10s (hang)") })
		defer wd.Stop()
		runBufferOps(t, data)
	})
}

// fuzzKey names one packet of the inner traffic: its bucket, its unwrapped
// sequence number and the session (Reset starts a new one).
type fuzzKey struct {
	session int
	bucket  uint32
	u       int64
}

type fuzzItem struct {
	key       fuzzKey
	released  bool
	dup       bool
	unordered bool // pushed with PushUnordered: may go out ahead of its flow
}

// fuzzOp describes the operation under check; it is formatted only when a
// check fails.
type fuzzOp struct {
	n     int
	name  string
	flow  uint16
	u     int64
	class Class
	at    time.Duration
}

func (o fuzzOp) String() string {
	switch o.name {
	case "PushClass", "PushUnordered":
		return fmt.Sprintf("op %d: %s(flow %d, seq %d [u %d], class %d)", o.n, o.name, o.flow, uint32(o.u), o.u, o.class)
	case "Abandon":
		return fmt.Sprintf("op %d: Abandon(flow %d, seq %d [u %d])", o.n, o.flow, uint32(o.u), o.u)
	case "Expire":
		return fmt.Sprintf("op %d: Expire(+%v)", o.n, o.at)
	}
	return fmt.Sprintf("op %d: %s", o.n, o.name)
}

const fuzzMaxOps = 96

const fuzzSpan = 1 << 29 // unwrapped seqs stay within ±fuzzSpan of the bucket's base

// strictFuzz (BRAID_FUZZ_STRICT=1) also fails on a known, reported behaviour
// that the fuzz target otherwise tolerates so that fuzzing can go on past it:
// when the pool is full, a packet that falls inside its own flow's oldest gap
// forces that gap to be given up and is then dropped as Stale if the release
// moved next more than DedupWindow past it, although it was never delivered
// (testdata/fuzz/FuzzBuffer/overflow-giveup-drops-own-packet-as-stale).
// The findings are fixed now: strict always, and the crasher inputs in testdata
// are regression seeds. BRAID_FUZZ_STRICT=0 restores the tolerance.
func strictFuzz() bool { return os.Getenv("BRAID_FUZZ_STRICT") != "0" }

func runBufferOps(t *testing.T, data []byte) {
	cfg := Config{
		Mode:        Mode(data[0] % 4), // 3 is not a named mode: treated as Fixed
		StartAtZero: data[0]&4 != 0,
		Flows:       1 << (data[1] % 4),
		MaxHeld:     1 + int(data[2]%24),
		DedupWindow: 64 << (data[3] % 2),
		Hold:        time.Duration(1+int(data[4])) * time.Millisecond,
	}
	if data[1]&0x80 != 0 {
		cfg.Flows = 3 // not a power of two: rounded up to 4
	}
	cfg.MinHold = time.Duration(data[5]%8) * time.Millisecond
	cfg.MaxRecoveryHold = time.Duration(data[5]>>3) * 10 * time.Millisecond
	baseSeq := binary.BigEndian.Uint32(data[6:])
	data = data[10:]

	b := New[uint32](cfg)
	nf := uint32(1)
	for int(nf) < cfg.Flows {
		nf <<= 1
	}
	maxHold := cfg.Hold
	minHold := min(cfg.MinHold, maxHold)

	// The unwrapped base of every bucket: with StartAtZero the sender numbers
	// from 0, so seqs sit around 0 (a few below it are "late" at the start).
	base := int64(baseSeq)
	if cfg.StartAtZero {
		base = int64(int8(baseSeq))
	}
	cursor := make([]int64, nf) // highest unwrapped seq generated per bucket
	for i := range cursor {
		cursor[i] = base - 1
	}
	var recent []int64 // recently generated seqs, for replays

	items := []fuzzItem{{}} // id 0 is the tombstone value, never pushed
	session := 0
	delivered := map[fuzzKey]uint32{} // key → id of the item released for it
	held := map[fuzzKey]int{}         // keys of items the buffer owns
	last := make([]int64, nf)         // unwrapped seq of the latest in-order release per bucket
	haveLast := make([]bool, nf)
	var released, dups uint64
	now := t0
	out := make([]uint32, 0, 64)

	// genSeq picks an unwrapped seq for bucket bk from op bits.
	genSeq := func(k, x, y byte, bk uint32) int64 {
		var u int64
		switch (k >> 5) & 3 {
		case 0:
			u = cursor[bk] + 1
		case 1:
			u = cursor[bk] + int64(int8(x))
		case 2:
			u = cursor[bk] + int64(int16(uint16(x)<<8|uint16(y)))*16
		case 3:
			if len(recent) == 0 {
				u = cursor[bk]
			} else {
				u = recent[len(recent)-1-int(x)%len(recent)]
			}
		}
		u = min(max(u, base-fuzzSpan), base+fuzzSpan)
		if u > cursor[bk] {
			cursor[bk] = u
		}
		if len(recent) == 32 {
			copy(recent, recent[1:])
			recent = recent[:31]
		}
		recent = append(recent, u)
		return u
	}

	// account checks the items released by one call. cur is the id pushed by
	// it (0 for other calls); lateDelta is how much Stats.Late grew.
	account := func(what fuzzOp, out []uint32, cur uint32, lateDelta uint64) {
		outOfOrder := 0
		for i, id := range out {
			if id == 0 {
				t.Fatalf("%s released a tombstone (an abandoned seq's zero item)", what)
			}
			if int(id) >= len(items) {
				t.Fatalf("%s released item %d that was never pushed", what, id)
			}
			it := &items[id]
			if it.dup {
				t.Fatalf("%s released item %d %+v that Push had returned as a duplicate", what, id, it.key)
			}
			if it.released {
				t.Fatalf("%s released item %d %+v a second time", what, id, it.key)
			}
			if it.key.session != session {
				t.Fatalf("%s released item %d %+v of session %d in session %d", what, id, it.key, it.key.session, session)
			}
			it.released = true
			released++
			if prev, ok := delivered[it.key]; ok {
				t.Fatalf("%s released item %d for %+v, already delivered as item %d", what, id, it.key, prev)
			}
			delivered[it.key] = id
			if id != cur {
				if held[it.key]--; held[it.key] <= 0 {
					delete(held, it.key)
				}
			}
			bk := it.key.bucket
			if it.unordered {
				continue // out of order by design; its flow's order is not its
			}
			if !haveLast[bk] || it.key.u > last[bk] {
				last[bk], haveLast[bk] = it.key.u, true
				continue
			}
			// Out of order: only a late packet, at its own Push, as the last item.
			if id != cur || i != len(out)-1 {
				t.Fatalf("%s released bucket %d seq %d (item %d) after seq %d, and it is not the late packet being pushed (item %d); out %v",
					what, bk, it.key.u, id, last[bk], cur, out)
			}
			outOfOrder++
		}
		if outOfOrder > 0 && lateDelta != 1 {
			t.Fatalf("%s released a packet out of order but Stats.Late grew by %d", what, lateDelta)
		}
	}

	check := func(what fuzzOp) {
		st := b.Stats()
		if st.Held > cfg.MaxHeld {
			t.Fatalf("%s: Held %d > MaxHeld %d", what, st.Held, cfg.MaxHeld)
		}
		owned := 0
		for _, n := range held {
			owned += n
		}
		if st.Held < owned {
			t.Fatalf("%s: Held %d, but the buffer owns %d items", what, st.Held, owned)
		}
		if cfg.Mode == Off && st.Held != 0 {
			t.Fatalf("%s: Off mode holds %d", what, st.Held)
		}
		if got := st.InOrder + st.Reordered + st.Late + st.Bypassed; got != released {
			t.Fatalf("%s: InOrder+Reordered+Late+Bypassed = %d, %d items released: %+v", what, got, released, st)
		}
		if got := st.Duplicates + st.Stale; got != dups {
			t.Fatalf("%s: Duplicates+Stale = %d, %d duplicates returned: %+v", what, got, dups, st)
		}
		if _, ok := b.NextDeadline(); ok != (st.Held > 0) {
			t.Fatalf("%s: NextDeadline ok=%v with %d held", what, ok, st.Held)
		}
		h := b.Hold()
		if cfg.Mode == Adaptive {
			if h < minHold || h > maxHold {
				t.Fatalf("%s: adaptive hold %v outside [%v, %v]", what, h, minHold, maxHold)
			}
		} else if h != maxHold {
			t.Fatalf("%s: hold %v, want %v outside adaptive mode", what, h, maxHold)
		}
		if rh := b.RecoveryHold(); rh < h || rh > max(h, cfg.MaxRecoveryHold) {
			t.Fatalf("%s: recovery hold %v outside [%v, max(%v, %v)]", what, rh, h, h, cfg.MaxRecoveryHold)
		}
		checkBufferInternals(t, what, b)
	}

	for n := 0; len(data) >= 4 && n < fuzzMaxOps; n++ {
		k, x, y, z := data[0], data[1], data[2], data[3]
		data = data[4:]
		flow := uint16(x & 15)
		bk := uint32(flow) & (nf - 1)
		before := b.Stats()
		what := fuzzOp{n: n, flow: flow}
		switch k & 7 {
		case 0, 1, 7: // push
			u := genSeq(k, y, z, bk)
			id := uint32(len(items))
			key := fuzzKey{session, bk, u}
			items = append(items, fuzzItem{key: key})
			c := Class((k >> 3) & 3) // 2 and 3 are not classes: taken as Recoverable
			what.name, what.u, what.class = "PushClass", u, c
			push := b.PushClass
			if k&0x80 != 0 {
				what.name, push, items[id].unordered = "PushUnordered", b.PushUnordered, true
			}
			res, dup := push(flow, uint32(u), id, c, now, out[:0])
			after := b.Stats()
			if dup {
				items[id].dup = true
				dups++
				_, wasDelivered := delivered[key]
				switch {
				case after.Duplicates == before.Duplicates+1 && after.Stale == before.Stale:
					if !wasDelivered && held[key] == 0 {
						t.Fatalf("%s: dropped as a duplicate, but %+v was neither delivered nor held", what, key)
					}
				case after.Stale == before.Stale+1 && after.Duplicates == before.Duplicates:
					// Stale is checked before anything else, so a Stale verdict
					// after an overflow give-up in this very call means the packet
					// was ahead of next when it arrived (never delivered): the
					// give-up its own arrival forced moved next more than
					// DedupWindow past it. Known finding (see strictFuzz).
					if strictFuzz() && after.Overflows > before.Overflows {
						t.Fatalf("%s: a new packet (ahead of next on arrival, not held) was dropped as Stale after the overflow give-up it caused; released %v", what, res)
					}
				default:
					t.Fatalf("%s: dup=true but Duplicates %d→%d, Stale %d→%d", what, before.Duplicates, after.Duplicates, before.Stale, after.Stale)
				}
				if len(res) != 0 && after.Overflows == before.Overflows {
					// Releases come with dup=true only from an overflow give-up
					// made before the packet turned out to be a duplicate.
					t.Fatalf("%s: dup=true and released %v without an overflow give-up", what, res)
				}
			}
			account(what, res, id, after.Late-before.Late)
			if !dup && !items[id].released {
				// Held now: the buffer owns it.
				held[key]++
			}
		case 2: // abandon
			u := genSeq(k, y, z, bk)
			what.name, what.u = "Abandon", u
			res := b.Abandon(flow, uint32(u), now, out[:0])
			account(what, res, 0, b.Stats().Late-before.Late)
		case 3: // time passes
			now = now.Add(time.Duration(uint16(y)<<8|uint16(z)) * 10 * time.Microsecond)
			continue
		case 4: // the engine's timer
			what.name, what.at = "Expire", now.Sub(t0)
			res := b.Expire(now, out[:0])
			account(what, res, 0, b.Stats().Late-before.Late)
			if d, ok := b.NextDeadline(); ok && !d.After(now) {
				t.Fatalf("%s: NextDeadline %v is not after now", what, d.Sub(t0))
			}
		case 5:
			what.name = "SetHold/SetRecoveryHold"
			b.SetHold(time.Duration(y) * time.Millisecond)
			b.SetRecoveryHold(time.Duration(z) * 2 * time.Millisecond)
		case 6:
			if x%8 == 7 {
				what.name = "Reset"
				res := b.Reset(out[:0])
				account(what, res, 0, b.Stats().Late-before.Late)
				if len(held) != 0 {
					t.Fatalf("%s: %d items not released", what, len(held))
				}
				session++
				clear(haveLast)
				if cfg.StartAtZero {
					for i := range cursor {
						cursor[i] = base - 1
					}
					recent = recent[:0]
				}
			} else {
				what.name = "Flush"
				res := b.Flush(out[:0])
				account(what, res, 0, b.Stats().Late-before.Late)
				if len(held) != 0 {
					t.Fatalf("%s: %d items not released", what, len(held))
				}
				if x%8 >= 5 {
					// An idle session gives its memory back; its flows go on
					// where they were (the model's checks hold across it).
					what.name = "Flush+Release"
					if !b.Release() || !b.Released() {
						t.Fatalf("%s: memory kept with nothing held", what)
					}
				}
			}
		}
		check(what)
	}
	res := b.Flush(out[:0])
	account(fuzzOp{n: -1, name: "final Flush"}, res, 0, 0)
	check(fuzzOp{n: -1, name: "final Flush"})
	if st := b.Stats(); st.Held != 0 || len(held) != 0 {
		t.Fatalf("after the final Flush: Held %d, %d items not released", st.Held, len(held))
	}
	for id := 1; id < len(items); id++ {
		if it := items[id]; !it.dup && !it.released {
			t.Fatalf("item %d %+v was accepted but never released", id, it.key)
		}
	}
}

// checkBufferInternals verifies the structures behind the documented
// behaviour: each flow's held list is sorted strictly ahead of its next seq and
// as long as its count, the counts add up, the free list holds the rest of the
// pool, and each class heap holds exactly the flows holding packets of that
// class, in heap order.
func checkBufferInternals[T any](t *testing.T, what fuzzOp, b *Buffer[T]) {
	if b.Released() {
		if b.held != 0 || b.flows != nil || b.nodes != nil {
			t.Fatalf("%s: released with %d held", what, b.held)
		}
		return
	}
	total := 0
	inHeap := 0
	for fi := range b.flows {
		fs := &b.flows[fi]
		n := int32(0)
		prevOff := uint32(0)
		prev := int32(-1)
		for cur := fs.head; cur >= 0; cur = b.nodes[cur].next {
			nd := &b.nodes[cur]
			if nd.prev != prev {
				t.Fatalf("%s: flow %d: node %d prev %d, want %d", what, fi, cur, nd.prev, prev)
			}
			off := nd.seq - fs.next
			if off == 0 || off >= 1<<31 || (n > 0 && off <= prevOff) {
				t.Fatalf("%s: flow %d: held seq %d at offset %d from next %d (previous offset %d)", what, fi, nd.seq, off, fs.next, prevOff)
			}
			prevOff, prev = off, cur
			if n++; int(n) > len(b.nodes) {
				t.Fatalf("%s: flow %d: cycle in held list", what, fi)
			}
		}
		if fs.tail != prev {
			t.Fatalf("%s: flow %d: tail %d, last node %d", what, fi, fs.tail, prev)
		}
		if n != fs.held {
			t.Fatalf("%s: flow %d: %d nodes listed, held %d", what, fi, n, fs.held)
		}
		total += int(n)
		if (fs.held > 0) != (fs.hidx >= 0) {
			t.Fatalf("%s: flow %d: held %d, heap index %d", what, fi, fs.held, fs.hidx)
		}
		if fs.hidx >= 0 {
			inHeap++
			h := b.heaps[fs.class]
			if int(fs.hidx) >= len(h) || h[fs.hidx] != int32(fi) {
				t.Fatalf("%s: flow %d: heap index %d does not point back (class %d)", what, fi, fs.hidx, fs.class)
			}
		}
	}
	if total != b.held {
		t.Fatalf("%s: lists hold %d, b.held %d", what, total, b.held)
	}
	free := 0
	for cur := b.free; cur >= 0; cur = b.nodes[cur].next {
		if free++; free > len(b.nodes) {
			t.Fatalf("%s: cycle in free list", what)
		}
	}
	if free+total != len(b.nodes) {
		t.Fatalf("%s: %d free + %d held != pool of %d", what, free, total, len(b.nodes))
	}
	hs := 0
	for c := range b.heaps {
		h := b.heaps[c]
		hs += len(h)
		for i := 1; i < len(h); i++ {
			if b.flows[h[i]].since < b.flows[h[(i-1)/2]].since {
				t.Fatalf("%s: class %d heap out of order at %d", what, c, i)
			}
		}
	}
	if hs != inHeap {
		t.Fatalf("%s: heaps hold %d flows, %d flows hold packets", what, hs, inHeap)
	}
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
