package fec

// ledgerBlocks is how many closed blocks a Ledger remembers: at 1700 packets/s
// of one flow (two 10 Mbit/s paths) 32 blocks of 32 sources span 0.6 s, well
// past a lost source's detection. A source older than that is not found, and
// the engine falls back to waiting for the receiver's report.
const ledgerBlocks = 32

// Ledger remembers the sender's recently closed blocks: which sources each
// protected and with how many repairs, and how many of its sources the paths
// have reported lost since. Once more sources of a block are lost than it had
// repairs, the receiver cannot rebuild them from that block, and waiting for
// its REBUILT report only delays their resend. (A lost repair makes the block
// fail sooner still; the ledger does not see repairs, so it errs towards
// waiting.) The zero Ledger is empty and ready; its table (12.5 KiB) is
// allocated by the first Record, unless an Encoder gave it one.
type Ledger struct {
	entries *[ledgerBlocks]ledgerEntry
	n       uint32 // blocks recorded; the newest is entries[(n-1)%ledgerBlocks]
}

type ledgerEntry struct {
	block   uint32
	m, lost uint8
	nruns   uint8
	runs    [MaxK]Run
}

// Record adds a closed block: its number, its runs of sources and its repair
// count.
func (l *Ledger) Record(block uint32, runs []Run, m int) {
	if l.entries == nil {
		l.entries = new([ledgerBlocks]ledgerEntry)
	}
	e := &l.entries[l.n%ledgerBlocks]
	e.block, e.m, e.lost = block, uint8(min(m, MaxM)), 0
	e.nruns = uint8(copy(e.runs[:], runs))
	l.n++
}

// Lost counts source id as lost. It returns the block that carried it, and
// whether that block has now lost more sources than it had repairs (beyond);
// ok is false when id is in none of the remembered blocks.
func (l *Ledger) Lost(id SourceID) (block uint32, beyond, ok bool) {
	if l.entries == nil {
		return 0, false, false
	}
	for i := uint32(0); i < min(l.n, ledgerBlocks); i++ {
		e := &l.entries[(l.n-1-i)%ledgerBlocks]
		for _, r := range e.runs[:e.nruns] {
			if r.Flow == id.Flow && id.Seq-r.Seq < uint32(r.Count) {
				if e.lost < 255 { // copies of a source on many paths may each be lost
					e.lost++
				}
				return e.block, e.lost > e.m, true
			}
		}
	}
	return 0, false, false
}

// Reset forgets every block (a fresh session).
func (l *Ledger) Reset() { l.n = 0 }
