package reorder

import (
	"fmt"
	"sync"
	"time"
)

// Mode selects how long out-of-order packets are held.
type Mode uint8

const (
	// Off delivers every packet on arrival; duplicates are still dropped.
	Off Mode = iota
	// Fixed holds packets behind a gap for Config.Hold.
	Fixed
	// Adaptive holds for the value set with SetHold, clamped to [MinHold, Hold].
	Adaptive
)

func (m Mode) String() string {
	switch m {
	case Off:
		return "off"
	case Fixed:
		return "fixed"
	case Adaptive:
		return "adaptive"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ParseMode parses "off", "fixed" or "adaptive".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "off":
		return Off, nil
	case "fixed":
		return Fixed, nil
	case "adaptive":
		return Adaptive, nil
	}
	return Off, fmt.Errorf("reorder: unknown mode %q (valid: off, fixed, adaptive)", s)
}

// Config sizes and tunes a Buffer. Zero Hold, MaxHeld, Flows and DedupWindow take
// the defaults of DefaultConfig.
type Config struct {
	Mode Mode
	// StartAtZero says every flow's first packet has sequence number 0 (the sender
	// numbers flows from 0 for each session, and Reset is called when a session
	// starts afresh). Without it a flow starts at whatever arrives first, and a
	// packet overtaken at the very start of a flow is delivered late.
	StartAtZero bool
	// Hold is the hold time in Fixed mode and the upper bound in Adaptive mode; it is
	// also the adaptive hold until the first SetHold, so that nothing leaks out of
	// order before the engine has measured the paths. Default 200ms: above the
	// one-way skew of the paper's most asymmetric pair (20ms vs 100ms RTT) with room
	// for queueing; a gap longer than that is a loss the inner TCP must repair anyway.
	Hold time.Duration
	// MinHold is the adaptive lower bound: even equal paths jitter by a few ms.
	// Default 2ms; 0 is allowed (no lower bound); clamped to Hold.
	MinHold time.Duration
	// MaxHeld bounds the packets held across all flows, which bounds the engine's
	// buffers tied up here. When full, the flow whose gap is oldest gives it up.
	// Default 4096 (≈ 40ms at 1 Gbit/s of 1400-byte packets).
	MaxHeld int
	// Flows is the number of flow buckets; it must match the sender's FlowID space.
	// Rounded up to a power of two, at most 65536. Default 4096.
	Flows int
	// DedupWindow is how many sequence numbers behind the next expected one each flow
	// remembers as delivered, so that a packet arriving after its gap was given up is
	// delivered exactly once and redundant copies are dropped. Older packets cannot be
	// told apart from copies and are dropped (Stats.Stale). Rounded up to a power of
	// two, at least 64. Default 256: memory is Flows×DedupWindow/8 bytes (128 KiB).
	DedupWindow int
	// MaxRecoveryHold caps SetRecoveryHold: how long a flow of class Recoverable
	// waits for a gap that the sender may still fill by retransmission. 0 (the
	// default) disables the extension; every flow then uses the reorder hold.
	MaxRecoveryHold time.Duration
}

// Class says how long a flow's gaps are waited for.
type Class uint8

const (
	// Plain flows wait the reorder hold only (path skew): datagram traffic such as
	// real-time media must not sit behind a gap for a retransmission.
	Plain Class = iota
	// Recoverable flows (TCP) wait up to the recovery hold: a retransmission or a
	// give-up from the sender will close the gap, and holding is cheaper for the
	// inner TCP than a loss.
	Recoverable
	numClasses
)

// MaxHold is the longest hold a Buffer may be configured with: a peer that asks for
// more (the client sends its hold in the handshake) is clamped to it, since every
// held packet is a buffer of the receiver's. The config file has the same bound.
const MaxHold = 5 * time.Second

// DefaultConfig returns the documented defaults (Adaptive mode).
func DefaultConfig() Config {
	return Config{
		Mode:        Adaptive,
		Hold:        200 * time.Millisecond,
		MinHold:     2 * time.Millisecond,
		MaxHeld:     4096,
		Flows:       4096,
		DedupWindow: 256,
	}
}

