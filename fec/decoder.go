package fec

import "time"

// Decoder defaults.
const (
	// DefaultSourceSlots is how many recent source payloads a Decoder remembers.
	DefaultSourceSlots = 1024
	// DefaultBlocks is how many blocks a Decoder tracks at once.
	DefaultBlocks = 32
	// DefaultHorizon is how long a block waits for its missing symbols after its
	// first repair arrived.
	DefaultHorizon = 250 * time.Millisecond
)

// DecoderConfig configures a Decoder; zero fields take the defaults.
type DecoderConfig struct {
	// SourceSlots bounds the source payloads remembered (at least 4·MaxK). They
	// must cover the sources sent between a block's first source and the arrival
	// of its repairs: rate × (MaxDelay + path delay spread).
	SourceSlots int
	// MaxPayload must be at least the sender's EncoderConfig.MaxPayload.
	MaxPayload int
	// Blocks is the number of blocks tracked at once; a block's slot is its id
	// modulo Blocks, and repairs for blocks Blocks or more behind the newest are
	// stale.
	Blocks int
	// Horizon: a block still missing sources this long after its first repair is
	// given up (unrecoverable).
	Horizon time.Duration
}

// DecoderStats counts what a Decoder did.
type DecoderStats struct {
	Blocks        uint64 // blocks learnt from a first repair
	Complete      uint64 // blocks whose sources all arrived: nothing to rebuild
	Recovered     uint64 // blocks with sources rebuilt
	Rebuilt       uint64 // source payloads rebuilt
	Unrecoverable uint64 // blocks given up (horizon, or slot taken) still missing sources
	Rejected      uint64 // repairs dropped: stale, too long, or disagreeing with their block
}

type block struct {
	used    bool
	done    bool
	id      uint32
	k, m    int
	symLen  int
	first   time.Time
	ids     [MaxK]SourceID
	got     [MaxM]bool
	nrep    int
	repairs [MaxM][]byte
}

type rebuilt struct {
	id   SourceID
	slot int
}

// Decoder rebuilds lost source payloads from repair frames. It is not safe for
// concurrent use (the engine calls it under the peer lock). All memory is allocated
// by NewDecoder; AddSource, AddRepair and Tick allocate only inside reedsolomon when
// a block is actually reconstructed (see the package doc).
type Decoder struct {
	cfg     DecoderConfig
	src     *store
	blocks  []block
	newest  uint32
	any     bool
	pending int // blocks with repairs, not done
	out     []rebuilt
	scratch [MaxM][]byte
	shards  [MaxK + MaxM][]byte
	slots   [MaxK]int
	stats   DecoderStats
}

// NewDecoder allocates a decoder: about (SourceSlots + Blocks·MaxM) ×
// (MaxPayload+2) bytes, 2.0 MB with the defaults. The engine should make one per
// peer on the first repair frame it receives.
func NewDecoder(cfg DecoderConfig) *Decoder {
	if cfg.SourceSlots <= 0 {
		cfg.SourceSlots = DefaultSourceSlots
	}
	cfg.SourceSlots = max(cfg.SourceSlots, 4*MaxK)
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = DefaultMaxPayload
	}
	cfg.MaxPayload = min(cfg.MaxPayload, 65535-LenPrefix)
	if cfg.Blocks <= 0 {
		cfg.Blocks = DefaultBlocks
	}
	if cfg.Horizon <= 0 {
		cfg.Horizon = DefaultHorizon
	}
	d := &Decoder{
		cfg:    cfg,
		src:    newStore(cfg.SourceSlots, cfg.MaxPayload),
		blocks: make([]block, cfg.Blocks),
		out:    make([]rebuilt, 0, 4*MaxM),
	}
	sz := LenPrefix + cfg.MaxPayload
	bufs := symbolBufs((cfg.Blocks+1)*MaxM, sz)
	for b := range d.blocks {
		for j := range MaxM {
			d.blocks[b].repairs[j] = bufs[b*MaxM+j]
		}
	}
	for j := range d.scratch {
		d.scratch[j] = bufs[cfg.Blocks*MaxM+j]
	}
	return d
}

// Stats returns the counters.
func (d *Decoder) Stats() DecoderStats { return d.stats }

// Rebuilt returns rebuilt payload i (0 ≤ i < the count the last call returned) and
// its source id. The payload is what the sender gave Encoder.Add; it stays valid
// until the next call into d.
func (d *Decoder) Rebuilt(i int) (SourceID, []byte) {
	r := d.out[i]
	return r.id, d.src.payload(r.slot)
}

// AddSource remembers a received source payload (a copy). If a block was waiting
// for it and can now be decoded, the missing sources are rebuilt: it returns how
// many (read them with Rebuilt).
func (d *Decoder) AddSource(id SourceID, payload []byte) int {
	d.out = d.out[:0]
	if len(payload) == 0 || len(payload) > d.cfg.MaxPayload {
		return 0
	}
	if d.src.get(id) >= 0 {
		return 0
	}
	d.src.put(id, payload)
	if d.pending == 0 {
		return 0
	}
	for b := range d.blocks {
		bl := &d.blocks[b]
		if !bl.used || bl.done || bl.nrep == 0 {
			continue
		}
		for _, x := range bl.ids[:bl.k] {
			if x == id {
				if len(d.out)+MaxM > cap(d.out) {
					return len(d.out) // the rest is tried on the next Tick
				}
				d.try(bl)
				break
			}
		}
	}
	return len(d.out)
}

