package fec

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/braid-vpn/braid/wire"
)

// A repair of block 0x01020304, k=3 m=2 idx=1, runs 7:100..101 and 9:5, symbol of 4 bytes.
const vectorHex = "08" + "01020304" + "03" + "02" + "01" + "02" + "0004" +
	"0007" + "00000064" + "02" +
	"0009" + "00000005" + "01" +
	"deadbeef"

func vectorRepair() Repair {
	r := Repair{Block: 0x01020304, K: 3, M: 2, Index: 1, NRuns: 2, Symbol: []byte{0xde, 0xad, 0xbe, 0xef}}
	r.Runs[0] = Run{Flow: 7, Seq: 100, Count: 2}
	r.Runs[1] = Run{Flow: 9, Seq: 5, Count: 1}
	return r
}

func TestRepairVector(t *testing.T) {
	want, _ := hex.DecodeString(vectorHex)
	r := vectorRepair()
	got := AppendRepair([]byte{0xaa}, &r)
	if !bytes.Equal(got[1:], want) || got[0] != 0xaa {
		t.Fatalf("AppendRepair = %x, want aa%x", got, want)
	}
	if r.Len() != len(want) || RepairLen(2, 4) != 11+14+4 {
		t.Fatalf("Len %d, want %d", r.Len(), len(want))
	}
	var p Repair
	rest, err := ParseRepair(append(want, wire.FramePing), &p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rest, []byte{wire.FramePing}) {
		t.Fatalf("rest = %x", rest)
	}
	if p.Block != r.Block || p.K != 3 || p.M != 2 || p.Index != 1 || p.NRuns != 2 ||
		p.Runs[0] != r.Runs[0] || p.Runs[1] != r.Runs[1] || !bytes.Equal(p.Symbol, r.Symbol) {
		t.Fatalf("parsed %+v", p)
	}
	ids := []SourceID{{7, 100}, {7, 101}, {9, 5}}
	for i, w := range ids {
		if id, ok := p.ID(i); !ok || id != w {
			t.Fatalf("ID(%d) = %v %v, want %v", i, id, ok, w)
		}
	}
	if _, ok := p.ID(3); ok {
		t.Fatal("ID(3) ok")
	}
}

func TestParseRepairRejects(t *testing.T) {
	good, _ := hex.DecodeString(vectorHex)
	mut := func(i int, v byte) []byte {
		b := bytes.Clone(good)
		b[i] = v
		return b
	}
	cases := map[string]struct {
		b   []byte
		err error
	}{
		"empty":          {nil, ErrShort},
		"header only":    {good[:RepairHeaderLen], ErrShort},
		"symbol cut":     {good[:len(good)-1], ErrShort},
		"wrong type":     {mut(0, wire.FrameData), ErrBad},
		"k 0":            {mut(5, 0), ErrBad},
		"k too big":      {mut(5, MaxK+1), ErrBad},
		"m 0":            {mut(6, 0), ErrBad},
		"m too big":      {mut(6, MaxM+1), ErrBad},
		"idx = m":        {mut(7, 2), ErrBad},
		"no runs":        {mut(8, 0), ErrBad},
		"runs > k":       {mut(8, 4), ErrBad},
		"symlen 2":       {mut(10, 2), ErrBad},
		"count 0":        {mut(11+6, 0), ErrBad},
		"counts ≠ k":     {mut(11+6, 3), ErrBad},
		"counts ≠ k (2)": {mut(11+7+6, 2), ErrBad},
	}
	for name, c := range cases {
		var r Repair
		if _, err := ParseRepair(c.b, &r); err != c.err {
			t.Errorf("%s: err %v, want %v", name, err, c.err)
		}
	}
}

func FuzzParseRepair(f *testing.F) {
	good, _ := hex.DecodeString(vectorHex)
	f.Add(good)
	f.Add(good[:12])
	f.Add([]byte{wire.FrameRepair})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Repair
		rest, err := ParseRepair(b, &r)
		if err != nil {
			return
		}
		n := len(b) - len(rest)
		if n != r.Len() {
			t.Fatalf("consumed %d, Len %d", n, r.Len())
		}
		// A parsed frame re-encodes to the same bytes, and every id is defined.
		if out := AppendRepair(nil, &r); !bytes.Equal(out, b[:n]) {
			t.Fatalf("re-encoded %x, parsed %x", out, b[:n])
		}
		for i := range r.K {
			if _, ok := r.ID(i); !ok {
				t.Fatalf("ID(%d) undefined, k %d", i, r.K)
			}
		}
	})
}