// Stats counts what the buffer did. Counters are cumulative.
type Stats struct {
	InOrder    uint64 // delivered on arrival without being held
	Bypassed   uint64 // delivered on arrival ahead of a gap (PushUnordered)
	Reordered  uint64 // held, then delivered
	Timeouts   uint64 // gaps given up because the hold time passed
	Overflows  uint64 // gaps given up because MaxHeld packets were held
	Skipped    uint64 // sequence numbers jumped over by given-up gaps (and in Off mode)
	Late       uint64 // arrived after their gap was given up, delivered
	Duplicates uint64 // already delivered or already held: dropped
	Abandoned  uint64 // sequence numbers the sender gave up (Abandon), not waited for
	Stale      uint64 // older than DedupWindow behind the flow: dropped
	Held       int    // packets held now
}

// node is a held packet, linked into its flow's list sorted by sequence number.
type node[T any] struct {
	item T
	at   int64 // arrival, ns since the buffer's epoch
	seq  uint32
	kind nodeKind
	prev int32
	next int32 // also the free-list link
}

// nodeKind says what a node stands for.
type nodeKind uint8

const (
	heldNode      nodeKind = iota // a packet waiting for its gap
	abandonedNode                 // a tombstone: the sender abandoned seq (Abandon)
	deliveredNode                 // a tombstone: seq went out already (PushUnordered)
)

// flowState is everything known about one flow bucket.
type flowState struct {
	next       uint32 // next sequence number to deliver
	head, tail int32  // held packets, ascending seq; -1 = none
	held       int32
	hidx       int32 // position in its class's deadline heap; -1 when nothing is held
	class      Class // set when the flow starts holding (first held packet)
	started    bool
	since      int64 // when waiting for the current head gap began (ns since epoch)
	skipped    int64 // since of the last gap given up, to measure how late its packets were
}

// Buffer reorders packets per flow. It is not safe for concurrent use; one Buffer
// per session, used under the session's lock. Its memory is taken with the first
// packet (from a pool of memory other Buffers released, or allocated) and given
// back by Release while nothing is held.
type Buffer[T any] struct {
	mode             Mode
	hold             time.Duration
	minHold, maxHold time.Duration

	flowMask uint32
	wbits    uint32 // DedupWindow
	words    uint32 // DedupWindow/64
	flows    []flowState
	seen     []uint64 // per flow, ring bitmap of delivered seqs in [next-wbits, next)

	nodes []node[T]
	free  int32 // free-list head; -1 when MaxHeld packets are held
	// mem holds flows, seen, nodes and heaps while they are taken (nil:
	// released, or never used); saved keeps the flows that are not in their
	// initial state meanwhile, with their bitmap words in savedSeen.
	mem       *arena[T]
	maxHeld   int
	saved     []savedFlow
	savedSeen []uint64
	held      int
	// heaps holds, per class, the flows holding packets: min-heaps on since (all
	// flows of a class wait the same hold, so the oldest gap expires first).
	heaps [numClasses][]int32
	// recHold is the extra wait of Recoverable flows (SetRecoveryHold), at most
	// maxRecHold.
	recHold, maxRecHold time.Duration

	// Adaptive mode learns from what it sees: target is what SetHold asked for,
	// and lateMax the largest lateness observed recently (a gap filled after
	// waiting, or a packet that came after its gap was given up), kept as a
	// two-bucket windowed maximum over lateWindow.
	target            time.Duration
	startAtZero       bool
	lateCur, latePrev int64
	lateBucket        int64

	epoch   time.Time
	started bool
	stats   Stats
}

// arena is the memory of a Buffer that sees packets.
type arena[T any] struct {
	flows []flowState
	seen  []uint64
	nodes []node[T]
	heaps [numClasses][]int32
}

// arenas recycles the memory Buffers release (*arena[T]; one whose type or
// sizes do not fit the Buffer that takes it is left to the collector).
var arenas sync.Pool

// savedFlow is a flow's state while its Buffer's memory is released.
type savedFlow struct {
	fi uint32
	fs flowState
}

