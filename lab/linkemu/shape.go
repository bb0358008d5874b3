package linkemu

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Defaults: what a Shape leaves at zero, and the sizes of a Link.
const (
	DefaultQueuePackets = 1000    // netem's default limit (which also counts its delay line)
	DefaultSocketBuffer = 4 << 20 // per AF_PACKET socket and way: absorbs bursts while the reader is descheduled
	DefaultMaxInFlight  = 65536   // frames a direction holds (then DroppedNoBuffer): 100 ms of 1 Gbit/s
)

// Distribution is the shape of the jitter around Delay.
type Distribution uint8

const (
	JitterUniform Distribution = iota // uniform in [-Jitter, +Jitter), netem's default
	JitterNormal                      // normal with σ = Jitter, netem's `distribution normal`
)

// Shape is what one direction of a link does to the frames crossing it. The
// zero Shape forwards everything at once.
type Shape struct {
	Rate          uint64        // bit/s (see Serializer); 0 = unlimited, no queue
	Delay, Jitter time.Duration // after serialization; a total below zero is clamped to zero
	JitterDist    Distribution
	Loss          Loss
	// QueueBytes and QueuePackets limit the frames admitted but not yet
	// serialized: 0 = no limit of that kind, both 0 with a Rate means
	// DefaultQueuePackets.
	QueueBytes, QueuePackets int
	Medium                   *Medium // capacity shared with others, instead of Rate and the queue (then zero)
	Seed                     uint64  // the two directions of a Link draw different streams from it
	// Trace is the capacity over time instead of Rate (Rate must then be
	// 0; not with Medium): see Serializer. Schedule changes the delay over
	// time and drops frames in bursts (nil = none). Both restart, time 0 =
	// now, at Start, SetShape and Reseed.
	Trace    *Trace
	Schedule *Schedule
}

// Validate reports settings that make no sense.
func (s Shape) Validate() error {
	switch {
	case s.Delay < 0 || s.Jitter < 0:
		return fmt.Errorf("linkemu: negative delay %v or jitter %v", s.Delay, s.Jitter)
	case s.JitterDist > JitterNormal:
		return fmt.Errorf("linkemu: unknown jitter distribution %d", s.JitterDist)
	case s.QueueBytes < 0 || s.QueuePackets < 0:
		return fmt.Errorf("linkemu: negative queue limit (%d bytes, %d packets)", s.QueueBytes, s.QueuePackets)
	case s.Medium != nil && (s.Rate != 0 || s.QueueBytes != 0 || s.QueuePackets != 0):
		return fmt.Errorf("linkemu: a direction on a shared medium takes its rate and queue from the medium (got rate %d, queue %d bytes, %d packets)", s.Rate, s.QueueBytes, s.QueuePackets)
	case s.Trace != nil && (s.Rate != 0 || s.Medium != nil):
		return fmt.Errorf("linkemu: a trace sets the capacity: want no Rate and no Medium with it (got rate %d, medium %v)", s.Rate, s.Medium != nil)
	case s.Trace != nil && len(s.Trace.ms) == 0:
		return fmt.Errorf("linkemu: empty Trace (build one with ParseTrace or NewTrace)")
	}
	if err := s.Schedule.Validate(); err != nil {
		return err
	}
	return s.Loss.Validate()
}

// verdict is what a direction decided about one frame.
type verdict uint8

const (
	forward   verdict = iota // scheduled for sending
	dropLoss                 // lost by the loss model
	dropQueue                // tail-dropped by the serialization queue
	dropBurst                // in a loss burst of the Schedule
)

// Stream constants: one seed drives loss and jitter of both directions apart.
const (
	streamLoss   = 0x6c6f7373 // "loss"
	streamJitter = 0x6a697474 // "jitt"
)

func newRNG(seed uint64, stream uint64, dir Direction) *rand.Rand {
	return rand.New(rand.NewPCG(seed, stream^uint64(dir)<<32))
}

// pipe is the pure per-direction model: loss, loss bursts, serialization,
// delay, jitter.
type pipe struct {
	shape       Shape
	loss        lossChain
	ser         *Serializer
	lossR, jitR *rand.Rand
	marks       lossMarks
	origin      time.Duration // time 0 of the trace and the schedule
	lastSend    time.Duration // without jitter, the latest send time: keeps the FIFO when the delay falls
}

