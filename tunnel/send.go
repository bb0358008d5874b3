package tunnel

import (
	"sync"
	"time"

	"github.com/braid-vpn/braid/conn"
	"github.com/braid-vpn/braid/fanout"
	"github.com/braid-vpn/braid/noise"
	"github.com/braid-vpn/braid/path"
	"github.com/braid-vpn/braid/wire"
)

// writer sends the datagrams a goroutine seals, in batches (sendmmsg, GSO runs)
// after it has processed a batch of input. The datagrams go into their
// socket's queue (connState.out), not into a queue of the goroutine's own:
// several goroutines seal datagrams of one path (the TUN reader, the socket
// readers, the timers) under the peer's lock and send them after letting it
// go, and with a queue each, one goroutine's later datagrams could reach the
// wire before another's earlier ones. The receiver then saw holes the path
// never made, acked past them, and the sender declared the skipped datagrams
// lost: at gigabit rates on one veth, 5533 spurious losses in 590 000
// datagrams, each resent, and FEC repairs on top. Queued in sealing order and
// sent by one goroutine at a time, a socket's datagrams leave in that order.
type writer struct {
	e    *Engine
	used []*connState // sockets this writer queued on since its last flush
	// batch: sealAndQueue takes each datagram's counter at once but leaves its
	// cipher work to seal, which does a whole batch on the engine's crypto
	// workers (fanout) and only then queues the datagrams, in sealing order.
	// The goroutine must call seal before it lets the peer's lock go, so that
	// the order of a path's datagrams on the socket stays the order of their
	// sequence numbers. Set for the TUN reader and the socket readers, which
	// seal batches; the timers and rare paths seal one at a time.
	batch bool
	pend  sealBatch
	fork  fanout.Fork
}

// newBatchWriter returns a writer that seals in batches (writer.batch).
func newBatchWriter(e *Engine) *writer { return &writer{e: e, batch: true} }

// sealBatch is a writer's datagrams waiting for their cipher work.
type sealBatch struct{ items []sealItem }

type sealItem struct {
	cs      *connState
	pb      *packetBuf
	dgram   []byte
	ep      conn.Endpoint
	kp      *noise.Keypair
	counter uint64
}

// Do encrypts items [lo, hi); the fanout pool calls it from several goroutines.
func (b *sealBatch) Do(lo, hi int) {
	for i := lo; i < hi; i++ {
		it := &b.items[i]
		it.kp.SealBody(it.dgram, it.counter)
	}
}

// seal finishes the datagrams sealAndQueue left (on several cores when the
// engine has crypto workers) and queues them on their sockets in order.
func (w *writer) seal() {
	items := w.pend.items
	if len(items) == 0 {
		return
	}
	w.e.crypto.Run(&w.fork, &w.pend, len(items))
	for i := range items {
		it := &items[i]
		w.add(it.cs, it.pb, it.dgram, it.ep)
		*it = sealItem{}
	}
	w.pend.items = items[:0]
}

// outQueue is a socket's datagrams waiting to be sent, in the order they were
// sealed. q is appended to under mu; the goroutine holding sending swaps it
// with spare and sends it, so appending never waits for a system call.
type outQueue struct {
	mu      sync.Mutex
	sending sync.Mutex
	q       outBatch
	spare   outBatch // only touched while sending is held
}

type outBatch struct {
	bufs [][]byte
	eps  []conn.Endpoint
	pbs  []*packetBuf
}

func (w *writer) add(cs *connState, pb *packetBuf, dgram []byte, ep conn.Endpoint) {
	o := &cs.out
	o.mu.Lock()
	o.q.bufs = append(o.q.bufs, dgram)
	o.q.eps = append(o.q.eps, ep)
	o.q.pbs = append(o.q.pbs, pb)
	full := len(o.q.bufs) >= cs.c.BatchSize()
	o.mu.Unlock()
	if full {
		w.e.sendQueued(cs)
		return
	}
	for _, u := range w.used {
		if u == cs {
			return
		}
	}
	w.used = append(w.used, cs)
}

func (w *writer) flush() {
	w.seal()
	for i, cs := range w.used {
		w.e.sendQueued(cs)
		w.used[i] = nil
	}
	w.used = w.used[:0]
}

// sendQueued sends what cs's queue holds (also what other goroutines queued:
// taking it all keeps the order and makes larger batches).
func (e *Engine) sendQueued(cs *connState) {
	o := &cs.out
	o.sending.Lock()
	defer o.sending.Unlock()
	o.mu.Lock()
	b := o.q
	o.q = o.spare
	o.mu.Unlock()
	if len(b.bufs) > 0 {
		if err := cs.c.WriteBatch(b.bufs, b.eps); err != nil {
			// A path whose interface went away fails here; its liveness detection
			// takes it out of service, so one count per batch is enough.
			e.counters.drop(dropSendError)
		}
		for i, pb := range b.pbs {
			e.pool.put(pb)
			b.pbs[i] = nil
			b.bufs[i] = nil
		}
	}
	o.spare = outBatch{bufs: b.bufs[:0], eps: b.eps[:0], pbs: b.pbs[:0]}
}

// frame kinds for control datagrams.
type controlFrame uint8

const (
	framePing controlFrame = iota
	frameChallenge
	frameResponse
	frameAckOnly
	frameClose
	frameCookie
)

const innerStart = wire.DataHeaderLen + wire.InnerHeaderLen