// take gives the Buffer its memory, with the flows Release saved restored.
func (b *Buffer[T]) take() {
	nf, words := int(b.flowMask)+1, int(b.words)
	a, _ := arenas.Get().(*arena[T])
	if a == nil || len(a.flows) != nf || len(a.seen) != nf*words || len(a.nodes) != b.maxHeld {
		a = &arena[T]{
			flows: make([]flowState, nf),
			seen:  make([]uint64, nf*words),
			nodes: make([]node[T], b.maxHeld),
			heaps: [numClasses][]int32{make([]int32, 0, nf), make([]int32, 0, nf)},
		}
	}
	b.mem = a
	b.flows, b.seen, b.nodes = a.flows, a.seen, a.nodes
	for c := range b.heaps {
		b.heaps[c] = a.heaps[c][:0]
	}
	for i := range b.flows {
		b.flows[i] = b.freshFlow()
	}
	clear(b.seen)
	for i := range b.nodes {
		b.nodes[i] = node[T]{next: int32(i + 1)}
	}
	b.nodes[len(b.nodes)-1].next = -1
	b.free = 0
	for k, sf := range b.saved {
		b.flows[sf.fi] = sf.fs
		copy(b.seen[sf.fi*b.words:(sf.fi+1)*b.words], b.savedSeen[k*words:(k+1)*words])
	}
	b.saved, b.savedSeen = b.saved[:0], b.savedSeen[:0]
}

// Release gives the Buffer's memory back for other Buffers (or the collector)
// when it holds no packet, keeping what its flows need to go on where they
// are: their next sequence numbers and recent deliveries. The engine calls it
// for a session that has gone idle; the next packet takes memory again. It
// reports whether the memory was released (false: packets are held).
func (b *Buffer[T]) Release() bool {
	if b.mem == nil {
		return true
	}
	if b.held > 0 {
		return false
	}
	fresh := b.freshFlow()
	for fi := range b.flows {
		seen := b.seen[uint32(fi)*b.words : uint32(fi+1)*b.words]
		if b.flows[fi] == fresh && allZero(seen) {
			continue
		}
		b.saved = append(b.saved, savedFlow{fi: uint32(fi), fs: b.flows[fi]})
		b.savedSeen = append(b.savedSeen, seen...)
	}
	a := b.mem
	for c := range b.heaps {
		a.heaps[c] = b.heaps[c][:0]
		b.heaps[c] = nil
	}
	b.mem, b.flows, b.seen, b.nodes, b.free = nil, nil, nil, nil, -1
	arenas.Put(a)
	return true
}

// Released reports whether the Buffer holds no memory of its own now.
func (b *Buffer[T]) Released() bool { return b.mem == nil }

// freshFlow is a flow's state before its first packet.
func (b *Buffer[T]) freshFlow() flowState {
	return flowState{head: -1, tail: -1, hidx: -1, started: b.startAtZero}
}

func allZero(ws []uint64) bool {
	for _, w := range ws {
		if w != 0 {
			return false
		}
	}
	return true
}

func ceilPow2(n, lo, hi int) int {
	p := lo
	for p < n && p < hi {
		p <<= 1
	}
	return p
}

// New returns an empty Buffer. Its memory (per-flow state and bitmaps, the
// MaxHeld slots, the heaps) is taken with the first packet and given back by
// Release.
func New[T any](cfg Config) *Buffer[T] {
	d := DefaultConfig()
	if cfg.Hold <= 0 {
		cfg.Hold = d.Hold
	}
	cfg.MinHold = min(max(cfg.MinHold, 0), cfg.Hold)
	if cfg.MaxHeld <= 0 {
		cfg.MaxHeld = d.MaxHeld
	}
	cfg.MaxHeld = min(cfg.MaxHeld, 1<<30)
	if cfg.Flows <= 0 {
		cfg.Flows = d.Flows
	}
	if cfg.DedupWindow <= 0 {
		cfg.DedupWindow = d.DedupWindow
	}
	nf := ceilPow2(cfg.Flows, 1, 1<<16)
	w := ceilPow2(cfg.DedupWindow, 64, 1<<20)
	b := &Buffer[T]{
		mode:     cfg.Mode,
		hold:     cfg.Hold,
		target:   cfg.Hold,
		minHold:  cfg.MinHold,
		maxHold:  cfg.Hold,
		flowMask: uint32(nf - 1),
		wbits:    uint32(w),
		words:    uint32(w / 64),
		maxHeld:  cfg.MaxHeld,
		free:     -1,
	}
	b.maxRecHold = max(cfg.MaxRecoveryHold, 0)
	b.startAtZero = cfg.StartAtZero
	return b
}

