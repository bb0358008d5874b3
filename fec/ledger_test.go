package fec

import "testing"

func TestLedgerLost(t *testing.T) {
	var l Ledger
	if _, _, ok := l.Lost(SourceID{Flow: 1, Seq: 5}); ok {
		t.Fatal("an empty ledger found a block")
	}
	// Block 7: flow 1 seqs 10..19 and flow 2 seqs 0xfffffffe..1 (across the
	// wrap), 2 repairs. Block 8: flow 1 seqs 20..29, 1 repair.
	l.Record(7, []Run{{Flow: 1, Seq: 10, Count: 10}, {Flow: 2, Seq: 0xfffffffe, Count: 4}}, 2)
	l.Record(8, []Run{{Flow: 1, Seq: 20, Count: 10}}, 1)
	for _, c := range []struct {
		id             SourceID
		block          uint32
		beyond, wantOK bool
	}{
		{SourceID{1, 12}, 7, false, true},
		{SourceID{2, 1}, 7, false, true},   // second loss of block 7: 2 repairs cover it
		{SourceID{1, 29}, 8, false, true},  // first of block 8
		{SourceID{1, 19}, 7, true, true},   // third of block 7: beyond its 2 repairs
		{SourceID{1, 20}, 8, true, true},   // second of block 8: beyond its 1
		{SourceID{1, 30}, 0, false, false}, // in no block (the open one)
		{SourceID{2, 2}, 0, false, false},  // just past flow 2's run
		{SourceID{3, 12}, 0, false, false}, // another flow
	} {
		block, beyond, ok := l.Lost(c.id)
		if ok != c.wantOK || ok && (block != c.block || beyond != c.beyond) {
			t.Errorf("Lost(%+v) = block %d beyond %v ok %v, want %d %v %v", c.id, block, beyond, ok, c.block, c.beyond, c.wantOK)
		}
	}
	// The ledger remembers the last ledgerBlocks blocks: block 7 is forgotten
	// after that many more.
	for i := range ledgerBlocks - 1 {
		l.Record(uint32(9+i), []Run{{Flow: 9, Seq: uint32(100 * i), Count: 5}}, 1)
	}
	if _, _, ok := l.Lost(SourceID{1, 15}); ok {
		t.Error("a block older than the ledger's span was found")
	}
	if b, _, ok := l.Lost(SourceID{1, 25}); !ok || b != 8 {
		t.Errorf("block 8, the oldest kept, not found: %d %v", b, ok)
	}
	l.Reset()
	if _, _, ok := l.Lost(SourceID{9, 100}); ok {
		t.Error("Reset kept a block")
	}
}

// The encoder records every block it closes with repairs, and only those.
func TestEncoderLost(t *testing.T) {
	e := NewEncoder(EncoderConfig{})
	e.SetRate(FixedRate(4, 1))
	payload := make([]byte, 100)
	for seq := uint32(0); seq < 8; seq++ {
		e.Add(SourceID{Flow: 3, Seq: seq}, payload, t0, true)
	}
	e.Add(SourceID{Flow: 3, Seq: 8}, payload, t0, true) // opens a third block
	if b, beyond, ok := e.Lost(SourceID{3, 5}); !ok || b != 1 || beyond {
		t.Fatalf("Lost(seq 5) = %d %v %v, want block 1, within its repairs", b, beyond, ok)
	}
	if b, beyond, ok := e.Lost(SourceID{3, 6}); !ok || b != 1 || !beyond {
		t.Fatalf("Lost(seq 6) = %d %v %v, want block 1 beyond its one repair", b, beyond, ok)
	}
	if _, _, ok := e.Lost(SourceID{3, 8}); ok {
		t.Fatal("a source of the open block was found")
	}
	if n := testing.AllocsPerRun(100, func() { e.Lost(SourceID{3, 2}) }); n != 0 {
		t.Fatalf("Lost allocates %.1f times", n)
	}
	e.Reset()
	if _, _, ok := e.Lost(SourceID{3, 1}); ok {
		t.Fatal("Reset kept the ledger")
	}
}
