package fec

import (
	"sync"
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
//
// Bulk and latency-sensitive sources fill blocks of their own (two lanes), each
// numbered when it closes. In one block a latency-sensitive source would close it
// within MaxDelay with a real-time flow's repairs (Rate.M) for every bulk source
// in it: a ping every 10 ms beside a download put one in nearly every block and
// raised the download's overhead from 6.7 % to 9.3–10.3 % (lab, recovery-latency,
// 1 % loss).
type Encoder struct {
	cfg  EncoderConfig
	rate Rate // takes effect when the next block opens

	lanes [2]lane // bulkLane, urgentLane

	nextBlock uint32
	ledger    Ledger  // the blocks closed lately, for Lost
	credit    float64 // repairs earned by bulk blocks and not spent (Rate.BulkCap), ≤ 1

	// The last closed block: its repair frames until the next close.
	out    Repair
	ready  int
	bulk   bool // the block came from the bulk lane
	parity [MaxM][]byte
	shards [MaxK + MaxM][]byte
	mem    *encoderBufs // nil: no symbol memory (see Release)

	stats EncoderStats
}

// The lanes: a block of bulk sources sends Rate.Bulk (and the credit), one of
// latency-sensitive sources Rate.M.
const (
	bulkLane   = 0
	urgentLane = 1
)

// lane is one open block.
type lane struct {
	open    bool
	r       Rate // its rate (r.K sources close it)
	delay   time.Duration
	n       int
	closeBy time.Time    // its first source's deadline
	maxLen  int          // longest payload
	src     [MaxK][]byte // LenPrefix | payload, capacity LenPrefix+MaxPayload
	runOf   [MaxK]uint8  // the run each source belongs to
	posOf   [MaxK]uint8  // its position in the run
	runs    [MaxK]Run
	nruns   int
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
	e.lanes[bulkLane].delay, e.lanes[urgentLane].delay = cfg.BulkDelay, cfg.MaxDelay
	return e
}

// encoderBufs is an Encoder's memory (sources of both lanes, parity, the
// ledger's table): about 115 KiB, taken when a block opens and given back by
// Release.
type encoderBufs struct {
	size   int
	bufs   [][]byte
	ledger *[ledgerBlocks]ledgerEntry // the ledger's table (nil: none yet)
}

// encoderPool recycles the symbol memory Encoders release.
var encoderPool sync.Pool

// take gives the encoder its symbol memory.
func (e *Encoder) take() {
	sz := LenPrefix + e.cfg.MaxPayload
	m, _ := encoderPool.Get().(*encoderBufs)
	if m == nil || m.size != sz {
		m = &encoderBufs{size: sz, bufs: symbolBufs(2*MaxK+MaxM, sz)}
	}
	e.mem = m
	if e.ledger.entries == nil {
		e.ledger.entries = m.ledger
	}
	m.ledger = nil
	for l := range e.lanes {
		for i := range e.lanes[l].src {
			e.lanes[l].src[i] = m.bufs[l*MaxK+i][:0]
		}
	}
	for i := range e.parity {
		e.parity[i] = m.bufs[2*MaxK+i][:0]
	}
}

// Release gives the memory back (for other Encoders, or the collector) when no
// block is open, and drops the last block's repairs and the ledger (Lost knows
// no block closed before); the next block takes memory again. Rate and block
// numbering stay. It reports whether the memory is released (false: a block is
// open).
func (e *Encoder) Release() bool {
	if e.mem == nil {
		return true
	}
	if e.lanes[bulkLane].open || e.lanes[urgentLane].open {
		return false
	}
	e.ready = 0
	for l := range e.lanes {
		clear(e.lanes[l].src[:])
	}
	clear(e.parity[:])
	clear(e.shards[:])
	// Blocks closed before are long past a loss's detection when the engine
	// releases (an idle peer): the ledger's table goes too.
	e.mem.ledger, e.ledger.entries = e.ledger.entries, nil
	e.ledger.Reset()
	encoderPool.Put(e.mem)
	e.mem = nil
	return true
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

// Deadline reports when Tick must next be called to close an open block in time,
// or false if no block is open.
func (e *Encoder) Deadline() (time.Time, bool) {
	var at time.Time
	found := false
	for l := range e.lanes {
		ln := &e.lanes[l]
		if !ln.open {
			continue
		}
		if ln.n >= ln.r.K {
			return time.Time{}, true // now
		}
		if !found || ln.closeBy.Before(at) {
			at, found = ln.closeBy, true
		}
	}
	return at, found
}

// Add puts a copy of payload, the source named id, into the open block of its lane
// (opening one if the rate asks for repairs): bulk sources (TCP, whose gaps the
// receiver holds for recovery anyway) and latency-sensitive ones fill blocks of
// their own. It returns the number of repair frames made ready by a block that
// closed during the call (0 if none): read them with AppendRepair before the next
// Add or Tick, which may close another block and replace them.
//
// A block closes when it holds K sources, when its first source has waited its
// lane's delay (checked here and in Tick: BulkDelay for bulk, MaxDelay for the
// others), or before a source that would make its repair frames longer than
// MaxFrame. A bulk block closed with n sources sends Rate.Bulk[n] repairs (and
// one more when the credit allows, see Rate.BulkCap), a latency-sensitive one
// Rate.M[n].
func (e *Encoder) Add(id SourceID, payload []byte, now time.Time, bulk bool) int {
	if len(payload) == 0 || len(payload) > e.cfg.MaxPayload ||
		e.cfg.MaxFrame > 0 && RepairLen(1, LenPrefix+len(payload)) > e.cfg.MaxFrame {
		e.stats.Unprotected++
		return e.Tick(now)
	}
	ln := &e.lanes[urgentLane]
	if bulk {
		ln = &e.lanes[bulkLane]
	}
	closed := 0
	if ln.open {
		run, _ := ln.runFor(id)
		nruns := ln.nruns
		if run == ln.nruns {
			nruns++
		}
		if ln.n >= ln.r.K || !now.Before(ln.closeBy) ||
			e.cfg.MaxFrame > 0 && RepairLen(nruns, LenPrefix+max(ln.maxLen, len(payload))) > e.cfg.MaxFrame {
			closed = e.close(ln)
		}
	}
	if !ln.open {
		if e.rate.Off() {
			return closed
		}
		if e.mem == nil {
			e.take()
		}
		ln.open, ln.r, ln.n, ln.nruns, ln.maxLen = true, e.rate, 0, 0, 0
		ln.closeBy = now.Add(ln.delay)
	}
	run, pos := ln.runFor(id)
	if run == ln.nruns {
		ln.runs[run] = Run{Flow: id.Flow, Seq: id.Seq}
		ln.nruns++
	}
	ln.runs[run].Count++
	i := ln.n
	ln.runOf[i], ln.posOf[i] = uint8(run), uint8(pos)
	s := ln.src[i][:LenPrefix+len(payload)]
	be.PutUint16(s, uint16(len(payload)))
	copy(s[LenPrefix:], payload)
	ln.src[i] = s
	ln.n++
	ln.maxLen = max(ln.maxLen, len(payload))
	e.stats.Sources++
	if ln.n >= ln.r.K && closed == 0 {
		closed = e.close(ln)
	}
	return closed
}

// runFor returns the run id extends (and its position there), or ln.nruns for a
// new run. Runs group a flow's consecutive sequence numbers, so a block of
// interleaved flows still needs one run per flow.
func (ln *lane) runFor(id SourceID) (run, pos int) {
	for r := range ln.runs[:ln.nruns] {
		rn := &ln.runs[r]
		if rn.Flow == id.Flow && rn.Count < 255 && rn.Seq+uint32(rn.Count) == id.Seq {
			return r, int(rn.Count)
		}
	}
	return ln.nruns, 0
}

// Tick closes open blocks that are full or whose first source has waited its
// delay, up to the first that makes repairs ready, and returns their number as
// Add does. Call it again while it returns more than 0: both lanes may be due.
func (e *Encoder) Tick(now time.Time) int {
	for l := range e.lanes {
		ln := &e.lanes[l]
		if ln.open && (ln.n >= ln.r.K || !now.Before(ln.closeBy)) {
			if n := e.close(ln); n > 0 {
				return n
			}
		}
	}
	return 0
}

// Flush closes open blocks whatever their age (e.g. before the path goes idle),
// up to the first that makes repairs ready; call it again while it returns more
// than 0.
func (e *Encoder) Flush() int {
	for l := range e.lanes {
		if ln := &e.lanes[l]; ln.open {
			if n := e.close(ln); n > 0 {
				return n
			}
		}
	}
	return 0
}

// close encodes the lane's open block and makes its repairs ready.
func (e *Encoder) close(ln *lane) int {
	ln.open = false
	e.ready = 0
	n := ln.n
	m := int(ln.r.Bulk[min(n, ln.r.K)])
	if ln == &e.lanes[urgentLane] {
		m = int(ln.r.M[min(n, ln.r.K)])
	} else if ln.r.BulkCap > 0 {
		e.credit += ln.r.BulkCap*float64(n) - float64(m)
		if e.credit >= 1 && m < int(ln.r.M[min(n, ln.r.K)]) {
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
	symLen := LenPrefix + ln.maxLen
	// Shard order is run order: run r's sources take shards start[r] … .
	var start [MaxK]int
	for r, s := 1, 0; r < ln.nruns; r++ {
		s += int(ln.runs[r-1].Count)
		start[r] = s
	}
	for i := range n {
		s := ln.src[i][:symLen]
		clear(s[LenPrefix+int(be.Uint16(s)):])
		e.shards[start[ln.runOf[i]]+int(ln.posOf[i])] = s
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
	e.out.K, e.out.M, e.out.NRuns = n, m, ln.nruns
	copy(e.out.Runs[:], ln.runs[:ln.nruns])
	e.ready, e.bulk = m, ln == &e.lanes[bulkLane]
	e.ledger.Record(e.out.Block, e.out.Runs[:ln.nruns], m)
	e.stats.Blocks++
	e.stats.Repairs += uint64(m)
	return m
}

// Ready returns the number of repair frames of the last closed block.
func (e *Encoder) Ready() int { return e.ready }

// ReadyBulk reports whether the ready repairs protect bulk sources (a block of
// the bulk lane, see Add).
func (e *Encoder) ReadyBulk() bool { return e.bulk }

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

// Reset drops the open blocks and the ready repairs and numbers blocks from 0 again
// (a fresh session: the peer's decoder is reset too).
func (e *Encoder) Reset() {
	for l := range e.lanes {
		e.lanes[l].open, e.lanes[l].n, e.lanes[l].nruns = false, 0, 0
	}
	e.ready, e.nextBlock, e.credit = 0, 0, 0
	e.ledger.Reset()
}