// SetHold sets the adaptive hold time, clamped to [MinHold, Hold]. The engine feeds
// the one-way delay skew between the paths in use plus a jitter margin: that is how
// long a packet on the slow path trails the packets sent after it on the fast one.
// Ignored in Off and Fixed modes.
//
// The hold is also never shorter than LateGain × the largest lateness observed in
// the last lateWindow: the one-way delays the engine feeds are smoothed and lag behind
// sudden queue changes, while a packet that trails its successors by 30 ms says
// directly that 30 ms is needed. Giving up a gap too early is the expensive error
// (the inner TCP sees reordering and cuts its window); holding too long only adds
// delay after real losses.
func (b *Buffer[T]) SetHold(d time.Duration) {
	if b.mode == Adaptive {
		b.target = d
		b.adapt()
	}
}

// lateWindow is how long an observed lateness keeps the adaptive hold up; LateGain
// is the margin applied to it.
const (
	lateWindow = 2 * time.Second
	LateGain   = 1.25
)

func (b *Buffer[T]) adapt() {
	late := time.Duration(float64(max(b.lateCur, b.latePrev)) * LateGain)
	b.hold = min(max(b.target, late, b.minHold), b.maxHold)
}

// observeLate records that a packet arrived lateness ns after the gap it filled had
// opened.
func (b *Buffer[T]) observeLate(t, lateness int64) {
	if b.mode != Adaptive || lateness <= 0 {
		return
	}
	b.rotateLate(t)
	b.lateCur = max(b.lateCur, lateness)
	b.adapt()
}

// rotateLate ages the lateness window: observations older than lateWindow drop
// out even when nothing new is observed.
func (b *Buffer[T]) rotateLate(t int64) {
	half := int64(lateWindow / 2)
	if t-b.lateBucket < half {
		return
	}
	if t-b.lateBucket >= 2*half {
		b.latePrev = 0
	} else {
		b.latePrev = b.lateCur
	}
	b.lateCur, b.lateBucket = 0, t
	if b.mode == Adaptive {
		b.adapt()
	}
}

// Reset releases every held packet (appended to out, in order per flow) and forgets
// all flow state, as for a new session whose sender numbers flows from 0 again.
func (b *Buffer[T]) Reset(out []T) []T {
	out = b.Flush(out)
	b.saved, b.savedSeen = b.saved[:0], b.savedSeen[:0]
	for i := range b.flows {
		b.flows[i] = b.freshFlow()
	}
	clear(b.seen)
	return out
}

// Hold returns the hold time in effect.
func (b *Buffer[T]) Hold() time.Duration { return b.hold }

// Stats returns a snapshot of the counters.
func (b *Buffer[T]) Stats() Stats {
	s := b.stats
	s.Held = b.held
	return s
}

func (b *Buffer[T]) clock(now time.Time) int64 {
	if !b.started {
		b.epoch, b.started = now, true
	}
	return int64(now.Sub(b.epoch))
}

// Push offers packet item with (flow, seq). In-order packets and any packets they
// unblock are appended to out in order; duplicates (already delivered or held) and
// packets too old to tell return dup=true (the caller recycles item); out-of-order
// packets are held (ownership passes to the buffer). Packets of other flows are
// appended too when holding this one forces the oldest gap to be given up.
func (b *Buffer[T]) Push(flow uint16, seq uint32, item T, now time.Time, out []T) (res []T, dup bool) {
	return b.PushClass(flow, seq, item, Plain, now, out)
}

