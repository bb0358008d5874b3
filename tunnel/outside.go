package tunnel

import (
	"errors"
	"net"
	"time"

	"github.com/braid-vpn/braid/conn"
	"github.com/braid-vpn/braid/fanout"
	"github.com/braid-vpn/braid/fec"
	"github.com/braid-vpn/braid/lanes"
	"github.com/braid-vpn/braid/noise"
	"github.com/braid-vpn/braid/path"
	"github.com/braid-vpn/braid/reorder"
	"github.com/braid-vpn/braid/tundev"
	"github.com/braid-vpn/braid/wire"
)

// tunWriteOffset is the headroom handed to the TUN device in front of each packet
// (the virtio-net header needs 10 bytes); every opened packet has more than this.
const tunWriteOffset = 16

// routineOutside reads datagrams from one path socket and delivers their packets to
// the TUN device.
func (e *Engine) routineOutside(cs *connState) {
	defer e.wg.Done()
	bs := cs.c.BatchSize()
	pbs := make([]*packetBuf, bs)
	bufs := make([][]byte, bs)
	sizes := make([]int, bs)
	eps := make([]conn.Endpoint, bs)
	in := &inbound{e: e, w: newBatchWriter(e)}
	for {
		for i := range pbs {
			if pbs[i] == nil {
				pbs[i] = e.pool.get()
			}
			bufs[i] = pbs[i].b
		}
		n, err := cs.c.ReadBatch(bufs, sizes, eps)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || e.isClosing() || cs.closed {
				return
			}
			e.log.Debug("path read", "path", cs.local.String(), "err", err)
			time.Sleep(time.Millisecond)
			continue
		}
		in.handleBatch(cs, pbs[:n], sizes[:n], eps[:n], time.Now())
	}
}

// handleBatch handles a read batch: the datagrams are opened first (on the
// crypto workers too), then handled in order. The buffers it keeps are set
// to nil in pbs.
func (in *inbound) handleBatch(cs *connState, pbs []*packetBuf, sizes []int, eps []conn.Endpoint, now time.Time) {
	in.open(pbs, sizes)
	for i, pb := range pbs {
		if in.handle(cs, pb, sizes[i], eps[i], now, &in.opened.items[i]) {
			pbs[i] = nil
		}
	}
	in.opened.reset()
	in.flush()
}

// inbound is the per-goroutine state of the receive path.
//
// Consecutive datagrams of one peer are handled under one hold of its lock, so
// batching survives. The packets its reorder buffer releases meanwhile are
// written to the TUN device after the lock is let go, in their turn
// (deliver.go): each path socket has its own reader, and a later batch of a
// flow must not overtake an earlier one.
type inbound struct {
	e      *Engine
	w      *writer
	cur    *peer // locked peer, if any
	toTUN  []*packetBuf
	turn   lanes.Ticket // toTUN's place in cur's delivery order
	tw     tunWrite
	repair fec.Repair // scratch for a received repair frame
	// rebuiltSeen is the peer's count of REBUILT reports when this goroutine
	// last looked (only to skip needless scans).
	rebuiltSeen int
	// acks are the locked peer's paths owed an ack, sent when the peer is
	// unlocked, at the latest at the end of the receive batch: one ack for a
	// batch instead of one per AckEvery datagrams. At high rates that is most of
	// the datagrams the receiver sends and a full stack traversal each.
	acks  []*pathState
	ackAt time.Time
	idx   idxCache
	src   lastLookup // the cryptokey routing check's last answer
	// opened is the read batch's transport datagrams, decrypted before they
	// are handled (open), and fork the scratch for splitting that work.
	opened openBatch
	fork   fanout.Fork
}

// openBatch is a receive batch's datagrams, opened ahead of their handling:
// the AEAD of each is independent of the others, while what follows (replay
// window, peer state, reorder, TUN order) is handled one datagram at a time,
// in arrival order.
type openBatch struct{ items []openItem }

// openItem is one datagram's decryption, done ahead of its handling. Only the
// replay window's check is done with it; the datagram takes its counter's slot
// (Keypair.Commit) when it is handled.
type openItem struct {
	ent     indexEntry // the receiver index's peer and keys (kp nil: not opened ahead)
	d       []byte
	plain   []byte
	counter uint64
	err     error
}

