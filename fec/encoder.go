package fec

import (
	"time"

	"github.com/braid-vpn/braid/wire"
)

// Defaults.
const (
	// DefaultMaxPayload is the largest payload protected by default: a DATA frame
	// header and a 1500-byte inner packet.
	DefaultMaxPayload = wire.DataFrameHeaderLen + 1500
	// DefaultMaxDelay is how long a source of a latency-sensitive flow waits for
	// its block to close by default: a real-time flow's repairs come soon.
	DefaultMaxDelay = 10 * time.Millisecond
	// DefaultBulkDelay is how long a source of a bulk (TCP) flow waits for its
	// block to close by default. A TCP flow waits for its gaps anyway (the
	// receiver's recovery hold), and a repair's cost is per block: blocks closed
	// by 10 ms at 10–20 Mbit/s hold a dozen sources, so one repair each is 8 %
	// overhead and two 16 %, against the bulk target of 2 × loss + 5 %.
	DefaultBulkDelay = 25 * time.Millisecond
)

// Rate is what the controller tells the encoder: blocks of up to K sources, and
// M[n] repairs for a block that closes with n sources (M[K] for a full one; a block
// closed early by its delay needs fewer), Bulk[n] for a block of bulk sources
// only (see Add). K == 0 or M[n] == 0 means no repairs.
//
// BulkCap > 0 is the repairs per bulk source (a full block's M[K]/K): blocks of
// bulk sources then earn it per source and spend one per repair, so that the
// short blocks of a slow flow (3 sources in a block's 25 ms at 1.5 Mbit/s),
// whose Bulk[n] rounds down to none, still get one repair now and then (at most
// M[n]), and the repairs per source stay those of a full block, within the
// overhead cap, however short the blocks. "At least one per block" spent
// 15–23 % of a 1.5 Mbit/s download on repairs at 0.3 % loss.
type Rate struct {
	K       int
	M, Bulk [MaxK + 1]uint8
	BulkCap float64
}

// FixedRate is blocks of k sources with m repairs, also for blocks closed early.
func FixedRate(k, m int) Rate {
	var r Rate
	if k < 1 || m < 1 {
		return r
	}
	r.K = min(k, MaxK)
	for n := 1; n <= r.K; n++ {
		r.M[n] = uint8(min(m, MaxM))
	}
	r.Bulk = r.M
	return r
}

// Off reports whether r sends no repairs.
func (r Rate) Off() bool { return r.K < 1 || r.M[r.K] == 0 }

// Overhead is repairs per source for a full block.
func (r Rate) Overhead() float64 {
	if r.Off() {
		return 0
	}
	return float64(r.M[r.K]) / float64(r.K)
}

// EncoderConfig configures an Encoder; zero fields take the defaults.
type EncoderConfig struct {
	// MaxDelay closes a block once a latency-sensitive source in it is this old
	// (DefaultMaxDelay), BulkDelay once a bulk source is (DefaultBulkDelay; never
	// less than MaxDelay). See Add.
	MaxDelay, BulkDelay time.Duration
	// MaxPayload: longer payloads are not protected (DefaultMaxPayload). The
	// receiver's DecoderConfig.MaxPayload must be at least as large.
	MaxPayload int
	// MaxFrame, if > 0, bounds a repair frame's length: a block closes before a
	// source that would make its repair frames longer, and a payload whose repair
	// would not fit even alone is not protected. Set it to the room for one frame
	// in a datagram on the path that carries repairs.
	MaxFrame int
}

// EncoderStats counts what an Encoder did.
type EncoderStats struct {
	Sources     uint64 // payloads put into blocks
	Unprotected uint64 // payloads not protected: too long for MaxPayload or MaxFrame
	Blocks      uint64 // blocks closed with repairs
	Repairs     uint64 // repair frames made ready
}

// Encoder builds the sender's blocks and their repair symbols. It is not safe for
// concurrent use (the engine calls it under the peer lock). All memory is allocated
// by NewEncoder; Add, Tick and AppendRepair do not allocate (AppendRepair only when
// its destination lacks room). A (k, m) used for the first time builds its shared
// codec once.
type Encoder struct {
	cfg  EncoderConfig
	rate Rate // takes effect when the next block opens

	// The open block.
	open    bool
	r       Rate // its rate (r.K sources close it)
	urgent  bool // a source in it is not bulk: r.M, not r.Bulk, applies
	n       int
	closeBy time.Time    // the earliest of its sources' deadlines
	maxLen  int          // longest payload
	src     [MaxK][]byte // LenPrefix | payload, capacity LenPrefix+MaxPayload
	runOf   [MaxK]uint8  // the run each source belongs to
	posOf   [MaxK]uint8  // its position in the run
	runs    [MaxK]Run
	nruns   int

	nextBlock uint32
	ledger    Ledger  // the blocks closed lately, for Lost
	credit    float64 // repairs earned by bulk blocks and not spent (Rate.BulkCap), ≤ 1

	// The last closed block: its repair frames until the next close.
	out    Repair
	ready  int
	parity [MaxM][]byte
	shards [MaxK + MaxM][]byte

	stats EncoderStats
}