// PushClass is Push for a packet of a flow of class c; the class is taken when the
// flow starts holding packets and kept until its held packets are released.
func (b *Buffer[T]) PushClass(flow uint16, seq uint32, item T, c Class, now time.Time, out []T) (res []T, dup bool) {
	if b.mem == nil {
		b.take()
	}
	t := b.clock(now)
	fi := uint32(flow) & b.flowMask
	fs := &b.flows[fi]
	if !fs.started {
		// First packet of the flow: start here. Anything older that arrives later is
		// "late" and delivered once, as after a given-up gap.
		fs.started, fs.next = true, seq
	}
	// forced: the packet was ahead of the flow, and not held, when a give-up to
	// make room moved the flow past it; it was never delivered.
	forced := false
	for {
		if behind := fs.next - seq; behind != 0 && behind <= 1<<31 {
			if forced {
				if behind <= b.wbits {
					b.testAndSet(fi, seq)
				}
				b.stats.Late++
				return append(out, item), false
			}
			if behind > b.wbits {
				b.stats.Stale++
				return out, true
			}
			if b.testAndSet(fi, seq) {
				b.stats.Duplicates++
				return out, true
			}
			b.stats.Late++
			b.observeLate(t, t-fs.skipped)
			return append(out, item), false
		}
		if seq == fs.next {
			b.stats.InOrder++
			b.markNext(fi, fs)
			out = append(out, item)
			if fs.held > 0 {
				if b.nodes[fs.head].kind == heldNode {
					// Only a packet that waited says how late gaps fill;
					// tombstones of packets already out waited for nothing.
					b.observeLate(t, t-fs.since)
				}
				out = b.release(fi, fs, out)
				out = b.expireFlow(fi, fs, t, out)
			}
			return out, false
		}
		if b.mode == Off {
			b.skipTo(fi, fs, seq)
			b.stats.InOrder++
			b.markNext(fi, fs)
			return append(out, item), false
		}
		after, match := b.locate(fs, seq)
		if match >= 0 {
			if nd := &b.nodes[match]; nd.kind == abandonedNode {
				// Abandoned by the sender but here after all (a spurious loss):
				// the tombstone becomes the packet.
				nd.item, nd.kind = item, heldNode
				b.stats.Abandoned--
				return out, false
			}
			b.stats.Duplicates++
			return out, true
		}
		if b.free < 0 {
			// Memory bound: the oldest gap anywhere is given up, which frees at least
			// one slot; then look again (it may have been this flow's gap).
			out = b.giveUp(b.oldest(), &b.stats.Overflows, out)
			forced = true
			continue
		}
		if fs.held == 0 {
			fs.class = min(c, numClasses-1)
		}
		b.insert(fi, fs, seq, item, t, after, heldNode)
		return b.expireFlow(fi, fs, t, out), false
	}
}

// PushUnordered is PushClass for a packet that needs no order: a TCP segment with
// no payload (an acknowledgement), which a later one supersedes. Held behind a gap
// it would stop the sender's ack clock for as long as the gap waits for its
// recovery, so it goes out at once, ahead of the gap; a tombstone keeps its place,
// so the flow moves past it when the gap closes and a copy of it is dropped.
func (b *Buffer[T]) PushUnordered(flow uint16, seq uint32, item T, c Class, now time.Time, out []T) (res []T, dup bool) {
	if b.mem == nil {
		b.take()
	}
	fi := uint32(flow) & b.flowMask
	fs := &b.flows[fi]
	if ahead := seq - fs.next; b.mode == Off || !fs.started || ahead == 0 || ahead > 1<<31 {
		return b.PushClass(flow, seq, item, c, now, out)
	}
	after, match := b.locate(fs, seq)
	if match >= 0 {
		nd := &b.nodes[match]
		if nd.kind != abandonedNode {
			b.stats.Duplicates++
			return out, true
		}
		// Abandoned by the sender but here after all: out it goes.
		nd.kind = deliveredNode
		b.stats.Abandoned--
		b.stats.Bypassed++
		return append(out, item), false
	}
	if b.free < 0 {
		return b.PushClass(flow, seq, item, c, now, out)
	}
	if fs.held == 0 {
		fs.class = min(c, numClasses-1)
	}
	t := b.clock(now)
	var zero T
	b.insert(fi, fs, seq, zero, t, after, deliveredNode)
	b.stats.Bypassed++
	return b.expireFlow(fi, fs, t, append(out, item)), false
}