// Do decrypts items [lo, hi); the fanout pool calls it from several goroutines.
func (b *openBatch) Do(lo, hi int) {
	for i := lo; i < hi; i++ {
		if it := &b.items[i]; it.ent.kp != nil {
			it.plain, it.counter, it.err = it.ent.kp.Decrypt(it.d)
		}
	}
}

func (b *openBatch) reset() { clear(b.items) }

// open finds the keys of each transport datagram of a read batch and decrypts
// them, on the engine's crypto workers as well as this goroutine. Datagrams it
// cannot open ahead (no keys yet: a handshake answered in this very batch may
// install them) are opened when handled, as they always were.
func (in *inbound) open(pbs []*packetBuf, sizes []int) {
	if cap(in.opened.items) < len(sizes) {
		in.opened.items = make([]openItem, len(sizes))
	}
	items := in.opened.items[:len(sizes)]
	in.opened.items = items
	for i, n := range sizes {
		b := pbs[i].b
		if n >= len(b) || wire.MessageType(b[:n]) != wire.TypeData {
			continue
		}
		if ent, _, ok := in.keysFor(b[:n]); ok {
			items[i] = openItem{ent: ent, d: b[:n]}
		}
	}
	in.e.crypto.Run(&in.fork, &in.opened, len(items))
}

// keysFor finds the peer and keys of transport datagram d, or (ok false) the
// reason to drop it.
func (in *inbound) keysFor(d []byte) (ent indexEntry, drop dropReason, ok bool) {
	h, err := wire.ParseDataHeader(d)
	if err != nil {
		return indexEntry{}, dropMalformed, false
	}
	if in.e.otherServer(h.Receiver) {
		return indexEntry{}, dropWrongServer, false
	}
	ent, found := in.lookupIndex(h.Receiver)
	if !found || ent.kp == nil {
		return indexEntry{}, dropUnknownIndex, false
	}
	return ent, 0, true
}

// lookupIndex returns the peer and keys of receiver index idx. The entry found
// last is kept and used again without taking idxMu while no index has changed
// since (idxGen): a path's datagrams all carry one index, and the lock would
// be taken per datagram.
func (in *inbound) lookupIndex(idx uint32) (indexEntry, bool) {
	e := in.e
	if c := &in.idx; c.set && c.idx == idx && c.gen == e.idxGen.Load() {
		return c.ent, true
	}
	e.idxMu.RLock()
	ent, ok := e.indices[idx]
	gen := e.idxGen.Load() // under the lock: the count of this map's state
	e.idxMu.RUnlock()
	if ok {
		in.idx = idxCache{idx: idx, gen: gen, ent: ent, set: true}
	}
	return ent, ok
}

// idxCache is an inbound's last index lookup (lookupIndex).
type idxCache struct {
	idx uint32
	gen uint64
	ent indexEntry
	set bool
}

func (in *inbound) lockPeer(p *peer) {
	if in.cur == p {
		return
	}
	in.unlockPeer()
	p.mu.Lock()
	in.cur = p
}

func (in *inbound) unlockPeer() {
	p := in.cur
	if p == nil {
		return
	}
	in.sendAcks()
	in.w.seal() // before the lock goes: see writer.batch
	p.takeTurn(&in.turn, in.toTUN)
	p.mu.Unlock()
	in.cur = nil
	p.writeTurn(&in.turn, in.toTUN, &in.tw)
	in.toTUN = in.toTUN[:0]
}

// ackLater owes ps an ack at the end of the batch, or sends it now when the
// ack could otherwise no longer cover every packet it answers.
func (in *inbound) ackLater(p *peer, ps *pathState, rx *rxPath, now time.Time) {
	if rx.r.Unacked() >= path.AckMaxPending { // an ack must cover all it answers
		p.sendControl(in.w, ps, now, frameAckOnly, [wire.ChallengeLen]byte{})
		return
	}
	for _, q := range in.acks {
		if q == ps {
			return
		}
	}
	in.acks = append(in.acks, ps)
	in.ackAt = now
}

