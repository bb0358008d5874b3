//go:build linux

package linkemu

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/braid-vpn/braid/netns"
	"golang.org/x/sys/unix"
)

// Config says where a Link runs and what it does.
type Config struct {
	NS         *netns.Namespace // the link node, holding interfaces A and B
	A, B       string
	AtoB, BtoA Shape // AtoB shapes frames received on A and sent out of B
}

// Link is a running emulated link between two interfaces of one namespace.
// It is safe for concurrent use.
type Link struct {
	socks [2]*packetSock // A, B
	dirs  [2]*dir        // AtoB, BtoA
	wg    sync.WaitGroup
	close func() error // shutdown, once
}

// packetSock is one AF_PACKET socket bound to one interface. Its file and
// the timerfd are non-blocking and so in Go's netpoller: a goroutine waiting
// on them holds no OS thread and no P. All I/O goes through the file (rc:
// recvfrom), so Close cannot pull the descriptor from under a read or write.
type packetSock struct {
	mtu  int
	file *os.File
	rc   syscall.RawConn
}

// slot is a frame buffer. It belongs to exactly one of: the free list, the
// reader (being filled), the delay line, the sender (being written).
type slot struct {
	buf    []byte
	n      int
	rx, at time.Duration // read returned; scheduled send time
	seq    uint64        // arrival order
}

// delayLine holds the scheduled frames in a container/heap ordered by send
// time, ties broken by arrival order: without jitter frames leave in the
// order they came.
type delayLine []*slot

func (l delayLine) Len() int { return len(l) }
func (l delayLine) Less(i, j int) bool {
	return l[i].at < l[j].at || l[i].at == l[j].at && l[i].seq < l[j].seq
}
func (l delayLine) Swap(i, j int) { l[i], l[j] = l[j], l[i] }
func (l *delayLine) Push(s any)   { *l = append(*l, s.(*slot)) }
func (l *delayLine) Pop() any {
	s := (*l)[len(*l)-1]
	*l = (*l)[:len(*l)-1]
	return s
}

const sendBatch = 64

// dir is one direction: a reader goroutine feeding the pipe and delay line,
// and a sender goroutine writing frames when they are due.
type dir struct {
	d       Direction
	in, out *packetSock
	bufSize int
	tfd     int      // timerfd (CLOCK_MONOTONIC) the sender sleeps on; -1 in unit tests
	timer   *os.File // tfd, registered with Go's netpoller

	mu              sync.Mutex
	pipe            *pipe
	line            delayLine
	slots           int // allocated
	free            []*slot
	seq             uint64 // frames scheduled so far
	armed, stopping bool
	armedAt         time.Duration
	st              Stats
	hist, late      histogram // added delay (sent - rx); lateness (sent - at)

	// The reader's RawConn callback, bound once, its buffer and results;
	// the sender's batch and timer buffer.
	readFn      func(fd uintptr) bool
	spare, rbuf []byte
	rn          int
	rerr        unix.Errno
	batch       [sendBatch]*slot
	sentAt      [sendBatch]time.Duration
	sentErr     [sendBatch]bool
	tick        []byte
}