// Expire releases, in order, packets whose gap has been waited for at least the
// hold time. The engine calls it from its timer, at NextDeadline or earlier.
func (b *Buffer[T]) Expire(now time.Time, out []T) []T {
	t := b.clock(now)
	b.rotateLate(t)
	for c := range b.heaps {
		hold := int64(b.holdOf(Class(c)))
		for len(b.heaps[c]) > 0 {
			fi := uint32(b.heaps[c][0])
			if b.flows[fi].since+hold > t {
				break
			}
			out = b.giveUp(fi, &b.stats.Timeouts, out)
		}
	}
	return out
}

// holdOf is how long a gap of a flow of class c is waited for.
func (b *Buffer[T]) holdOf(c Class) time.Duration {
	if c == Recoverable && b.mode != Off {
		return max(b.hold, b.recHold)
	}
	return b.hold
}

// SetRecoveryHold sets how long Recoverable flows wait for a gap (at least the
// reorder hold, at most Config.MaxRecoveryHold). The engine feeds the time a
// retransmission can take: loss detection on the slowest path plus the fastest
// path's one-way delay plus a margin.
func (b *Buffer[T]) SetRecoveryHold(d time.Duration) {
	b.recHold = min(max(d, 0), b.maxRecHold)
}

// RecoveryHold returns the hold of Recoverable flows in effect.
func (b *Buffer[T]) RecoveryHold() time.Duration { return b.holdOf(Recoverable) }

// oldest returns the flow whose head gap opened first, over all classes; there
// must be one.
func (b *Buffer[T]) oldest() uint32 {
	best := int32(-1)
	for c := range b.heaps {
		if h := b.heaps[c]; len(h) > 0 && (best < 0 || b.flows[h[0]].since < b.flows[best].since) {
			best = h[0]
		}
	}
	return uint32(best)
}

// Abandon records that the sender gave up (flow, seq): the buffer stops waiting
// for it at once. Packets it unblocks are appended to out in order. Nothing
// happens when seq was already delivered or given up; if the packet turns up
// later after all it is delivered once, as late.
func (b *Buffer[T]) Abandon(flow uint16, seq uint32, now time.Time, out []T) []T {
	if b.mem == nil {
		b.take()
	}
	t := b.clock(now)
	fi := uint32(flow) & b.flowMask
	fs := &b.flows[fi]
	if !fs.started || b.mode == Off {
		return out
	}
	if behind := fs.next - seq; behind != 0 && behind <= 1<<31 {
		return out
	}
	if seq == fs.next {
		b.stats.Abandoned++
		b.skipTo(fi, fs, seq+1)
		b.stats.Skipped-- // counted as Abandoned
		if fs.held > 0 {
			out = b.release(fi, fs, out)
			out = b.expireFlow(fi, fs, t, out)
		}
		return out
	}
	after, match := b.locate(fs, seq)
	if match >= 0 || b.free < 0 || fs.held == 0 {
		// Held already, no room, or nothing held behind it: when packets after
		// the gap arrive they will find no tombstone and wait as usual, which
		// only costs the hold.
		return out
	}
	b.stats.Abandoned++
	var zero T
	b.insert(fi, fs, seq, zero, t, after, abandonedNode)
	return out
}

// NextDeadline returns when the oldest gap times out; false when nothing is held.
func (b *Buffer[T]) NextDeadline() (time.Time, bool) {
	var at int64
	ok := false
	for c := range b.heaps {
		if h := b.heaps[c]; len(h) > 0 {
			d := b.flows[h[0]].since + int64(b.holdOf(Class(c)))
			if !ok || d < at {
				at, ok = d, true
			}
		}
	}
	if !ok {
		return time.Time{}, false
	}
	return b.epoch.Add(time.Duration(at)), true
}

// Flush releases everything held, each flow in order (session end, mode change).
// Flow state is kept, so copies arriving afterwards are still recognised.
func (b *Buffer[T]) Flush(out []T) []T {
	for c := range b.heaps {
		for len(b.heaps[c]) > 0 {
			out = b.giveUp(uint32(b.heaps[c][0]), nil, out)
		}
	}
	return out
}