// NewEncoder returns an encoder that sends no repairs until SetRate.
func NewEncoder(cfg EncoderConfig) *Encoder {
	if cfg.MaxDelay <= 0 {
		cfg.MaxDelay = DefaultMaxDelay
	}
	if cfg.BulkDelay <= 0 {
		cfg.BulkDelay = DefaultBulkDelay
	}
	cfg.BulkDelay = max(cfg.BulkDelay, cfg.MaxDelay)
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = DefaultMaxPayload
	}
	cfg.MaxPayload = min(cfg.MaxPayload, 65535-LenPrefix)
	e := &Encoder{cfg: cfg}
	sz := LenPrefix + cfg.MaxPayload
	arena := make([]byte, (MaxK+MaxM)*sz)
	for i := range e.src {
		e.src[i] = arena[i*sz : i*sz : (i+1)*sz]
	}
	for i := range e.parity {
		o := (MaxK + i) * sz
		e.parity[i] = arena[o : o : o+sz]
	}
	return e
}

// SetRate sets the rate for blocks opened from now on; the open block keeps its own.
func (e *Encoder) SetRate(r Rate) {
	r.K = min(max(r.K, 0), MaxK)
	for n := range r.M {
		r.M[n] = min(r.M[n], MaxM)
		r.Bulk[n] = min(r.Bulk[n], MaxM)
	}
	e.rate = r
}

// Rate returns the rate set last.
func (e *Encoder) Rate() Rate { return e.rate }

// Stats returns the counters.
func (e *Encoder) Stats() EncoderStats { return e.stats }

// Deadline reports when Tick must next be called to close the open block in time,
// or false if no block is open.
func (e *Encoder) Deadline() (time.Time, bool) {
	if !e.open {
		return time.Time{}, false
	}
	if e.n >= e.r.K {
		return time.Time{}, true // now
	}
	return e.closeBy, true
}

// Add puts a copy of payload, the source named id, into the open block (opening one
// if the rate asks for repairs). It returns the number of repair frames made ready by
// a block that closed during the call (0 if none): read them with AppendRepair before
// the next Add or Tick, which may close another block and replace them.
//
// A block closes when it holds K sources, when one of its sources has waited its
// delay (checked here and in Tick: BulkDelay for a bulk source, MaxDelay for
// another), or before a source that would make its repair frames longer than
// MaxFrame. So a block of bulk flows alone gathers more sources per repair, and a
// real-time source in it still gets its repairs within MaxDelay. A block closed
// with n sources sends Rate.Bulk[n] repairs if all are bulk, else Rate.M[n].
func (e *Encoder) Add(id SourceID, payload []byte, now time.Time, bulk bool) int {
	if len(payload) == 0 || len(payload) > e.cfg.MaxPayload ||
		e.cfg.MaxFrame > 0 && RepairLen(1, LenPrefix+len(payload)) > e.cfg.MaxFrame {
		e.stats.Unprotected++
		return e.Tick(now)
	}
	closed := 0
	if e.open {
		run, _ := e.runFor(id)
		nruns := e.nruns
		if run == e.nruns {
			nruns++
		}
		if e.n >= e.r.K || !now.Before(e.closeBy) ||
			e.cfg.MaxFrame > 0 && RepairLen(nruns, LenPrefix+max(e.maxLen, len(payload))) > e.cfg.MaxFrame {
			closed = e.close()
		}
	}
	if !e.open {
		if e.rate.Off() {
			return closed
		}
		e.open, e.r, e.n, e.nruns, e.maxLen = true, e.rate, 0, 0, 0
		e.closeBy, e.urgent = now.Add(e.cfg.BulkDelay), false
	}
	wait := e.cfg.BulkDelay
	if !bulk {
		wait, e.urgent = e.cfg.MaxDelay, true
	}
	if by := now.Add(wait); by.Before(e.closeBy) {
		e.closeBy = by
	}
	run, pos := e.runFor(id)
	if run == e.nruns {
		e.runs[run] = Run{Flow: id.Flow, Seq: id.Seq}
		e.nruns++
	}
	e.runs[run].Count++
	i := e.n
	e.runOf[i], e.posOf[i] = uint8(run), uint8(pos)
	s := e.src[i][:LenPrefix+len(payload)]
	be.PutUint16(s, uint16(len(payload)))
	copy(s[LenPrefix:], payload)
	e.src[i] = s
	e.n++
	e.maxLen = max(e.maxLen, len(payload))
	e.stats.Sources++
	if e.n >= e.r.K && closed == 0 {
		closed = e.close()
	}
	return closed
}