// Start opens the link node's interfaces, turns off their offloads (do the
// same on their peers: DisableOffloads) and starts forwarding.
func Start(cfg Config) (*Link, error) {
	if cfg.NS == nil {
		return nil, errors.New("linkemu: Config.NS is nil")
	}
	if cfg.A == "" || cfg.B == "" || cfg.A == cfg.B {
		return nil, fmt.Errorf("linkemu: need two different interfaces, got A=%q B=%q", cfg.A, cfg.B)
	}
	shapes := [2]Shape{cfg.AtoB, cfg.BtoA}
	for d, sh := range shapes {
		if err := sh.Validate(); err != nil {
			return nil, fmt.Errorf("%w (%v)", err, Direction(d))
		}
	}
	l := &Link{}
	l.close = sync.OnceValue(l.shutdown)
	err := cfg.NS.Do(func() (err error) {
		for i, name := range []string{cfg.A, cfg.B} {
			if l.socks[i], err = openPacketSock(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		l.closeSocks()
		hint := ""
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			hint = " (needs root: CAP_SYS_ADMIN, CAP_NET_RAW, CAP_NET_ADMIN)"
		}
		return nil, fmt.Errorf("linkemu: start in %s: %w%s", cfg.NS.Name(), err, hint)
	}
	for _, name := range []string{cfg.A, cfg.B} {
		if err := DisableOffloads(cfg.NS, name); err != nil {
			l.closeSocks()
			return nil, err
		}
	}

	bufSize := frameBufSize(max(l.socks[0].mtu, l.socks[1].mtu))
	now := monoNow() // time 0 of both directions' traces and schedules
	for i, sh := range shapes {
		l.dirs[i] = newDir(Direction(i), sh, bufSize)
		l.dirs[i].in, l.dirs[i].out = l.socks[i], l.socks[1-i]
		l.dirs[i].pipe.restart(now)
	}
	for _, d := range l.dirs {
		if d.tfd, err = unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC|unix.TFD_NONBLOCK); err != nil {
			d.tfd = -1
			l.Close() // no goroutines yet; a nil timer's Close is a no-op error
			return nil, fmt.Errorf("linkemu: timerfd: %w", err)
		}
		d.timer = os.NewFile(uintptr(d.tfd), "timerfd")
	}
	for _, d := range l.dirs {
		l.wg.Go(d.readLoop)
		l.wg.Go(d.sendLoop)
	}
	return l, nil
}

// frameBufSize fits an Ethernet frame of the given MTU plus one VLAN tag,
// rounded up to a cache line.
func frameBufSize(mtu int) int { return (mtu + 14 + 4 + 63) &^ 63 }

// newDir returns a direction without sockets or timer (tfd -1).
func newDir(d Direction, sh Shape, bufSize int) *dir {
	x := &dir{d: d, bufSize: bufSize, tfd: -1, pipe: newPipe(sh, d), spare: make([]byte, bufSize), tick: make([]byte, 8),
		free: make([]*slot, 0, 256), line: make(delayLine, 0, 256)}
	x.readFn = x.recv
	return x
}

// recv is the reader's RawConn callback: recvfrom into d.rbuf, retried when
// interrupted; EAGAIN parks the goroutine in the netpoller. It is not
// os.File.Read for MSG_TRUNC: an oversized frame reports its real length.
func (d *dir) recv(fd uintptr) bool {
	for {
		r, _, errno := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&d.rbuf[0])), uintptr(len(d.rbuf)), unix.MSG_TRUNC, 0, 0)
		if errno == unix.EAGAIN {
			return false
		} else if errno != unix.EINTR {
			d.rn, d.rerr = int(r), errno
			return true
		}
	}
}

// openPacketSock must run inside the link node's namespace.
func openPacketSock(name string) (_ *packetSock, err error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("interface %q: %w", name, err)
	}
	// Protocol 0 receives nothing until bind, so no frame of another
	// interface slips in before the socket is bound to this one.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("AF_PACKET socket: %w", err)
	}
	defer func() {
		if err != nil {
			unix.Close(fd)
		}
	}()
	// Never see (and so never re-forward) the frames this socket, or
	// anything else in the link node, transmits. Linux ≥ 4.20.
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		return nil, fmt.Errorf("PACKET_IGNORE_OUTGOING (needs Linux 4.20+): %w", err)
	}
	for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[0], DefaultSocketBuffer) != nil {
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[1], DefaultSocketBuffer) // capped by net.core.*mem_max
		}
	}
	const ethPAll = unix.ETH_P_ALL<<8&0xff00 | unix.ETH_P_ALL>>8 // network byte order
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: ethPAll, Ifindex: ifi.Index}); err != nil {
		return nil, fmt.Errorf("bind to %s: %w", name, err)
	}
	// Frames between the two hosts are addressed to the hosts' MACs, not
	// to this interface; veth passes them up anyway, real NICs need this.
	mreq := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_PROMISC}
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
		return nil, fmt.Errorf("promiscuous mode on %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), "packet:"+name)
	rc, _ := f.SyscallConn() // fails only on a nil file
	return &packetSock{mtu: ifi.MTU, file: f, rc: rc}, nil
}

func (l *Link) closeSocks() (err error) {
	for _, s := range l.socks {
		if s != nil {
			err = errors.Join(err, s.file.Close())
		}
	}
	return err
}

// Close stops forwarding, waits for the goroutines and closes the sockets.
// Frames still queued are discarded. Close is idempotent.
func (l *Link) Close() error { return l.close() }

