package linkemu

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Defaults. A scenario normally sets every Shape field it cares about;
// these only fill what it leaves at zero.
const (
	// DefaultQueuePackets is the queue limit of a rate-limited direction
	// whose Shape sets neither QueueBytes nor QueuePackets: 1000 frames,
	// netem's default limit (netem counts its whole delay line against it,
	// this emulator only the frames waiting for or in serialization).
	DefaultQueuePackets = 1000

	// DefaultSocketBuffer is the receive and send buffer of each AF_PACKET
	// socket (bytes, set with SO_*BUFFORCE): 4 MiB absorbs bursts of a
	// few thousand frames while the reader is descheduled, so the kernel
	// does not drop frames before the emulator has seen them.
	DefaultSocketBuffer = 4 << 20

	// DefaultMaxInFlight bounds the frames one direction holds (queued for
	// serialization or in the delay line). Frame buffers are allocated on
	// demand up to this many and then reused; beyond it frames are dropped
	// and counted as DroppedNoBuffer. 65536 frames hold 100 ms of a
	// 1 Gbit/s link with room to spare.
	DefaultMaxInFlight = 65536
)

// Distribution is the shape of the jitter around Delay.
type Distribution uint8

const (
	// JitterUniform draws the extra delay uniformly from [-Jitter, +Jitter)
	// (netem's default without a distribution table).
	JitterUniform Distribution = iota
	// JitterNormal draws it from a normal distribution with standard
	// deviation Jitter (netem's `distribution normal`).
	JitterNormal
)

func (d Distribution) String() string {
	switch d {
	case JitterUniform:
		return "uniform"
	case JitterNormal:
		return "normal"
	}
	return fmt.Sprintf("Distribution(%d)", uint8(d))
}

// Shape is what one direction of a link does to the frames crossing it.
// The zero Shape forwards everything at once.
//
// The order is that of a real link, loss first as netem does it: a frame
// is first judged by the loss model (a lost frame costs no capacity, as in
// netem), then it joins the serialization queue (tail drop beyond the
// limit), is serialized at Rate, and then travels for Delay ± jitter before
// it is sent out of the other interface.
type Shape struct {
	// Rate in bit/s; 0 = unlimited (no serialization delay, no queue). A
	// frame's size is the Ethernet frame the socket sees (14-byte header
	// plus payload, no preamble, FCS or inter-frame gap), the same length
	// netem's rate accounts.
	Rate uint64

	// Delay is the one-way propagation delay added after serialization.
	Delay time.Duration

	// Jitter spreads the delay: uniform in [Delay-Jitter, Delay+Jitter) or
	// normal with standard deviation Jitter (JitterDist). A total below
	// zero is clamped to zero. With jitter, frames may overtake each other,
	// as they do in netem; without it, order is preserved.
	Jitter     time.Duration
	JitterDist Distribution

	// Loss is the loss model (the zero value loses nothing).
	Loss Loss

	// QueueBytes and QueuePackets limit the frames admitted but not yet
	// serialized (the one on the wire included); 0 = no limit of that
	// kind. Both 0 with Rate > 0 means DefaultQueuePackets. Ignored when
	// Rate is 0.
	QueueBytes   int
	QueuePackets int

	// Medium, if set, is the capacity this direction shares with others:
	// its frames serialize on the medium, and Rate and the queue limits
	// above must be zero (the medium's apply).
	Medium *Medium

	// Seed makes loss and jitter reproducible: the same Seed and the same
	// sequence of frames give the same decisions. The two directions of a
	// Link draw from different streams even with equal seeds.
	Seed uint64
}

// Validate reports settings that make no sense.
func (s Shape) Validate() error {
	if s.Delay < 0 || s.Jitter < 0 {
		return fmt.Errorf("linkemu: negative delay %v or jitter %v", s.Delay, s.Jitter)
	}
	if s.JitterDist > JitterNormal {
		return fmt.Errorf("linkemu: unknown jitter distribution %d", s.JitterDist)
	}
	if s.QueueBytes < 0 || s.QueuePackets < 0 {
		return fmt.Errorf("linkemu: negative queue limit (%d bytes, %d packets)", s.QueueBytes, s.QueuePackets)
	}
	if s.Medium != nil && (s.Rate != 0 || s.QueueBytes != 0 || s.QueuePackets != 0) {
		return fmt.Errorf("linkemu: a direction on a shared medium takes its rate and queue from the medium (got rate %d, queue %d bytes, %d packets)", s.Rate, s.QueueBytes, s.QueuePackets)
	}
	return s.Loss.Validate()
}