// sendAcks sends the acks owed to the locked peer's paths; those that rode on
// outgoing data meanwhile find nothing pending and send nothing.
func (in *inbound) sendAcks() {
	p := in.cur
	for i, ps := range in.acks {
		if p.live(ps) {
			p.sendControl(in.w, ps, in.ackAt, frameAckOnly, [wire.ChallengeLen]byte{})
		}
		in.acks[i] = nil
	}
	in.acks = in.acks[:0]
}

func (in *inbound) flush() {
	in.unlockPeer()
	in.w.flush()
}

// tunWrite is a goroutine's scratch for TUN writes: the batch's slices and the
// buffers in which the device can coalesce it (tundev.Stager).
type tunWrite struct {
	bufs   [][]byte
	stage  tundev.Stager
	byLane []*packetBuf // a release sorted by lane (writeTurn)
}

// tunWriteChunk bounds the packets of one TUN write: a receive batch with GRO
// can release over a thousand packets at once, and the room laid out for the
// device to coalesce them (tundev.Stager) grows with the write (1.8 MB per
// reader goroutine, 9 MB of a 4-path client's heap, before the bound).
const tunWriteChunk = 128

// writeTUN writes packets to the TUN device in batches of at most
// tunWriteChunk and recycles their buffers. tw may be nil on rare paths
// (session ends); the packets are then written without room to coalesce.
func (e *Engine) writeTUN(pbs []*packetBuf, tw *tunWrite) {
	if len(pbs) == 0 {
		return
	}
	stage := tw != nil && !e.cfg.NoOffload
	if tw == nil {
		tw = new(tunWrite) // a rare write: no arena for it
	}
	for len(pbs) > 0 {
		n := min(len(pbs), tunWriteChunk)
		e.writeTUNChunk(pbs[:n], tw, stage)
		pbs = pbs[n:]
	}
}

func (e *Engine) writeTUNChunk(pbs []*packetBuf, tw *tunWrite, stage bool) {
	bufs := tw.bufs[:0]
	for _, pb := range pbs {
		bufs = append(bufs, pb.b[pb.start-tunWriteOffset:pb.end])
	}
	e.counters.tunWrites.Add(1)
	e.counters.tunWritePkts.Add(uint64(len(bufs)))
	if stage && len(bufs) > 1 {
		if runs, pkts := tw.stage.Stage(bufs, tunWriteOffset); runs > 0 {
			e.counters.tunRuns.Add(uint64(runs))
			e.counters.tunRunPkts.Add(uint64(pkts))
		}
	}
	if _, err := e.tun.Write(bufs, tunWriteOffset); err != nil && !e.isClosing() {
		e.counters.drop(dropTUNWriteError)
		e.log.Debug("tun write", "err", err)
	}
	for i, pb := range pbs {
		e.pool.put(pb)
		pbs[i] = nil
	}
	clear(bufs)
	tw.bufs = bufs[:0]
}

// handle processes one datagram; it returns true if it kept pb. o is the
// datagram's decryption if open did it ahead (nil or without keys: not).
func (in *inbound) handle(cs *connState, pb *packetBuf, n int, ep conn.Endpoint, now time.Time, o *openItem) bool {
	e := in.e
	if n >= len(pb.b) {
		e.counters.drop(dropOversized)
		return false
	}
	d := pb.b[:n]
	switch wire.MessageType(d) {
	case wire.TypeData:
		return in.handleData(cs, pb, d, ep, now, o)
	case wire.TypeHandshakeInit:
		if e.role == Server {
			e.enqueueInitiation(cs, d, ep)
			return false
		}
	case wire.TypeHandshakeResp:
		in.unlockPeer()
		if e.role == Client {
			e.handleResponse(cs, d, ep, now, in.w)
			return false
		}
	case wire.TypeCookieReply:
		in.unlockPeer()
		if e.role == Client {
			e.handleCookieReply(cs, d, ep, now)
			return false
		}
	}
	e.counters.drop(dropMalformed)
	return false
}