// --- delivered-sequence bitmap ---------------------------------------------------

func (b *Buffer[T]) bit(fi, seq uint32) (*uint64, uint64) {
	off := seq & (b.wbits - 1)
	return &b.seen[fi*b.words+off>>6], 1 << (off & 63)
}

// testAndSet marks seq delivered and reports whether it already was.
func (b *Buffer[T]) testAndSet(fi, seq uint32) bool {
	w, m := b.bit(fi, seq)
	was := *w&m != 0
	*w |= m
	return was
}

// markNext records fs.next as delivered and advances it. The slot it reuses held
// next-wbits, which leaves the window.
func (b *Buffer[T]) markNext(fi uint32, fs *flowState) {
	w, m := b.bit(fi, fs.next)
	*w |= m
	fs.next++
}

// skipTo gives up the sequence numbers [fs.next, to): their slots are cleared so
// that they can still be delivered (once) if they turn up.
func (b *Buffer[T]) skipTo(fi uint32, fs *flowState, to uint32) {
	n := to - fs.next
	b.stats.Skipped += uint64(n)
	if n >= b.wbits {
		clear(b.seen[fi*b.words : (fi+1)*b.words])
	} else {
		for s := fs.next; s != to; s++ {
			w, m := b.bit(fi, s)
			*w &^= m
		}
	}
	fs.next = to
}

// --- held packets ----------------------------------------------------------------

// locate finds where seq (ahead of fs.next) goes in the flow's sorted list: after
// the returned node (-1 = at the head), or, when seq is already held, the node
// holding it (match; -1 otherwise). It scans
// from whichever end is nearer in sequence space; typical reordering appends at the
// tail (fast path runs ahead) or lands near the head (gap fillers), both O(1).
func (b *Buffer[T]) locate(fs *flowState, seq uint32) (after, match int32) {
	if fs.held == 0 {
		return -1, -1
	}
	off := seq - fs.next
	toff := b.nodes[fs.tail].seq - fs.next
	if off > toff {
		return fs.tail, -1
	}
	if off == toff {
		return 0, fs.tail
	}
	hoff := b.nodes[fs.head].seq - fs.next
	if off < hoff {
		return -1, -1
	}
	if off == hoff {
		return 0, fs.head
	}
	if off-hoff <= toff-off {
		cur := fs.head
		for {
			n := b.nodes[cur].next
			noff := b.nodes[n].seq - fs.next
			if noff == off {
				return 0, n
			}
			if noff > off {
				return cur, -1
			}
			cur = n
		}
	}
	cur := fs.tail
	for {
		p := b.nodes[cur].prev
		poff := b.nodes[p].seq - fs.next
		if poff == off {
			return 0, p
		}
		if poff < off {
			return p, -1
		}
		cur = p
	}
}

func (b *Buffer[T]) insert(fi uint32, fs *flowState, seq uint32, item T, t int64, after int32, kind nodeKind) {
	n := b.free
	nd := &b.nodes[n]
	b.free = nd.next
	nd.item, nd.at, nd.seq, nd.kind = item, t, seq, kind
	if after < 0 {
		nd.prev, nd.next = -1, fs.head
		if fs.head >= 0 {
			b.nodes[fs.head].prev = n
		} else {
			fs.tail = n
		}
		fs.head = n
	} else {
		nx := b.nodes[after].next
		nd.prev, nd.next = after, nx
		b.nodes[after].next = n
		if nx >= 0 {
			b.nodes[nx].prev = n
		} else {
			fs.tail = n
		}
	}
	fs.held++
	b.held++
	if fs.held == 1 {
		fs.since = t
		b.heapPush(fi)
	}
}