// AddRepair takes a parsed repair frame (r.Symbol is copied) and returns how many
// sources it let the decoder rebuild (read them with Rebuilt).
func (d *Decoder) AddRepair(r *Repair, now time.Time) int {
	d.out = d.out[:0]
	if len(r.Symbol) > LenPrefix+d.cfg.MaxPayload || r.K < 1 || r.K > MaxK || r.M < 1 || r.M > MaxM ||
		r.Index < 0 || r.Index >= r.M {
		d.stats.Rejected++
		return 0
	}
	if d.any && int32(d.newest-r.Block) >= int32(len(d.blocks)) {
		d.stats.Rejected++ // stale: its slot may have served a newer block already
		return 0
	}
	bl := &d.blocks[r.Block%uint32(len(d.blocks))]
	if bl.used && bl.id != r.Block {
		if int32(r.Block-bl.id) < 0 {
			d.stats.Rejected++
			return 0
		}
		d.retire(bl)
	}
	if !bl.used {
		bl.used, bl.done, bl.id, bl.k, bl.m, bl.symLen, bl.first, bl.nrep = true, false, r.Block, r.K, r.M, len(r.Symbol), now, 0
		bl.got = [MaxM]bool{}
		for i := range r.K {
			id, ok := r.ID(i)
			if !ok {
				bl.used = false
				d.stats.Rejected++
				return 0
			}
			bl.ids[i] = id
		}
		d.stats.Blocks++
		if !d.any || int32(r.Block-d.newest) > 0 {
			d.newest, d.any = r.Block, true
		}
	} else if bl.k != r.K || bl.m != r.M || bl.symLen != len(r.Symbol) || !sameIDs(bl, r) {
		d.stats.Rejected++
		return 0
	}
	if bl.done || bl.got[r.Index] {
		return 0
	}
	bl.got[r.Index] = true
	bl.repairs[r.Index] = bl.repairs[r.Index][:len(r.Symbol)]
	copy(bl.repairs[r.Index], r.Symbol)
	if bl.nrep == 0 {
		d.pending++
	}
	bl.nrep++
	d.try(bl)
	return len(d.out)
}

func sameIDs(bl *block, r *Repair) bool {
	i := 0
	for _, run := range r.Runs[:r.NRuns] {
		for c := range uint32(run.Count) {
			if bl.ids[i] != (SourceID{Flow: run.Flow, Seq: run.Seq + c}) {
				return false
			}
			i++
		}
	}
	return true
}

// try finishes bl if all its sources are here, or rebuilds the missing ones if
// enough symbols are.
func (d *Decoder) try(bl *block) {
	missing := 0
	for i, id := range bl.ids[:bl.k] {
		d.slots[i] = d.src.get(id)
		if d.slots[i] < 0 {
			missing++
		}
	}
	if missing == 0 {
		d.finish(bl)
		d.stats.Complete++
		return
	}
	if bl.k-missing+bl.nrep < bl.k {
		return
	}
	rs, err := codecFor(bl.k, bl.m)
	if err != nil {
		return
	}
	j := 0
	for i := range bl.k {
		if sl := d.slots[i]; sl >= 0 {
			s := d.src.data[sl]
			if len(s) > bl.symLen {
				// A payload longer than the block's symbols is not the one the
				// sender coded: the block cannot be trusted.
				d.finish(bl)
				d.stats.Unrecoverable++
				return
			}
			s = s[:bl.symLen]
			clear(s[len(d.src.data[sl]):])
			d.shards[i] = s
		} else {
			d.shards[i] = d.scratch[j][:0]
			j++
		}
	}
	for r := range bl.m {
		if bl.got[r] {
			d.shards[bl.k+r] = bl.repairs[r]
		} else {
			d.shards[bl.k+r] = nil
		}
	}
	if err := rs.ReconstructData(d.shards[:bl.k+bl.m]); err != nil {
		return
	}
	d.finish(bl)
	n := 0
	for i := range bl.k {
		if d.slots[i] >= 0 {
			continue
		}
		s := d.shards[i]
		l := int(be.Uint16(s))
		if l == 0 || l > bl.symLen-LenPrefix {
			continue // corrupt symbols (cannot happen with authenticated frames)
		}
		d.out = append(d.out, rebuilt{id: bl.ids[i], slot: d.src.put(bl.ids[i], s[LenPrefix:LenPrefix+l])})
		n++
	}
	d.stats.Recovered++
	d.stats.Rebuilt += uint64(n)
}

// finish marks bl done; its slot keeps the id so late repairs are ignored.
func (d *Decoder) finish(bl *block) {
	if !bl.done && bl.nrep > 0 {
		d.pending--
	}
	bl.done = true
}

// retire frees bl's slot, counting it unrecoverable if it was not done (after a
// last try, if the output list has room for it).
func (d *Decoder) retire(bl *block) {
	if !bl.done && len(d.out)+MaxM <= cap(d.out) {
		d.try(bl)
	}
	if !bl.done {
		d.finish(bl)
		d.stats.Unrecoverable++
	}
	bl.used = false
}

// Tick gives up the blocks that waited Horizon for their missing symbols and
// retries those a busy AddSource call left (it returns how many sources that
// rebuilt; read them with Rebuilt).
func (d *Decoder) Tick(now time.Time) int {
	d.out = d.out[:0]
	if d.pending == 0 {
		return 0
	}
	for b := range d.blocks {
		bl := &d.blocks[b]
		if !bl.used || bl.done || bl.nrep == 0 {
			continue
		}
		if now.Sub(bl.first) >= d.cfg.Horizon {
			d.retire(bl) // the try inside may still rebuild
			continue
		}
		if len(d.out)+MaxM <= cap(d.out) {
			d.try(bl)
		}
	}
	return len(d.out)
}

// Reset forgets every source and block (a fresh session: flows and blocks are
// numbered from 0 again). Counters are kept.
func (d *Decoder) Reset() {
	d.src.reset()
	for b := range d.blocks {
		d.blocks[b].used = false
	}
	d.any, d.pending = false, 0
	d.out = d.out[:0]
}