func (in *inbound) handleData(cs *connState, pb *packetBuf, d []byte, ep conn.Endpoint, now time.Time, o *openItem) bool {
	e := in.e
	var (
		ent   indexEntry
		plain []byte
		ctr   uint64
		err   error
	)
	if o != nil && o.ent.kp != nil {
		ent, plain, ctr, err = o.ent, o.plain, o.counter, o.err
	} else {
		var (
			drop dropReason
			ok   bool
		)
		if ent, drop, ok = in.keysFor(d); !ok {
			e.counters.drop(drop)
			return false
		}
		plain, ctr, err = ent.kp.Decrypt(d)
	}
	switch {
	case errors.Is(err, noise.ErrReplay):
		e.counters.drop(dropReplayed)
		return false
	case err != nil:
		e.counters.drop(dropForged)
		return false
	}
	p := ent.peer
	in.lockPeer(p)
	// A client hears its server only on the paths it opened; checked before the
	// counter takes its replay-window slot, so that a copy raced in from another
	// source cannot make the genuine datagram look like a replay.
	if e.role == Client && p.byKey[p.keyFor(cs, ep)] == nil {
		e.counters.drop(dropUnvalidatedPath)
		return false
	}
	if !ent.kp.Commit(ctr) {
		e.counters.drop(dropReplayed)
		return false
	}
	if cs.auth != nil {
		cs.auth.Authenticated(ep, conn.PeerID(p.pub))
	}
	ih, err := wire.ParseInnerHeader(plain)
	if err != nil {
		e.counters.drop(dropMalformed)
		return false
	}
	if p.next == ent.kp {
		p.confirmNext(now)
	}
	p.lastRx = now
	ps := p.learnPath(cs, ep, ih.Path, len(d), now, in.w)
	if ps == nil {
		e.counters.drop(dropUnvalidatedPath)
		return false
	}
	ps.peerID = int(ih.Path)
	ps.rxBytes += uint64(len(d))
	ps.rxPackets++
	p.rxBytes += uint64(len(d))
	p.rxPackets++
	rx := p.rxFor(ih.Path)
	if rx == nil {
		e.counters.drop(dropMalformed)
		return false
	}
	// Acks for the peer's path go back where its datagrams arrive, but never to an
	// unvalidated source: an authenticated datagram relayed from elsewhere (an
	// on-path attacker, or a client mid-rebinding) would otherwise take the acks
	// there, where nothing is sent before validation, and the peer's path would die.
	if ps.validated || rx.arrival == nil {
		rx.arrival = ps
	}
	eliciting := ih.Flags&wire.FlagAckEliciting != 0
	ackNow := rx.r.OnPacket(ih.Seq, len(d), ih.TxUs, e.nowUs(now), eliciting, now)

	kept := false
	acked := false    // an ACK frame may have opened a congestion window
	answered := false // at most one RESPONSE per datagram
	frames := plain[wire.InnerHeaderLen:]
	for len(frames) > 0 {
		frameAt := wire.DataHeaderLen + len(plain) - len(frames)
		if frames[0] == wire.FrameRepair {
			rest, err := fec.ParseRepair(frames, &in.repair)
			if err != nil {
				e.counters.drop(dropMalformed)
				break
			}
			frames = rest
			in.fecRepair(p, &in.repair, now)
			continue
		}
		cur := frames
		f, rest, err := wire.NextFrame(frames)
		if err != nil {
			e.counters.drop(dropMalformed)
			break
		}
		frames = rest
		switch f.Type {
		case wire.FrameData:
			if kept {
				// One DATA frame per datagram: a second one is a protocol error.
				e.counters.drop(dropMalformed)
				continue
			}
			p.lastData, p.released = now, false
			in.fecData(p, cur[:len(cur)-len(rest)], f.Flow, f.FlowSeq, now)
			kept = in.deliver(p, pb, frameAt+wire.DataFrameHeaderLen, f, now)
		case wire.FrameAck:
			if int(f.Ack.Path) < len(p.paths) {
				if tp := p.paths[f.Ack.Path]; tp != nil {
					if tp.cc == nil {
						tp.sender.OnAck(fromWireAck(f.Ack), now)
					} else {
						prior := tp.sender.InFlight()
						p.ccAck(tp, prior, tp.sender.OnAck(fromWireAck(f.Ack), now), now)
						acked = true
					}
					// The client received a datagram sent to the endpoint the
					// path moved to: that endpoint delivers to it.
					if tp.amp && int32(f.Ack.Largest-tp.ampSeq) >= 0 {
						tp.amp = false
					}
				}
			}
		case wire.FrameGiveUp:
			in.toTUN = p.reorder.Abandon(f.Flow&uint16(len(p.flowSq)-1), f.FlowSeq, now, in.toTUN)
		case wire.FrameRebuilt:
			p.peerRebuilt(f.Flow, f.FlowSeq)
		case wire.FramePathGone:
			if e.role == Server {
				p.peerPathGone(f.Ack.Path, now)
			}
		case wire.FramePing:
			ackNow = rx.r.OnPing() || ackNow
		case wire.FrameChallenge:
			// Only clients answer, once per datagram, on paths they opened: a
			// server never needs to (it does not ask clients to prove it), and
			// answering would let a client aim responses at a spoofed source.
			if e.role != Client || answered || !ps.validated {
				e.counters.drop(dropChallengeUnanswered)
				continue
			}
			answered = true
			p.sendControl(in.w, ps, now, frameResponse, f.Challenge)
		case wire.FrameResponse:
			if e.role != Server || p.answerBack(f.Challenge, now, in.w) {
				continue
			}
			if !ps.validated && !ps.ready && ps.lostAt.IsZero() && !ps.chalSent.IsZero() && f.Challenge == ps.chal {
				ps = p.validatedBy(ps, now, in.w)
				if ps.validated {
					p.sendCookie(in.w, ps, now) // before the client's next rekey
				}
			}
		case wire.FrameCookie:
			// Only the server's cookie for one of our own paths is of use: a
			// client's initiations from there carry mac2 with it.
			if e.role == Client && ps.validated {
				ps.cookie, ps.cookieAt = f.Cookie, now
			}
		case wire.FrameClose:
			// A handshake answered but not yet confirmed survives: it opens a
			// newer session than the one closed. (A restarted client's old
			// instance sends its close before the new one's initiation, but on
			// another path it can arrive after the server has answered it.)
			e.log.Info("peer closed the session", "peer", p.name)
			p.endSession(now, true)
			return kept
		}
	}
	if ackNow && ps.validated {
		in.ackLater(p, ps, rx, now)
	}
	// Resends first: they repair what the windows admitted already.
	p.processLosses(in.w, now)
	if len(p.deferred) > 0 && p.rebuiltPos != in.rebuiltSeen {
		// A REBUILT report may settle a deferred loss.
		p.processDeferred(in.w, now)
	}
	in.rebuiltSeen = p.rebuiltPos
	p.flushNotices(in.w, now)
	if acked {
		p.drainQueue(in.w, now, true)
	}
	return kept
}

