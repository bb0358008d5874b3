package fec

import (
	"encoding/binary"
	"errors"

	"github.com/braid-vpn/braid/wire"
)

var be = binary.BigEndian

// Limits of a block.
const (
	// MaxK is the largest number of source symbols in a block.
	MaxK = 32
	// MaxM is the largest number of repair symbols of a block.
	MaxM = 8
	// LenPrefix is the length prefix in front of every source symbol: the symbol of
	// a source is len u16 | payload | zeros up to the block's symbol length, so a
	// rebuilt symbol tells its own true length.
	LenPrefix = 2
)

// Repair frame layout (type byte included), all integers big-endian:
//
//	0      1           5     6     7       8       9            11
//	| 0x08 | block u32 | k u8| m u8| idx u8| runs u8| symlen u16 | runs … | symbol (symlen)
//
// followed by runs × RunLen bytes, each run
//
//	0          2          6
//	| flow u16 | seq u32  | count u8 |
//
// naming the sources flow:seq, flow:seq+1, …, flow:seq+count-1. The runs in frame
// order list the block's k sources in shard order: source shard i is the i-th id of
// the concatenated runs. idx is the repair's index, 0 ≤ idx < m (shard k+idx).
const (
	RepairHeaderLen = 1 + 4 + 1 + 1 + 1 + 1 + 2
	RunLen          = 2 + 4 + 1
)

// Parse errors.
var (
	ErrShort = errors.New("fec: truncated repair frame")
	ErrBad   = errors.New("fec: malformed repair frame")
)

// SourceID names a source symbol: the DATA frame's flow and flow sequence number.
type SourceID struct {
	Flow uint16
	Seq  uint32
}

// Run is Count consecutive sequence numbers of one flow, starting at Seq.
type Run struct {
	Flow  uint16
	Seq   uint32
	Count uint8
}

// Repair is a decoded repair frame. Symbol aliases the parsed buffer.
type Repair struct {
	Block  uint32
	K      int // source symbols in the block, 1..MaxK
	M      int // repair symbols of the block, 1..MaxM
	Index  int // this repair's index, 0..M-1
	NRuns  int // runs used in Runs, 1..K
	Runs   [MaxK]Run
	Symbol []byte // the repair symbol, LenPrefix+1 .. 65535 bytes
}

// RepairLen is the length of a repair frame with nruns runs and a symbol of symLen
// bytes (symLen = LenPrefix + the block's longest payload).
func RepairLen(nruns, symLen int) int { return RepairHeaderLen + nruns*RunLen + symLen }

// Len is the frame length of r.
func (r *Repair) Len() int { return RepairLen(r.NRuns, len(r.Symbol)) }

// ID returns the id of source shard i of r's block (0 ≤ i < K), or false.
func (r *Repair) ID(i int) (SourceID, bool) {
	for _, run := range r.Runs[:r.NRuns] {
		if i < int(run.Count) {
			return SourceID{Flow: run.Flow, Seq: run.Seq + uint32(i)}, true
		}
		i -= int(run.Count)
	}
	return SourceID{}, false
}

// AppendRepair appends r as a repair frame (type byte included). It does not check r;
// the Encoder only builds valid ones.
func AppendRepair(b []byte, r *Repair) []byte {
	var h [RepairHeaderLen]byte
	h[0] = wire.FrameRepair
	be.PutUint32(h[1:], r.Block)
	h[5] = uint8(r.K)
	h[6] = uint8(r.M)
	h[7] = uint8(r.Index)
	h[8] = uint8(r.NRuns)
	be.PutUint16(h[9:], uint16(len(r.Symbol)))
	b = append(b, h[:]...)
	for _, run := range r.Runs[:r.NRuns] {
		var f [RunLen]byte
		be.PutUint16(f[0:], run.Flow)
		be.PutUint32(f[2:], run.Seq)
		f[6] = run.Count
		b = append(b, f[:]...)
	}
	return append(b, r.Symbol...)
}

// ParseRepair decodes the repair frame at the start of b (b[0] is the type byte) into
// r and returns the rest of b, like wire.NextFrame. r.Symbol aliases b. It never
// allocates, never reads past b and checks every field: 1 ≤ k ≤ MaxK, 1 ≤ m ≤ MaxM,
// idx < m, 1 ≤ runs ≤ k, every count ≥ 1, counts summing to k, symlen > LenPrefix.
func ParseRepair(b []byte, r *Repair) (rest []byte, err error) {
	if len(b) < RepairHeaderLen {
		return nil, ErrShort
	}
	if b[0] != wire.FrameRepair {
		return nil, ErrBad
	}
	r.Block = be.Uint32(b[1:])
	r.K, r.M, r.Index, r.NRuns = int(b[5]), int(b[6]), int(b[7]), int(b[8])
	symLen := int(be.Uint16(b[9:]))
	if r.K < 1 || r.K > MaxK || r.M < 1 || r.M > MaxM || r.Index >= r.M ||
		r.NRuns < 1 || r.NRuns > r.K || symLen <= LenPrefix {
		return nil, ErrBad
	}
	n := RepairLen(r.NRuns, symLen)
	if len(b) < n {
		return nil, ErrShort
	}
	p := b[RepairHeaderLen:]
	sum := 0
	for i := range r.NRuns {
		run := Run{Flow: be.Uint16(p), Seq: be.Uint32(p[2:]), Count: p[6]}
		if run.Count == 0 {
			return nil, ErrBad
		}
		sum += int(run.Count)
		r.Runs[i] = run
		p = p[RunLen:]
	}
	if sum != r.K {
		return nil, ErrBad
	}
	r.Symbol = p[:symLen:symLen]
	return b[n:], nil
}
