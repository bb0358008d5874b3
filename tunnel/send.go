package tunnel

import (
	"time"

	"github.com/braid-vpn/braid/conn"
	"github.com/braid-vpn/braid/path"
	"github.com/braid-vpn/braid/wire"
)

// writer collects outgoing datagrams per socket so each goroutine sends them in
// batches (sendmmsg) after it has processed a batch of input.
type writer struct {
	e  *Engine
	qs []outQueue
}

type outQueue struct {
	cs   *connState
	bufs [][]byte
	eps  []conn.Endpoint
	pbs  []*packetBuf
}

func (w *writer) add(cs *connState, pb *packetBuf, dgram []byte, ep conn.Endpoint) {
	for len(w.qs) <= cs.idx {
		w.qs = append(w.qs, outQueue{})
	}
	q := &w.qs[cs.idx]
	q.cs = cs
	q.bufs = append(q.bufs, dgram)
	q.eps = append(q.eps, ep)
	q.pbs = append(q.pbs, pb)
	if bs := cs.c.BatchSize(); len(q.bufs) >= bs {
		w.flushQueue(q)
	}
}

func (w *writer) flush() {
	for i := range w.qs {
		if len(w.qs[i].bufs) > 0 {
			w.flushQueue(&w.qs[i])
		}
	}
}

func (w *writer) flushQueue(q *outQueue) {
	if err := q.cs.c.WriteBatch(q.bufs, q.eps); err != nil {
		// A path whose interface went away fails here; its liveness detection takes
		// it out of service, so one count per batch is enough.
		w.e.counters.drop(dropSendError)
	}
	for i, pb := range q.pbs {
		w.e.pool.put(pb)
		q.pbs[i] = nil
		q.bufs[i] = nil
	}
	q.bufs, q.eps, q.pbs = q.bufs[:0], q.eps[:0], q.pbs[:0]
}

// frame kinds for control datagrams.
type controlFrame uint8

const (
	framePing controlFrame = iota
	frameChallenge
	frameResponse
	frameAckOnly
	frameClose
)

const innerStart = wire.DataHeaderLen + wire.InnerHeaderLen

// sendControl builds, seals and queues a datagram that carries no data: a ping, a
// challenge or its response, a close, or just acks. Pending acks for the path ride
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
	kp := p.cur
	seq := ps.sender.NextSeq()
	var flags uint8
	if ackEliciting {
		flags = wire.FlagAckEliciting
	}
	wire.PutInnerHeader(pb.b[wire.DataHeaderLen:], wire.InnerHeader{Seq: seq, TxUs: p.e.nowUs(now), Path: ps.id, Flags: flags})
	dgram, err := kp.Seal(pb.b, wire.InnerHeaderLen+n)
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
	w.add(ps.cs, pb, dgram, ps.ep)
	return true
}