// deliver passes an inner packet to the reorder buffer; packets it releases are queued
// for the TUN device. It returns true if pb was kept.
func (in *inbound) deliver(p *peer, pb *packetBuf, start int, f wire.Frame, now time.Time) bool {
	e := in.e
	pkt := f.Packet
	src, ok := innerSrc(pkt)
	if !ok {
		e.counters.drop(dropBadInner)
		return false
	}
	if a := e.allowed.Load(); a != nil && in.src.lookup(a, src) != p {
		// Cryptokey routing: a client may only send from its own prefixes, a
		// server only from what the client routes into the tunnel.
		e.counters.drop(dropSpoofedSource)
		return false
	}
	p.clampSYN(pkt)
	pb.start, pb.end = start, start+len(pkt)
	var dup bool
	flow, class := f.Flow&uint16(len(p.flowSq)-1), p.flowClass(pkt)
	pb.flow = flow
	if e.role == Server {
		p.markAsked(flow, now)
	}
	if reorder.PureAck(pkt) {
		in.toTUN, dup = p.reorder.PushUnordered(flow, f.FlowSeq, pb, class, now, in.toTUN)
	} else {
		in.toTUN, dup = p.reorder.PushClass(flow, f.FlowSeq, pb, class, now, in.toTUN)
	}
	return !dup
}

func fromWireAck(a wire.Ack) path.Ack {
	return path.Ack{
		Largest:   a.Largest,
		Bitmap:    a.Bitmap,
		AckDelay:  time.Duration(a.AckDelayUs) * time.Microsecond,
		RxPackets: a.RxPackets,
		RxBytes:   a.RxBytes,
		OWDRaw:    a.OWDRaw,
	}
}