// release delivers the held packets that are now in sequence. When the head gap is
// resolved and packets remain behind another gap, that gap is taken to have been
// waited for since its first successor (the new head) arrived — not since now —
// so several gaps in one flow never add up their hold times.
func (b *Buffer[T]) release(fi uint32, fs *flowState, out []T) []T {
	popped := false
	var zero T
	for fs.head >= 0 && b.nodes[fs.head].seq == fs.next {
		n := fs.head
		nd := &b.nodes[n]
		kind := nd.kind
		if kind == heldNode {
			out = append(out, nd.item)
		}
		nd.item, nd.kind = zero, heldNode // drop the reference for the GC
		fs.head = nd.next
		if fs.head >= 0 {
			b.nodes[fs.head].prev = -1
		} else {
			fs.tail = -1
		}
		nd.next = b.free
		b.free = n
		fs.held--
		b.held--
		switch kind {
		case abandonedNode:
			// Not delivered: a copy that turns up later goes out once, as late.
			b.skipTo(fi, fs, fs.next+1)
			b.stats.Skipped-- // counted as Abandoned, not as a given-up gap
		case deliveredNode:
			b.markNext(fi, fs) // out already; a later copy is a duplicate
		default:
			b.markNext(fi, fs)
			b.stats.Reordered++
		}
		popped = true
	}
	if fs.held == 0 {
		if fs.hidx >= 0 {
			b.heapRemove(fi)
		}
	} else if popped {
		fs.since = b.nodes[fs.head].at
		b.heapFix(fi)
	}
	return out
}

// giveUp abandons the flow's head gap: the missing packets are presumed lost (if
// they arrive later they are delivered as late), the held run behind it goes out.
func (b *Buffer[T]) giveUp(fi uint32, counter *uint64, out []T) []T {
	if counter != nil {
		*counter++
	}
	fs := &b.flows[fi]
	fs.skipped = fs.since
	b.skipTo(fi, fs, b.nodes[fs.head].seq)
	return b.release(fi, fs, out)
}

// expireFlow gives up the flow's gaps whose hold time has passed, so a flow that
// keeps receiving does not depend on the engine's timer granularity.
func (b *Buffer[T]) expireFlow(fi uint32, fs *flowState, t int64, out []T) []T {
	for fs.held > 0 && fs.since+int64(b.holdOf(fs.class)) <= t {
		out = b.giveUp(fi, &b.stats.Timeouts, out)
	}
	return out
}

// --- deadline heaps (per class, min on flowState.since) ---------------------------

func (b *Buffer[T]) heapOf(fi uint32) *[]int32 { return &b.heaps[b.flows[fi].class] }

func (b *Buffer[T]) heapLess(h []int32, i, j int) bool {
	return b.flows[h[i]].since < b.flows[h[j]].since
}

func (b *Buffer[T]) heapSwap(h []int32, i, j int) {
	h[i], h[j] = h[j], h[i]
	b.flows[h[i]].hidx = int32(i)
	b.flows[h[j]].hidx = int32(j)
}

func (b *Buffer[T]) heapUp(h []int32, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !b.heapLess(h, i, p) {
			return
		}
		b.heapSwap(h, i, p)
		i = p
	}
}

func (b *Buffer[T]) heapDown(h []int32, i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && b.heapLess(h, r, l) {
			m = r
		}
		if !b.heapLess(h, m, i) {
			return
		}
		b.heapSwap(h, i, m)
		i = m
	}
}

func (b *Buffer[T]) heapPush(fi uint32) {
	hp := b.heapOf(fi)
	b.flows[fi].hidx = int32(len(*hp))
	*hp = append(*hp, int32(fi)) // capacity is the number of flows: no allocation
	b.heapUp(*hp, len(*hp)-1)
}

func (b *Buffer[T]) heapRemove(fi uint32) {
	hp := b.heapOf(fi)
	h := *hp
	i := int(b.flows[fi].hidx)
	last := len(h) - 1
	if i != last {
		b.heapSwap(h, i, last)
	}
	*hp = h[:last]
	b.flows[fi].hidx = -1
	if i != last {
		b.heapDown(*hp, i)
		b.heapUp(*hp, i)
	}
}

func (b *Buffer[T]) heapFix(fi uint32) {
	h := *b.heapOf(fi)
	i := int(b.flows[fi].hidx)
	b.heapDown(h, i)
	b.heapUp(h, int(b.flows[fi].hidx))
}