// runFor returns the run id extends (and its position there), or e.nruns for a new
// run. Runs group a flow's consecutive sequence numbers, so a block of interleaved
// flows still needs one run per flow.
func (e *Encoder) runFor(id SourceID) (run, pos int) {
	for r := range e.runs[:e.nruns] {
		rn := &e.runs[r]
		if rn.Flow == id.Flow && rn.Count < 255 && rn.Seq+uint32(rn.Count) == id.Seq {
			return r, int(rn.Count)
		}
	}
	return e.nruns, 0
}

// Tick closes the open block if it is full or one of its sources has waited its
// delay, and returns the number of repair frames made ready, as Add.
func (e *Encoder) Tick(now time.Time) int {
	if e.open && (e.n >= e.r.K || !now.Before(e.closeBy)) {
		return e.close()
	}
	return 0
}

// Flush closes the open block whatever its age (e.g. before the path goes idle).
func (e *Encoder) Flush() int {
	if e.open {
		return e.close()
	}
	return 0
}

// close encodes the open block and makes its repairs ready.
func (e *Encoder) close() int {
	e.open = false
	e.ready = 0
	n := e.n
	m := int(e.r.Bulk[min(n, e.r.K)])
	if e.urgent {
		m = int(e.r.M[min(n, e.r.K)])
	} else if e.r.BulkCap > 0 {
		e.credit += e.r.BulkCap*float64(n) - float64(m)
		if e.credit >= 1 && m < int(e.r.M[min(n, e.r.K)]) {
			m++
			e.credit--
		}
		e.credit = min(e.credit, 1) // no hoard from full blocks or idle time
	}
	if n == 0 || m == 0 {
		return 0
	}
	rs, err := codecFor(n, m)
	if err != nil {
		return 0 // cannot happen: 1 ≤ n ≤ MaxK, 1 ≤ m ≤ MaxM
	}
	symLen := LenPrefix + e.maxLen
	// Shard order is run order: run r's sources take shards start[r] … .
	var start [MaxK]int
	for r, s := 1, 0; r < e.nruns; r++ {
		s += int(e.runs[r-1].Count)
		start[r] = s
	}
	for i := range n {
		s := e.src[i][:symLen]
		clear(s[LenPrefix+int(be.Uint16(s)):])
		e.shards[start[e.runOf[i]]+int(e.posOf[i])] = s
	}
	for j := range m {
		e.shards[n+j] = e.parity[j][:symLen]
		clear(e.shards[n+j])
	}
	// EncodeIdx per source rather than Encode: Encode's fused kernels take a
	// scratch matrix from a sync.Pool, which allocates on every Put and after
	// every GC; EncodeIdx on ~1500-byte shards runs the plain SIMD multiply-add
	// and allocates nothing.
	for i := range n {
		if err := rs.EncodeIdx(e.shards[i], i, e.shards[n:n+m]); err != nil {
			return 0
		}
	}
	e.out.Block = e.nextBlock
	e.nextBlock++
	e.out.K, e.out.M, e.out.NRuns = n, m, e.nruns
	copy(e.out.Runs[:], e.runs[:e.nruns])
	e.ready = m
	e.ledger.Record(e.out.Block, e.out.Runs[:e.nruns], m)
	e.stats.Blocks++
	e.stats.Repairs += uint64(m)
	return m
}

// Ready returns the number of repair frames of the last closed block.
func (e *Encoder) Ready() int { return e.ready }

// RepairLen is the frame length of each ready repair (they all have the same).
func (e *Encoder) RepairLen() int {
	if e.ready == 0 {
		return 0
	}
	return RepairLen(e.out.NRuns, len(e.shards[e.out.K]))
}

// AppendRepair appends ready repair frame i (0 ≤ i < Ready) to b. The engine sends
// each in its own datagram, spread over the usable paths (see the package doc).
func (e *Encoder) AppendRepair(b []byte, i int) []byte {
	if i < 0 || i >= e.ready {
		return b
	}
	e.out.Index = i
	e.out.Symbol = e.shards[e.out.K+i]
	return AppendRepair(b, &e.out)
}

// Lost tells the encoder that the paths lost source id. It returns the block
// that protected it and whether that block has now lost more sources than it
// had repairs, so that the receiver cannot rebuild them (see Ledger); ok is
// false when id is in no recently closed block (unprotected, too old, or in
// the open block).
func (e *Encoder) Lost(id SourceID) (block uint32, beyond, ok bool) { return e.ledger.Lost(id) }

// Reset drops the open block and the ready repairs and numbers blocks from 0 again
// (a fresh session: the peer's decoder is reset too).
func (e *Encoder) Reset() {
	e.open, e.n, e.nruns, e.ready, e.nextBlock, e.credit = false, 0, 0, 0, 0, 0
	e.ledger.Reset()
}