// sendControl builds, seals and queues a datagram that carries no data: a ping, a
// challenge or its response, a close, a cookie, or just acks. Pending acks for the path ride
// along. Caller holds p.mu.
func (p *peer) sendControl(w *writer, ps *pathState, now time.Time, kind controlFrame, chal [wire.ChallengeLen]byte) {
	if p.cur == nil {
		return
	}
	pb := p.e.pool.get()
	b := pb.b[innerStart:innerStart]
	eliciting := false
	switch kind {
	case framePing:
		b = wire.AppendPing(b)
		eliciting = true
	case frameChallenge:
		b = wire.AppendChallenge(b, chal, false)
		eliciting = true
	case frameResponse:
		b = wire.AppendChallenge(b, chal, true)
	case frameClose:
		b = wire.AppendClose(b)
	case frameCookie:
		b = wire.AppendCookie(b, p.e.cookies.Current(ps.ep.Remote, now))
	}
	b = p.appendAcks(b, 0, ps, now)
	if len(b) == 0 {
		p.e.pool.put(pb)
		return
	}
	p.sealAndQueue(w, ps, pb, len(b), eliciting, now)
}

// appendAcks adds ACK frames for the peer paths whose datagrams arrive on ps, as many
// as fit: used is what the plaintext already holds before b (frames of this
// datagram), and the datagram must stay within the outer MTU of ps's address family
// and within the buffer.
func (p *peer) appendAcks(b []byte, used int, ps *pathState, now time.Time) []byte {
	if !ps.validated {
		return b
	}
	limit := p.plainLimit(ps) - wire.InnerHeaderLen
	for _, r := range p.rxList {
		if r.arrival != ps || !r.r.Pending() {
			continue
		}
		if used+len(b)+wire.AckFrameLen > limit || cap(b)-len(b) < wire.AckFrameLen+wire.TagLen {
			break
		}
		b = appendAck(b, r.id, r.r.BuildAck(now))
	}
	return b
}

func appendAck(b []byte, id uint16, a path.Ack) []byte {
	return wire.AppendAck(b, wire.Ack{
		Path:       id,
		Largest:    a.Largest,
		Bitmap:     a.Bitmap,
		AckDelayUs: uint32(a.AckDelay / time.Microsecond),
		RxPackets:  a.RxPackets,
		RxBytes:    a.RxBytes,
		OWDRaw:     a.OWDRaw,
	})
}

// sealAndQueue finishes a datagram whose frames are at pb.b[innerStart:innerStart+n]:
// inner header, encryption in place, path accounting, and queues it on ps's socket.
func (p *peer) sealAndQueue(w *writer, ps *pathState, pb *packetBuf, n int, ackEliciting bool, now time.Time) bool {
	return p.sealAndQueueTo(w, ps, ps.ep, pb, n, ackEliciting, now)
}

// sealAndQueueTo is sealAndQueue to ep, which is ps's endpoint or the endpoint ps
// left (a back challenge). To an endpoint a path moved to and that has not acked
// yet (amp), a datagram goes only while the bytes sent there stay within three
// times the bytes received from it; the others are dropped before they take a
// sequence number.
func (p *peer) sealAndQueueTo(w *writer, ps *pathState, ep conn.Endpoint, pb *packetBuf, n int, ackEliciting bool, now time.Time) bool {
	if ps.amp && ep == ps.ep {
		size := wire.DataHeaderLen + wire.InnerHeaderLen + n + wire.TagLen
		if ps.unvTx+size > 3*ps.unvRx {
			p.e.pool.put(pb)
			p.e.counters.drop(dropUnvalidatedPath)
			return false
		}
		ps.unvTx += size
	}
	kp := p.cur
	seq := ps.sender.NextSeq()
	var flags uint8
	if ackEliciting {
		flags = wire.FlagAckEliciting
	}
	wire.PutInnerHeader(pb.b[wire.DataHeaderLen:], wire.InnerHeader{Seq: seq, TxUs: p.e.nowUs(now), Path: ps.id, Flags: flags})
	dgram, counter, err := kp.SealHeader(pb.b, wire.InnerHeaderLen+n)
	if err != nil {
		p.e.pool.put(pb)
		p.e.counters.drop(dropNoSession)
		return false
	}
	ps.sender.OnSent(seq, len(dgram), ackEliciting, now)
	if ps.cc != nil && ackEliciting {
		ps.cc.OnSent(len(dgram), ps.sender.InFlight(), now)
	}
	p.txPackets++
	p.txBytes += uint64(len(dgram))
	p.lastTx = now
	if w.batch {
		w.pend.items = append(w.pend.items, sealItem{cs: ps.cs, pb: pb, dgram: dgram, ep: ep, kp: kp, counter: counter})
	} else {
		kp.SealBody(dgram, counter)
		w.add(ps.cs, pb, dgram, ep)
	}
	return true
}

// cookieRefresh is how often a server gives each validated path of a client a
// fresh cookie even when its cookie secret has not changed: a lost COOKIE frame
// then costs the client at most this long, far within the time it uses a cookie
// (noise.CookieUseFor).
const cookieRefresh = 30 * time.Second

// sendCookie gives the client, on a validated path, the cookie of the path's
// endpoint (server), unless it has a current one from us: so every initiation
// the client sends from there carries a valid mac2, which puts it in buckets of
// the server's limiter no spoofer can drain, and lets it through when the server
// is under load. A new one goes when the path is new or moved, when the server's
// cookie secret changes, and every cookieRefresh. Caller holds p.mu.
func (p *peer) sendCookie(w *writer, ps *pathState, now time.Time) {
	e := p.e
	if e.role != Server || !ps.validated || p.cur == nil {
		return
	}
	epoch := e.cookies.Epoch(now)
	if ps.cookieTo == ps.ep.Remote && ps.cookieEpoch == epoch && now.Sub(ps.cookieSent) < cookieRefresh {
		return
	}
	ps.cookieTo, ps.cookieEpoch, ps.cookieSent = ps.ep.Remote, epoch, now
	p.sendControl(w, ps, now, frameCookie, [wire.ChallengeLen]byte{})
}