func (l *Link) shutdown() error {
	for _, d := range l.dirs {
		d.mu.Lock()
		d.stopping = true
		d.wakeLocked()
		d.mu.Unlock()
	}
	err := l.closeSocks() // wakes the readers
	l.wg.Wait()
	// Only now: until the readers are gone they may still set the timer.
	for _, d := range l.dirs {
		d.timer.Close()
	}
	return err
}

// SetShape replaces the shape of one direction while the Link runs. The
// loss chain restarts in its initial state, the serializer idle and the
// trace and schedule at time 0 = now; frames already scheduled keep their
// send times.
func (l *Link) SetShape(d Direction, s Shape) error {
	if d > BtoA {
		return fmt.Errorf("linkemu: bad direction %d", d)
	}
	if err := s.Validate(); err != nil {
		return err
	}
	x := l.dirs[d]
	x.mu.Lock()
	x.pipe = newPipe(s, d)
	x.pipe.restart(monoNow())
	x.mu.Unlock()
	return nil
}

// Reseed restarts the loss and jitter streams of both directions from seed
// and the loss chains in their initial state, and both directions' traces
// and schedules with time 0 = now (the trace cursor goes back to the first
// opportunity), keeping the rest of the shape, the queues and the frames in
// flight with their times: from here on the link decides as a fresh link
// with this Seed would for the same frames, and every download that starts
// after a Reseed meets the same capacity and delay over time.
func (l *Link) Reseed(seed uint64) {
	now := monoNow()
	for _, x := range l.dirs {
		x.mu.Lock()
		x.pipe.reseed(seed, x.d)
		x.pipe.restart(now)
		x.mu.Unlock()
	}
}

// Offered returns the bytes direction d's trace offered (its opportunities
// × TraceMTU) from its last restart (Start, SetShape, Reseed) until now, 0
// without a trace: the capacity a transfer had is the difference of two
// samples taken at its start and end, with no restart in between.
func (l *Link) Offered(d Direction) uint64 {
	x := l.dirs[d&1]
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.pipe.offered(monoNow())
}

// FirstLosses returns the 0-based places, among the frames direction d's
// loss model judged since the last Reseed (or the start), of the first (at
// most FirstLosses) it dropped: the same seed repeats them whatever the
// frames were, and Drops computes them from the shape alone.
func (l *Link) FirstLosses(d Direction) []uint64 {
	x := l.dirs[d&1]
	x.mu.Lock()
	defer x.mu.Unlock()
	m := &x.pipe.marks
	return slices.Clone(m.first[:m.n])
}

// Stats returns a snapshot of one direction's counters.
func (l *Link) Stats(d Direction) Stats { return l.dirs[d&1].stats() }

func (d *dir) stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.st
	st.Queued, st.Delay, st.Lateness = d.line.Len(), d.hist.stats(), d.late.stats()
	return st
}

func (d *dir) readLoop() {
	var cur *slot
	for {
		if cur == nil {
			d.mu.Lock()
			cur = d.getSlotLocked()
			d.mu.Unlock()
		}
		buf := d.spare
		if cur != nil {
			buf = cur.buf
		}
		d.rbuf, d.rn, d.rerr = buf, 0, 0
		if d.in.rc.Read(d.readFn) != nil {
			return // socket closed
		}
		if d.rerr != 0 {
			// ENETDOWN and the like are reported once per event; keep
			// reading, but do not spin on something persistent.
			time.Sleep(time.Millisecond)
			continue
		}
		now := monoNow()
		d.mu.Lock()
		if d.receivedLocked(cur, d.rn, len(buf), now) {
			cur = nil
		}
		d.mu.Unlock()
	}
}

// receivedLocked runs one received frame through the pipe. It reports
// whether the delay line took the slot.
func (d *dir) receivedLocked(s *slot, n, capacity int, now time.Duration) bool {
	d.st.FramesIn++
	d.st.BytesIn += uint64(n)
	if n > capacity {
		d.st.DroppedOversize++
		return false
	}
	if s == nil {
		d.st.DroppedNoBuffer++
		return false
	}
	at, v := d.pipe.admit(now, n)
	switch v {
	case dropLoss:
		d.st.DroppedLoss++
		return false
	case dropQueue:
		d.st.DroppedQueue++
		return false
	case dropBurst:
		d.st.DroppedBurst++
		return false
	}
	d.seq++
	s.n, s.rx, s.at, s.seq = n, now, at, d.seq
	heap.Push(&d.line, s)
	if !d.armed || at < d.armedAt {
		d.armLocked(at)
	}
	return true
}

