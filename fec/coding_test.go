package fec

import (
	"bytes"
	"fmt"
	"math/bits"
	"testing"
	"time"
)

var t0 = time.Unix(1000, 0)

// payload returns a deterministic payload of n bytes for source i.
func payload(i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i*31 + j*7 + 1)
	}
	return b
}

// encodeBlock feeds the sources to a fresh encoder with FixedRate(k, m) and returns
// the ready repair frames.
func encodeBlock(t *testing.T, k, m int, ids []SourceID, pls [][]byte) [][]byte {
	t.Helper()
	e := NewEncoder(EncoderConfig{})
	e.SetRate(FixedRate(k, m))
	ready := 0
	for i := range ids {
		ready = e.Add(ids[i], pls[i], t0, false)
		if i < len(ids)-1 && ready != 0 {
			t.Fatalf("block closed after %d of %d sources", i+1, k)
		}
	}
	if ready != m || e.Ready() != m {
		t.Fatalf("ready %d, want %d", ready, m)
	}
	var frames [][]byte
	for j := range m {
		f := e.AppendRepair(nil, j)
		if len(f) != e.RepairLen() {
			t.Fatalf("frame %d: len %d, RepairLen %d", j, len(f), e.RepairLen())
		}
		frames = append(frames, f)
	}
	return frames
}

// TestEveryErasure drops every subset of the k+m symbols, for small k and m: with
// at most m dropped the decoder rebuilds exactly the dropped sources, byte for byte;
// with more, nothing is rebuilt and the block counts unrecoverable once expired.
func TestEveryErasure(t *testing.T) {
	for _, k := range []int{1, 2, 3, 5} {
		for _, m := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%d+%d", k, m), func(t *testing.T) { everyErasure(t, k, m) })
		}
	}
}

func everyErasure(t *testing.T, k, m int) {
	ids := make([]SourceID, k)
	pls := make([][]byte, k)
	lens := []int{1, 1509, 40, 1200, 2}
	for i := range k {
		ids[i] = SourceID{Flow: 3, Seq: 0xfffffffe + uint32(i)} // wraps
		pls[i] = payload(i, lens[i%len(lens)])
	}
	frames := encodeBlock(t, k, m, ids, pls)
	n := k + m
	for mask := 0; mask < 1<<n; mask++ {
		lost := bits.OnesCount(uint(mask))
		d := NewDecoder(DecoderConfig{})
		lostSrc := map[SourceID][]byte{}
		// Sources first (the usual order), then repairs.
		for i := range k {
			if mask&(1<<i) != 0 {
				lostSrc[ids[i]] = pls[i]
				continue
			}
			if got := d.AddSource(ids[i], pls[i]); got != 0 {
				t.Fatalf("mask %b: AddSource rebuilt %d with no repair", mask, got)
			}
		}
		got := map[SourceID][]byte{}
		for j := range m {
			if mask&(1<<(k+j)) != 0 {
				continue
			}
			var r Repair
			if _, err := ParseRepair(frames[j], &r); err != nil {
				t.Fatal(err)
			}
			nr := d.AddRepair(&r, t0)
			for x := range nr {
				id, p := d.Rebuilt(x)
				if _, dup := got[id]; dup {
					t.Fatalf("mask %b: %v rebuilt twice", mask, id)
				}
				got[id] = bytes.Clone(p)
			}
		}
		st := d.Stats()
		switch {
		case len(lostSrc) == 0:
			if len(got) != 0 || m-lost > 0 && st.Complete != 1 {
				t.Fatalf("mask %b: nothing lost, rebuilt %d, stats %+v", mask, len(got), st)
			}
		case lost <= m:
			if len(got) != len(lostSrc) {
				t.Fatalf("mask %b: rebuilt %d, lost %d sources", mask, len(got), len(lostSrc))
			}
			for id, p := range lostSrc {
				if !bytes.Equal(got[id], p) {
					t.Fatalf("mask %b: %v rebuilt as %d bytes %x…, want %d bytes", mask, id, len(got[id]), head(got[id]), len(p))
				}
			}
			if st.Recovered != 1 || st.Rebuilt != uint64(len(lostSrc)) {
				t.Fatalf("mask %b: stats %+v", mask, st)
			}
		default:
			if len(got) != 0 {
				t.Fatalf("mask %b: %d lost > m, but rebuilt %d", mask, lost, len(got))
			}
			d.Tick(t0.Add(DefaultHorizon - time.Millisecond))
			if d.Stats().Unrecoverable != 0 {
				t.Fatalf("mask %b: unrecoverable before the horizon", mask)
			}
			d.Tick(t0.Add(DefaultHorizon))
			d.Tick(t0.Add(2 * DefaultHorizon))
			want := uint64(1)
			if lost == n || mask>>k == 1<<m-1 {
				want = 0 // no repair arrived: the decoder never heard of the block
			}
			if st := d.Stats(); st.Unrecoverable != want || st.Rebuilt != 0 {
				t.Fatalf("mask %b: stats %+v, want %d unrecoverable", mask, st, want)
			}
		}
	}
}

