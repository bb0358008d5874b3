package path

import (
	"testing"
	"time"
)

var base = time.Unix(1_000_000, 0)

func ms(v float64) time.Time { return base.Add(time.Duration(v * float64(time.Millisecond))) }

func dms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// allBelow is a bitmap acking every one of the 64 seqs below Largest.
const allBelow = ^uint64(0)

// sendAck sends one ack-eliciting packet of size bytes at sentMs and acks it
// alone (bitmap 0) at ackMs with the given ack delay; it returns the seq.
func sendAck(s *Sender, size int, sentMs, ackMs float64, ackDelay time.Duration) uint32 {
	seq := s.NextSeq()
	s.OnSent(seq, size, true, ms(sentMs))
	s.OnAck(Ack{Largest: seq, AckDelay: ackDelay}, ms(ackMs))
	return seq
}

func eqDur(t *testing.T, name string, got, want time.Duration) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v (%d ns), want %v (%d ns)", name, got, int64(got), want, int64(want))
	}
}

// sim joins a Sender and a Receiver through an emulated link with a fixed
// one-way delay in both directions, stepping in 1 ms of simulated time. It
// plays the engine: OnTimer every 5 ms (probes on needProbe), immediate or
// delayed acks from the Receiver, and optional data traffic while the path
// is usable.
type sim struct {
	now      time.Time
	s        *Sender
	r        *Receiver
	owd      time.Duration
	fwdUp    bool
	revUp    bool
	drop     func(seq uint32) bool // forward loss pattern
	dataGap  time.Duration         // 0 = idle; else one data packet per gap while usable
	dataSize int
	lastData time.Time
	fwd      []simPkt
	rev      []simAck
	probes   []time.Time
	downAt   []time.Time // times the Sender entered Down
	lastAck  time.Time   // last ack delivered to the Sender
	wasDown  bool
}

type simPkt struct {
	at         time.Time
	seq        uint32
	size       int
	txUs       uint32
	elic, ping bool
}

type simAck struct {
	at time.Time
	a  Ack
}

func newSim(cfg Config, owd time.Duration) *sim {
	return &sim{
		now:      base,
		s:        NewSender(cfg, base),
		r:        NewReceiver(cfg),
		owd:      owd,
		fwdUp:    true,
		revUp:    true,
		dataSize: 1200,
	}
}

func usClock(t time.Time, offset uint32) uint32 {
	return uint32(t.Sub(base)/time.Microsecond) + offset
}

func (m *sim) send(size int, elic, ping bool) {
	seq := m.s.NextSeq()
	m.s.OnSent(seq, size, elic, m.now)
	if !m.fwdUp || (m.drop != nil && m.drop(seq)) {
		return
	}
	m.fwd = append(m.fwd, simPkt{at: m.now.Add(m.owd), seq: seq, size: size,
		txUs: usClock(m.now, 0x7000_0000), elic: elic, ping: ping})
}

func (m *sim) ack() {
	a := m.r.BuildAck(m.now)
	if m.revUp {
		m.rev = append(m.rev, simAck{at: m.now.Add(m.owd), a: a})
	}
}

func (m *sim) step() {
	m.now = m.now.Add(time.Millisecond)
	n := 0
	for _, p := range m.fwd {
		if p.at.After(m.now) {
			m.fwd[n] = p
			n++
			continue
		}
		now := m.r.OnPacket(p.seq, p.size, p.txUs, usClock(m.now, 0x1234_5678), p.elic, m.now)
		if p.ping {
			now = m.r.OnPing() || now
		}
		if now {
			m.ack()
		}
	}
	m.fwd = m.fwd[:n]
	if m.r.AckDue(m.now) {
		m.ack()
	}
	n = 0
	for _, a := range m.rev {
		if a.at.After(m.now) {
			m.rev[n] = a
			n++
			continue
		}
		m.s.OnAck(a.a, m.now)
		m.lastAck = m.now
	}
	m.rev = m.rev[:n]
	if m.now.Sub(base)%(5*time.Millisecond) == 0 {
		if m.s.OnTimer(m.now) {
			m.probes = append(m.probes, m.now)
			m.send(40, true, true)
		}
	}
	if d := m.s.State() == Down; d != m.wasDown {
		if d {
			m.downAt = append(m.downAt, m.now)
		}
		m.wasDown = d
	}
	if m.dataGap > 0 && m.s.Usable() && m.now.Sub(m.lastData) >= m.dataGap {
		m.lastData = m.now
		m.send(m.dataSize, true, false)
	}
}

func (m *sim) run(d time.Duration) {
	end := m.now.Add(d)
	for m.now.Before(end) {
		m.step()
	}
}

// runUntil steps until cond holds or d elapsed; it reports whether cond held.
func (m *sim) runUntil(d time.Duration, cond func() bool) bool {
	end := m.now.Add(d)
	for m.now.Before(end) {
		m.step()
		if cond() {
			return true
		}
	}
	return false
}