func (d *dir) getSlotLocked() *slot {
	if k := len(d.free); k > 0 {
		s := d.free[k-1]
		d.free = d.free[:k-1]
		return s
	}
	if d.slots < DefaultMaxInFlight {
		d.slots++
		return &slot{buf: make([]byte, d.bufSize)}
	}
	return nil
}

// sendLoop writes what is due and sleeps on the timerfd until the next
// frame is. The timerfd goes through the netpoller, not a blocking read:
// with two blocking senders and GOMAXPROCS=2 every other goroutine would
// wait for sysmon to take a P back.
func (d *dir) sendLoop() {
	for {
		d.mu.Lock()
		if d.stopping {
			d.mu.Unlock()
			return
		}
		k := d.dueLocked(monoNow())
		d.mu.Unlock()
		if k == 0 {
			// Consumes a timer expiry, or parks until there is one.
			if _, err := d.timer.Read(d.tick); errors.Is(err, os.ErrClosed) {
				return // only after Close stopped us
			}
			continue
		}
		for i, s := range d.batch[:k] {
			// Stamped as the frame is released: the write that follows
			// also runs the receiving host's input path (veth delivers
			// inside the sender's syscall), which is not link delay.
			d.sentAt[i] = monoNow()
			_, err := d.out.file.Write(s.buf[:s.n])
			d.sentErr[i] = err != nil
		}
		d.mu.Lock()
		d.sentLocked(k)
		d.mu.Unlock()
	}
}

// dueLocked moves the frames due by now into d.batch. With nothing due it
// sets the timer for the earliest frame (or disarms it); the reader moves
// the timer earlier when it schedules an earlier frame.
func (d *dir) dueLocked(now time.Duration) int {
	k := 0
	for k < sendBatch && d.line.Len() > 0 && d.line[0].at <= now {
		d.batch[k] = heap.Pop(&d.line).(*slot)
		k++
	}
	switch {
	case k > 0:
	case d.line.Len() > 0:
		d.armLocked(d.line[0].at)
	case d.armed:
		d.armed = false
		d.setTimer(unix.Timespec{})
	}
	return k
}

// sentLocked accounts the batch just written and frees its slots.
func (d *dir) sentLocked(k int) {
	for i, s := range d.batch[:k] {
		if d.sentErr[i] {
			d.st.SendErrors++
		} else {
			d.st.Forwarded++
			d.st.BytesForwarded += uint64(s.n)
			d.hist.add(d.sentAt[i] - s.rx)
			d.late.add(d.sentAt[i] - s.at)
		}
		d.free = append(d.free, s)
		d.batch[i] = nil
	}
}

func (d *dir) armLocked(at time.Duration) {
	d.armed, d.armedAt = true, at
	d.setTimer(unix.NsecToTimespec(clockBase + int64(at)))
}

// wakeLocked makes the sender's sleep end now.
func (d *dir) wakeLocked() {
	d.armed, d.armedAt = true, 0
	d.setTimer(unix.Timespec{Nsec: 1}) // long past
}

// setTimer sets the timerfd to CLOCK_MONOTONIC time ts (zero: disarmed).
func (d *dir) setTimer(ts unix.Timespec) {
	if d.tfd >= 0 {
		its := unix.ItimerSpec{Value: ts}
		unix.TimerfdSettime(d.tfd, unix.TFD_TIMER_ABSTIME, &its, nil)
	}
}

// The emulator's clock is Go's monotonic clock (CLOCK_MONOTONIC on Linux,
// read through the vDSO) as an offset from clockStart. The timerfd takes
// absolute values: clockBase is CLOCK_MONOTONIC at clockStart, measured to
// within the duration of a clock_gettime call.
var (
	clockStart = time.Now()
	clockBase  = measureClockBase()
)

func monoNow() time.Duration { return time.Since(clockStart) }

func measureClockBase() int64 {
	best, base := int64(math.MaxInt64), int64(0)
	for range 8 {
		a := time.Since(clockStart)
		var ts unix.Timespec
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
			continue
		}
		b := time.Since(clockStart)
		if w := int64(b - a); w < best {
			best, base = w, ts.Nano()-int64(a+b)/2
		}
	}
	return base
}
