package fec

import (
	"testing"
	"time"
)

// benchPipe runs b.N packets through an Encoder (RS(20+2)) and a Decoder, the
// receiver losing source i whenever lose(i): one op is one packet, so allocs/op is
// allocations per packet.
func benchPipe(b *testing.B, lose func(i int) bool) {
	e := NewEncoder(EncoderConfig{})
	e.SetRate(FixedRate(20, 2))
	d := NewDecoder(DecoderConfig{})
	pl := payload(1, 1400)
	frame := make([]byte, 0, 2048)
	var r Repair
	now := t0
	var rebuilt int
	step := func(i int) {
		id := SourceID{Flow: uint16(i % 3), Seq: uint32(i / 3)}
		now = now.Add(10 * time.Microsecond)
		if !lose(i) {
			rebuilt += d.AddSource(id, pl)
		}
		n := e.Add(id, pl, now, true)
		for j := range n {
			frame = e.AppendRepair(frame[:0], j)
			if _, err := ParseRepair(frame, &r); err != nil {
				b.Fatal(err)
			}
			rebuilt += d.AddRepair(&r, now)
		}
	}
	for i := range 1000 { // warm up: codecs built
		step(i)
	}
	b.SetBytes(int64(len(pl)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		step(1000 + i)
	}
	b.StopTimer()
	if st := d.Stats(); st.Unrecoverable != 0 {
		b.Fatalf("stats %+v", st)
	}
	b.ReportMetric(float64(d.Stats().Rebuilt), "rebuilt")
}

// BenchmarkPipeClean: no loss, every block complete (the steady state).
func BenchmarkPipeClean(b *testing.B) { benchPipe(b, func(int) bool { return false }) }

// BenchmarkPipeLoss: one source in 22 lost, so nearly every block is reconstructed.
func BenchmarkPipeLoss(b *testing.B) { benchPipe(b, func(i int) bool { return i%22 == 7 }) }

func TestSteadyStateAllocs(t *testing.T) {
	e := NewEncoder(EncoderConfig{})
	e.SetRate(FixedRate(20, 2))
	d := NewDecoder(DecoderConfig{})
	pl := payload(1, 1400)
	frame := make([]byte, 0, 2048)
	var r Repair
	i := 0
	step := func() {
		id := SourceID{Flow: 1, Seq: uint32(i)}
		i++
		d.AddSource(id, pl)
		for j := range e.Add(id, pl, t0, true) {
			frame = e.AppendRepair(frame[:0], j)
			ParseRepair(frame, &r)
			d.AddRepair(&r, t0)
		}
	}
	for range 100 {
		step()
	}
	// One run is a whole block (20 sources, 2 repairs), so an allocation per
	// block is not rounded away.
	block := func() {
		for range 20 {
			step()
		}
	}
	if a := testing.AllocsPerRun(500, block); a != 0 {
		t.Fatalf("%g allocations per block of 20 packets, want 0", a)
	}
	if d.Stats().Complete < 100 {
		t.Fatalf("stats %+v", d.Stats())
	}
}

// TestReconstructAllocs measures (and reports) what one reconstruction allocates
// inside reedsolomon (no inversion cache: the k×k inverse is built each time).
func TestReconstructAllocs(t *testing.T) {
	ids := make([]SourceID, 20)
	pls := make([][]byte, 20)
	for i := range ids {
		ids[i], pls[i] = SourceID{1, uint32(i)}, payload(i, 1400)
	}
	frames := encodeBlock(t, 20, 2, ids, pls)
	var r Repair
	ParseRepair(frames[0], &r)
	d := NewDecoder(DecoderConfig{})
	blk := uint32(0)
	a := testing.AllocsPerRun(200, func() {
		d.Reset()
		r.Block = blk
		for i := 1; i < 20; i++ {
			d.AddSource(ids[i], pls[i])
		}
		if d.AddRepair(&r, t0) != 1 {
			t.Fatal("not rebuilt")
		}
	})
	t.Logf("RS(20+2), one source lost: %g allocations per reconstruction", a)
}