// verdict is what a direction decided about one frame.
type verdict uint8

const (
	forward   verdict = iota // scheduled for sending
	dropLoss                 // lost by the loss model
	dropQueue                // tail-dropped by the serialization queue
)

// Stream constants that separate the random streams of loss and jitter and
// of the two directions, so one seed drives all four independently.
const (
	streamLoss   = 0x6c6f7373 // "loss"
	streamJitter = 0x6a697474 // "jitt"
)

func newRNG(seed uint64, stream uint64, dir Direction) *rand.Rand {
	return rand.New(rand.NewPCG(seed, stream^uint64(dir)<<32))
}

// pipe is the pure per-direction model: loss, then serialization, then
// delay and jitter. It has no I/O and no clock of its own.
type pipe struct {
	shape  Shape
	loss   LossModel
	ser    *Serializer
	lossR  *rand.Rand
	jitR   *rand.Rand
	jitter float64 // Jitter in ns
	marks  lossMarks
}

// FirstLosses is how many losses a direction keeps as the mark of its loss
// sequence (Link.FirstLosses).
const FirstLosses = 32

// lossMarks is where in its loss sequence a direction is: how many frames
// the loss model judged since the last (re)seed and which of them were the
// first it dropped. Two runs with the same seed have the same marks
// whatever traffic they carried; that is what a run records to show it.
type lossMarks struct {
	judged uint64
	first  [FirstLosses]uint64
	n      int
}

func (m *lossMarks) judge(lost bool) {
	if lost && m.n < len(m.first) {
		m.first[m.n] = m.judged
		m.n++
	}
	m.judged++
}

func newPipe(s Shape, dir Direction) *pipe {
	qb, qp := s.QueueBytes, s.QueuePackets
	if s.Rate > 0 && qb == 0 && qp == 0 {
		qp = DefaultQueuePackets
	}
	return &pipe{
		shape:  s,
		loss:   s.Loss.NewModel(),
		ser:    NewSerializer(s.Rate, qb, qp),
		lossR:  newRNG(s.Seed, streamLoss, dir),
		jitR:   newRNG(s.Seed, streamJitter, dir),
		jitter: float64(s.Jitter),
	}
}

// reseed restarts the loss and jitter streams from seed and the loss chain
// in its initial state; the serializer and the frames in flight are kept.
func (p *pipe) reseed(seed uint64, dir Direction) {
	p.shape.Seed = seed
	p.loss = p.shape.Loss.NewModel()
	p.lossR = newRNG(seed, streamLoss, dir)
	p.jitR = newRNG(seed, streamJitter, dir)
	p.marks = lossMarks{}
}

// Drops returns the first n loss decisions (true = lost) that direction dir
// of a link with shape s makes from its start or from a Reseed with s.Seed:
// the emulator's loss sequence, as the frames will meet it whatever they
// carry. Loss is judged before the queue, so queue drops do not change it.
func Drops(s Shape, dir Direction, n int) []bool {
	p := newPipe(Shape{Loss: s.Loss, Seed: s.Seed}, dir)
	out := make([]bool, n)
	for i := range out {
		out[i] = p.loss.Drop(p.lossR)
	}
	return out
}

// admit decides the fate of a frame of size bytes received at now and, if
// it is forwarded, when it is to be sent.
func (p *pipe) admit(now time.Duration, size int) (sendAt time.Duration, v verdict) {
	lost := p.loss.Drop(p.lossR)
	p.marks.judge(lost)
	if lost {
		return 0, dropLoss
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
	if p.jitter > 0 {
		var j float64
		if p.shape.JitterDist == JitterNormal {
			j = p.jitR.NormFloat64() * p.jitter
		} else {
			j = (2*p.jitR.Float64() - 1) * p.jitter
		}
		d += time.Duration(j)
		if d < 0 {
			d = 0
		}
	}
	return depart + d, forward
}