func head(b []byte) []byte { return b[:min(len(b), 8)] }

// TestRepairBeforeSource: a repair overtakes a source on a faster path; the block
// waits, and the late source lets it rebuild the lost one.
func TestRepairBeforeSource(t *testing.T) {
	ids := []SourceID{{1, 10}, {1, 11}, {1, 12}, {1, 13}}
	pls := [][]byte{payload(0, 100), payload(1, 200), payload(2, 50), payload(3, 300)}
	frames := encodeBlock(t, 4, 1, ids, pls)
	d := NewDecoder(DecoderConfig{})
	d.AddSource(ids[0], pls[0])
	d.AddSource(ids[1], pls[1])
	var r Repair
	if _, err := ParseRepair(frames[0], &r); err != nil {
		t.Fatal(err)
	}
	if n := d.AddRepair(&r, t0); n != 0 {
		t.Fatalf("rebuilt %d with 3 of 4 symbols", n)
	}
	if n := d.AddSource(ids[3], pls[3]); n != 1 {
		t.Fatalf("late source: rebuilt %d, want 1", n)
	}
	id, p := d.Rebuilt(0)
	if id != ids[2] || !bytes.Equal(p, pls[2]) {
		t.Fatalf("rebuilt %v %d bytes", id, len(p))
	}
	// The real source arriving late changes nothing, and the same repair again is ignored.
	if d.AddSource(ids[2], pls[2]) != 0 || d.AddRepair(&r, t0) != 0 {
		t.Fatal("rebuilt again")
	}
	if st := d.Stats(); st.Recovered != 1 || st.Rebuilt != 1 || st.Unrecoverable != 0 || st.Blocks != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestInterleavedFlows: sources of two flows alternate; the repair lists one run
// per flow (shard order = run order), and a lost source of each flow is rebuilt.
func TestInterleavedFlows(t *testing.T) {
	ids := []SourceID{{1, 5}, {2, 70}, {1, 6}, {2, 71}, {1, 7}}
	pls := make([][]byte, len(ids))
	for i := range pls {
		pls[i] = payload(i, 60+i)
	}
	frames := encodeBlock(t, 5, 2, ids, pls)
	var r Repair
	if _, err := ParseRepair(frames[1], &r); err != nil {
		t.Fatal(err)
	}
	if r.NRuns != 2 || r.Runs[0] != (Run{1, 5, 3}) || r.Runs[1] != (Run{2, 70, 2}) || r.K != 5 || r.M != 2 || r.Index != 1 {
		t.Fatalf("repair %+v", r)
	}
	if len(r.Symbol) != LenPrefix+64 {
		t.Fatalf("symbol %d bytes, want %d", len(r.Symbol), LenPrefix+64)
	}
	d := NewDecoder(DecoderConfig{})
	for _, i := range []int{0, 2, 4} {
		d.AddSource(ids[i], pls[i])
	}
	if n := d.AddRepair(&r, t0); n != 0 {
		t.Fatalf("rebuilt %d from 4 of 5 symbols", n)
	}
	var r0 Repair
	if _, err := ParseRepair(frames[0], &r0); err != nil {
		t.Fatal(err)
	}
	if n := d.AddRepair(&r0, t0); n != 2 {
		t.Fatalf("rebuilt %d, want 2", n)
	}
	for x := range 2 {
		id, p := d.Rebuilt(x)
		i := map[SourceID]int{ids[1]: 1, ids[3]: 3}[id]
		if i == 0 || !bytes.Equal(p, pls[i]) {
			t.Fatalf("rebuilt %v wrong", id)
		}
	}
}

func TestMaxDelay(t *testing.T) {
	e := NewEncoder(EncoderConfig{MaxDelay: 10 * time.Millisecond})
	if n := e.Add(SourceID{1, 1}, payload(1, 10), t0, false); n != 0 || e.Stats().Sources != 0 {
		t.Fatal("protected with no rate")
	}
	if _, ok := e.Deadline(); ok {
		t.Fatal("deadline with no block")
	}
	r := FixedRate(10, 3)
	r.M[3] = 2 // a block closed with 3 sources gets 2 repairs
	e.SetRate(r)
	for i := range 3 {
		if e.Add(SourceID{1, uint32(2 + i)}, payload(i, 10), t0.Add(time.Duration(i)*time.Millisecond), false) != 0 {
			t.Fatal("closed early")
		}
	}
	if dl, ok := e.Deadline(); !ok || !dl.Equal(t0.Add(10*time.Millisecond)) {
		t.Fatalf("deadline %v %v", dl, ok)
	}
	if e.Tick(t0.Add(9*time.Millisecond)) != 0 {
		t.Fatal("closed before MaxDelay")
	}
	if n := e.Tick(t0.Add(10 * time.Millisecond)); n != 2 {
		t.Fatalf("Tick at MaxDelay: %d repairs, want 2", n)
	}
	var rp Repair
	if _, err := ParseRepair(e.AppendRepair(nil, 0), &rp); err != nil || rp.K != 3 || rp.M != 2 || rp.Block != 0 {
		t.Fatalf("repair %+v %v", rp, err)
	}
	// An Add after MaxDelay closes the old block first, then opens a new one.
	e.Add(SourceID{1, 5}, payload(5, 10), t0.Add(20*time.Millisecond), false)
	if n := e.Add(SourceID{1, 6}, payload(6, 10), t0.Add(30*time.Millisecond), false); n != 3 {
		t.Fatalf("Add after MaxDelay: %d repairs, want 3 (FixedRate for 1 source)", n)
	}
	if _, err := ParseRepair(e.AppendRepair(nil, 2), &rp); err != nil || rp.K != 1 || rp.Block != 1 || rp.Runs[0] != (Run{1, 5, 1}) {
		t.Fatalf("repair %+v %v", rp, err)
	}
	if st := e.Stats(); st.Blocks != 2 || st.Repairs != 5 || st.Sources != 5 {
		t.Fatalf("stats %+v", st)
	}
}

func TestMaxFrame(t *testing.T) {
	// Room for one run and 102-byte symbols: 11 + 7 + 102 = 120.
	e := NewEncoder(EncoderConfig{MaxFrame: 120})
	e.SetRate(FixedRate(8, 1))
	if e.Add(SourceID{1, 1}, payload(0, 101), t0, false) != 0 || e.Stats().Unprotected != 1 {
		t.Fatal("a payload too long for MaxFrame was protected")
	}
	e.Add(SourceID{1, 1}, payload(0, 100), t0, false)
	e.Add(SourceID{1, 2}, payload(1, 80), t0, false)
	// Another flow needs a second run: the block closes first.
	if n := e.Add(SourceID{2, 1}, payload(2, 10), t0, false); n != 1 {
		t.Fatalf("repairs %d, want 1", n)
	}
	f := e.AppendRepair(nil, 0)
	if len(f) != 120 {
		t.Fatalf("frame %d bytes, want 120", len(f))
	}
}

func TestStaleAndInconsistentRepairs(t *testing.T) {
	d := NewDecoder(DecoderConfig{Blocks: 4})
	mk := func(block uint32, k int) *Repair {
		r := &Repair{Block: block, K: k, M: 1, NRuns: 1, Symbol: make([]byte, 10)}
		r.Runs[0] = Run{Flow: 1, Seq: block * 100, Count: uint8(k)}
		return r
	}
	d.AddRepair(mk(10, 2), t0)
	d.AddRepair(mk(14, 2), t0) // same slot, newer: block 10 given up
	if st := d.Stats(); st.Unrecoverable != 1 || st.Blocks != 2 {
		t.Fatalf("stats %+v", st)
	}
	d.AddRepair(mk(10, 2), t0) // 4 behind the newest: stale
	r := mk(14, 3)             // disagrees with block 14
	d.AddRepair(r, t0)
	big := mk(15, 1)
	big.Symbol = make([]byte, LenPrefix+DefaultMaxPayload+1)
	d.AddRepair(big, t0)
	if st := d.Stats(); st.Rejected != 3 || st.Blocks != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestStore checks the source index against a map through many evictions.
func TestStore(t *testing.T) {
	s := newStore(128, 16)
	ref := map[SourceID]bool{}
	var order []SourceID
	for i := range 20000 {
		id := SourceID{Flow: uint16(i % 7), Seq: uint32(i*13) % 5000}
		if ref[id] {
			continue
		}
		s.put(id, []byte{byte(i)})
		ref[id] = true
		order = append(order, id)
		if len(order) > 128 {
			delete(ref, order[0])
			order = order[1:]
		}
		if i%97 == 0 {
			for j := range 5000 {
				x := SourceID{Flow: uint16(j % 7), Seq: uint32(j)}
				if (s.get(x) >= 0) != ref[x] {
					t.Fatalf("step %d: %v present %v, want %v", i, x, s.get(x) >= 0, ref[x])
				}
			}
		}
	}
}

// TestBulkCredit: short bulk blocks earn Rate.BulkCap per source and get one
// repair whenever the credit reaches one, so a slow flow's 3-source blocks get
// a full block's repairs per source (1 in 16), not one each (1 in 3) nor none.
func TestBulkCredit(t *testing.T) {
	count := func(r Rate) (repairs int) {
		e := NewEncoder(EncoderConfig{BulkDelay: 25 * time.Millisecond})
		e.SetRate(r)
		now := t0
		for seq := uint32(0); seq < 480; seq++ {
			repairs += e.Add(SourceID{1, seq}, payload(int(seq), 100), now, true)
			if seq%3 == 2 { // the block's deadline passes every 3 sources
				now = now.Add(25 * time.Millisecond)
				repairs += e.Tick(now)
			}
		}
		return repairs
	}
	r := Choose(Bulk, 0.01, 1, 1) // RS(32+2): Bulk[3] = 0, M[3] ≥ 1
	if r.Bulk[3] != 0 || r.M[3] == 0 {
		t.Fatalf("Bulk[3] = %d, M[3] = %d", r.Bulk[3], r.M[3])
	}
	// 160 blocks of 3 at 1/16 per source: 480/16 = 30 repairs, each block at most one.
	if got := count(r); got != 30 {
		t.Errorf("%d repairs for 480 sources in blocks of 3, want 30", got)
	}
	r.BulkCap = 0
	if got := count(r); got != 0 {
		t.Errorf("without BulkCap: %d repairs, want Bulk[3] = 0 each", got)
	}
}

// TestBulkDelay: a block of bulk sources waits BulkDelay and sends Rate.Bulk
// repairs; latency-sensitive sources fill blocks of their own, which close
// MaxDelay after their first source with Rate.M repairs and leave the bulk
// block open.
func TestBulkDelay(t *testing.T) {
	e := NewEncoder(EncoderConfig{MaxDelay: 10 * time.Millisecond, BulkDelay: 25 * time.Millisecond})
	r := FixedRate(10, 3)
	r.M[2], r.Bulk[2] = 3, 1
	r.M[1], r.Bulk[1] = 2, 1
	e.SetRate(r)
	e.Add(SourceID{1, 1}, payload(1, 10), t0, true)
	e.Add(SourceID{1, 2}, payload(2, 10), t0.Add(5*time.Millisecond), true)
	if dl, _ := e.Deadline(); !dl.Equal(t0.Add(25 * time.Millisecond)) {
		t.Fatalf("bulk deadline %v, want t0+25ms", dl.Sub(t0))
	}
	if e.Tick(t0.Add(24*time.Millisecond)) != 0 {
		t.Fatal("bulk block closed before BulkDelay")
	}
	if n := e.Tick(t0.Add(25 * time.Millisecond)); n != 1 {
		t.Fatalf("bulk block of 2: %d repairs, want Bulk[2] = 1", n)
	}
	// Bulk at t1 and t1+1 ms, real-time at t1+5 and t1+6 ms: the real-time
	// block closes at t1+15 with M[2] repairs over flow 2 alone, the bulk one
	// at t1+25 with Bulk[2].
	t1 := t0.Add(time.Second)
	e.Add(SourceID{1, 3}, payload(3, 10), t1, true)
	e.Add(SourceID{1, 4}, payload(4, 10), t1.Add(time.Millisecond), true)
	e.Add(SourceID{2, 1}, payload(5, 10), t1.Add(5*time.Millisecond), false)
	e.Add(SourceID{2, 2}, payload(6, 10), t1.Add(6*time.Millisecond), false)
	if dl, _ := e.Deadline(); !dl.Equal(t1.Add(15 * time.Millisecond)) {
		t.Fatalf("deadline %v, want t1+15ms (the real-time block's)", dl.Sub(t1))
	}
	if n := e.Tick(t1.Add(15 * time.Millisecond)); n != 3 || e.out.K != 2 || e.out.NRuns != 1 || e.out.Runs[0].Flow != 2 {
		t.Fatalf("real-time block: %d repairs over %d sources, runs %v; want M[2] = 3 over flow 2's two",
			n, e.out.K, e.out.Runs[:e.out.NRuns])
	}
	if e.ReadyBulk() {
		t.Error("the real-time block's repairs are counted bulk")
	}
	if n := e.Tick(t1.Add(15 * time.Millisecond)); n != 0 {
		t.Fatalf("bulk block closed with the real-time one (%d repairs)", n)
	}
	if dl, _ := e.Deadline(); !dl.Equal(t1.Add(25 * time.Millisecond)) {
		t.Fatalf("bulk deadline %v, want t1+25ms", dl.Sub(t1))
	}
	if n := e.Tick(t1.Add(25 * time.Millisecond)); n != 1 || e.out.Runs[0].Flow != 1 {
		t.Fatalf("bulk block: %d repairs (flow %d), want Bulk[2] = 1 over flow 1", n, e.out.Runs[0].Flow)
	}
	if !e.ReadyBulk() {
		t.Error("the bulk block's repairs are not counted bulk")
	}
	// Both due at one tick: one block per call, each numbered when it closes.
	t2 := t1.Add(time.Second)
	e.Add(SourceID{1, 5}, payload(7, 10), t2, true)
	e.Add(SourceID{2, 3}, payload(8, 10), t2, false)
	var got []int
	var blocks []uint32
	for n := e.Tick(t2.Add(30 * time.Millisecond)); n > 0; n = e.Tick(t2.Add(30 * time.Millisecond)) {
		got, blocks = append(got, n), append(blocks, e.out.Block)
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 2 || blocks[1] != blocks[0]+1 {
		t.Fatalf("both due: repairs %v in blocks %v, want [1 2] (Bulk[1], M[1]) in consecutive blocks", got, blocks)
	}
	if _, open := e.Deadline(); open {
		t.Fatal("a block is still open")
	}
}

// An encoder holds no symbol memory until a block opens, and gives it back
// (with the ledger) between blocks; blocks made after a Release are numbered
// on, decode, and are in the ledger.
func TestEncoderRelease(t *testing.T) {
	e := NewEncoder(EncoderConfig{})
	now := time.Now()
	if e.mem != nil {
		t.Fatal("symbol memory taken before any block")
	}
	e.Add(SourceID{Flow: 1, Seq: 0}, []byte("before the rate"), now, true)
	if e.mem != nil {
		t.Fatal("symbol memory taken with repairs off")
	}
	e.SetRate(FixedRate(2, 1))
	d := NewDecoder(DecoderConfig{})
	for round := range 3 {
		seq := uint32(10 * round)
		a, b := []byte(fmt.Sprintf("first %d", round)), []byte(fmt.Sprintf("second of round %d", round))
		e.Add(SourceID{Flow: 1, Seq: seq}, a, now, true)
		if e.Release() {
			t.Fatalf("round %d: released with a block open", round)
		}
		if n := e.Add(SourceID{Flow: 1, Seq: seq + 1}, b, now, true); n != 1 {
			t.Fatalf("round %d: %d repairs ready, want 1", round, n)
		}
		var r Repair
		if _, err := ParseRepair(e.AppendRepair(nil, 0), &r); err != nil {
			t.Fatal(err)
		}
		if r.Block != uint32(round) {
			t.Fatalf("round %d: block %d", round, r.Block)
		}
		// The second source is lost: the first and the repair rebuild it.
		d.AddSource(SourceID{Flow: 1, Seq: seq}, a)
		if n := d.AddRepair(&r, now); n != 1 {
			t.Fatalf("round %d: %d rebuilt", round, n)
		}
		if id, got := d.Rebuilt(0); id.Seq != seq+1 || string(got) != string(b) {
			t.Fatalf("round %d: rebuilt %v %q", round, id, got)
		}
		if _, _, ok := e.Lost(SourceID{Flow: 1, Seq: seq + 1}); !ok {
			t.Fatalf("round %d: the ledger does not know the block just closed", round)
		}
		if !e.Release() || e.mem != nil || e.Ready() != 0 || e.ledger.entries != nil {
			t.Fatalf("round %d: memory kept between blocks", round)
		}
		if _, _, ok := e.Lost(SourceID{Flow: 1, Seq: seq}); ok {
			t.Fatalf("round %d: the ledger knows a block from before the release", round)
		}
	}
}