// FirstLosses is how many losses a direction keeps as the mark of its loss
// sequence (Link.FirstLosses).
const FirstLosses = 32

// lossMarks is how many frames the loss model judged since the last
// (re)seed and which of them were the first it dropped: the same for two
// runs with the same seed whatever traffic they carried.
type lossMarks struct {
	judged uint64
	first  [FirstLosses]uint64
	n      int
}

func newPipe(s Shape, dir Direction) *pipe {
	qb, qp := s.QueueBytes, s.QueuePackets
	if (s.Rate > 0 || s.Trace != nil) && qb == 0 && qp == 0 {
		qp = DefaultQueuePackets
	}
	p := &pipe{shape: s, ser: NewSerializer(s.Rate, qb, qp)}
	if s.Trace != nil {
		p.ser = NewTraceSerializer(s.Trace, qb, qp)
	}
	p.reseed(s.Seed, dir)
	return p
}

// restart makes now time 0 of the trace and the schedule. Frames already
// admitted keep their times; the order of sending stays FIFO (lastSend).
func (p *pipe) restart(now time.Duration) {
	p.origin = now
	p.ser.restartTrace(now)
}

// offered is what the trace offered from its restart until now, in bytes.
func (p *pipe) offered(now time.Duration) uint64 {
	if p.shape.Trace == nil {
		return 0
	}
	return p.shape.Trace.OfferedBytes(now - p.origin)
}

// reseed restarts the loss and jitter streams from seed and the loss chain
// in its initial state; the serializer and the frames in flight are kept.
func (p *pipe) reseed(seed uint64, dir Direction) {
	p.shape.Seed = seed
	p.loss = lossChain{Loss: p.shape.Loss}
	p.lossR = newRNG(seed, streamLoss, dir)
	p.jitR = newRNG(seed, streamJitter, dir)
	p.marks = lossMarks{}
}

// Drops returns the first n loss decisions (true = lost) that direction dir
// of a link with shape s makes from its start or from a Reseed with s.Seed:
// the emulator's loss sequence, as the frames will meet it whatever they
// carry. Loss is judged before the queue, so queue drops do not change it.
func Drops(s Shape, dir Direction, n int) []bool {
	m, rng := lossChain{Loss: s.Loss}, newRNG(s.Seed, streamLoss, dir)
	out := make([]bool, n)
	for i := range out {
		out[i] = m.drop(rng)
	}
	return out
}

// admit decides the fate of a frame of size bytes received at now and, if
// it is forwarded, when it is to be sent.
func (p *pipe) admit(now time.Duration, size int) (sendAt time.Duration, v verdict) {
	lost, m := p.loss.drop(p.lossR), &p.marks
	if lost && m.n < len(m.first) {
		m.first[m.n] = m.judged
		m.n++
	}
	m.judged++
	if lost {
		return 0, dropLoss
	}
	// After the loss model, so that it judges every frame whatever the
	// bursts (Drops and FirstLosses stay independent of timing).
	sc := p.shape.Schedule
	if sc.DroppingAt(now - p.origin) {
		return 0, dropBurst
	}
	var depart time.Duration
	var ok bool
	if p.shape.Medium != nil {
		depart, ok = p.shape.Medium.admit(now, size)
	} else {
		depart, ok = p.ser.Admit(now, size)
	}
	if !ok {
		return 0, dropQueue
	}
	d := p.shape.Delay
	if i, _ := sc.step(depart - p.origin); i >= 0 {
		d = sc.Steps[i].Delay // at departure from the bottleneck
	}
	if jit := float64(p.shape.Jitter); jit > 0 {
		if p.shape.JitterDist == JitterNormal {
			jit *= p.jitR.NormFloat64()
		} else {
			jit *= 2*p.jitR.Float64() - 1
		}
		return depart + max(d+time.Duration(jit), 0), forward
	}
	// A falling delay must not let a frame overtake the ones before it: a
	// real link is FIFO. (Jitter reorders on purpose.)
	at := max(depart+d, p.lastSend)
	p.lastSend = at
	return at, forward
}
