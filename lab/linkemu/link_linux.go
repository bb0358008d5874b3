//go:build linux

package linkemu

import (
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

// Config says where a Link runs and what it does. Zero fields take the
// package defaults (DefaultSocketBuffer, DefaultMaxInFlight).
type Config struct {
	// NS is the link node: the namespace holding interfaces A and B. The
	// emulator's sockets are created there; its goroutines run anywhere.
	NS *netns.Namespace
	// A and B are the two interfaces the Link joins (typically veths whose
	// peers sit in the neighbouring namespaces). They need no addresses.
	A, B string
	// AtoB shapes frames received on A and sent out of B; BtoA the reverse.
	AtoB, BtoA Shape
	// SocketBuffer is each packet socket's receive and send buffer in bytes.
	SocketBuffer int
	// MaxInFlight bounds the frames each direction holds at once.
	MaxInFlight int
}

// Link is a running emulated link between two interfaces of one namespace.
// It is safe for concurrent use.
type Link struct {
	socks [2]*packetSock // A, B
	dirs  [2]*dir        // AtoB, BtoA
	wg    sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// packetSock is one AF_PACKET socket bound to one interface. All I/O goes
// through rc, so Close cannot pull the descriptor from under a read or
// write in progress.
type packetSock struct {
	name string
	mtu  int
	file *os.File
	rc   syscall.RawConn
}

// slot is a frame buffer. It belongs to exactly one of: the free list, the
// reader (being filled), the delay line, the sender (being written).
type slot struct {
	buf []byte
	n   int
	rx  time.Duration // read returned
	at  time.Duration // scheduled send time
	idx int32
}

const sendBatch = 64

// dir is one direction: a reader goroutine feeding the pipe and delay line,
// and a sender goroutine writing frames when they are due.
type dir struct {
	d        Direction
	in, out  *packetSock
	bufSize  int
	maxSlots int
	tfd      int             // timerfd (CLOCK_MONOTONIC) the sender sleeps on; -1 in unit tests
	timer    *os.File        // tfd, registered with Go's netpoller
	timerRC  syscall.RawConn // reads of tfd

	mu       sync.Mutex
	pipe     *pipe
	line     delayLine
	slots    []*slot
	free     []int32
	armed    bool
	armedAt  time.Duration
	stopping bool
	st       Stats
	hist     histogram // added delay: sent - rx
	late     histogram // lateness: sent - at

	// Reader-owned.
	spare  []byte
	rbuf   []byte
	rn     int
	rerr   unix.Errno
	readFn func(fd uintptr) bool

	// Sender-owned.
	batch   [sendBatch]*slot
	sentAt  [sendBatch]time.Duration
	sentErr [sendBatch]bool
	wbuf    []byte
	werr    unix.Errno
	writeFn func(fd uintptr) bool
	tickFn  func(fd uintptr) bool
	tick    [8]byte
}

// Start opens the link node's interfaces and starts forwarding. It turns
// off the offloads of A and B (see DisableOffloads; do the same on their
// peers). Close the Link before the namespace: its sockets keep the
// namespace alive.
func Start(cfg Config) (*Link, error) {
	if cfg.NS == nil {
		return nil, errors.New("linkemu: Config.NS is nil")
	}
	if cfg.A == "" || cfg.B == "" || cfg.A == cfg.B {
		return nil, fmt.Errorf("linkemu: need two different interfaces, got A=%q B=%q", cfg.A, cfg.B)
	}
	if err := cfg.AtoB.Validate(); err != nil {
		return nil, fmt.Errorf("%w (A→B)", err)
	}
	if err := cfg.BtoA.Validate(); err != nil {
		return nil, fmt.Errorf("%w (B→A)", err)
	}
	if cfg.SocketBuffer <= 0 {
		cfg.SocketBuffer = DefaultSocketBuffer
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}

	l := &Link{}
	err := cfg.NS.Do(func() error {
		for i, name := range []string{cfg.A, cfg.B} {
			s, err := openPacketSock(name, cfg.SocketBuffer)
			if err != nil {
				return err
			}
			l.socks[i] = s
		}
		return nil
	})
	if err != nil {
		l.closeSocks()
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("linkemu: start in %s: %w (needs root: CAP_SYS_ADMIN, CAP_NET_RAW, CAP_NET_ADMIN)", cfg.NS.Name(), err)
		}
		return nil, fmt.Errorf("linkemu: start in %s: %w", cfg.NS.Name(), err)
	}

	bufSize := frameBufSize(max(l.socks[0].mtu, l.socks[1].mtu))
	for i, sh := range []Shape{cfg.AtoB, cfg.BtoA} {
		d := newDir(Direction(i), sh, bufSize, cfg.MaxInFlight, -1)
		if err := d.openTimer(); err != nil {
			l.closeSocks()
			for _, d := range l.dirs[:i] {
				d.timer.Close()
			}
			return nil, fmt.Errorf("linkemu: timerfd: %w", err)
		}
		d.in, d.out = l.socks[i], l.socks[1-i]
		l.dirs[i] = d
	}
	for _, d := range l.dirs {
		l.wg.Add(2)
		go func() { defer l.wg.Done(); d.readLoop() }()
		go func() { defer l.wg.Done(); d.sendLoop() }()
	}
	return l, nil
}

// frameBufSize fits an Ethernet frame of the given MTU plus one VLAN tag,
// rounded up to a cache line.
func frameBufSize(mtu int) int {
	return (mtu + 14 + 4 + 63) &^ 63
}

func newDir(d Direction, sh Shape, bufSize, maxSlots, tfd int) *dir {
	x := &dir{
		d:        d,
		bufSize:  bufSize,
		maxSlots: maxSlots,
		tfd:      tfd,
		pipe:     newPipe(sh, d),
		spare:    make([]byte, bufSize),
		free:     make([]int32, 0, 256),
		line:     delayLine{h: make([]lineEntry, 0, 256)},
	}
	x.readFn = x.doRead
	x.writeFn = x.doWrite
	x.tickFn = x.doTick
	return x
}

// openTimer creates the sender's timerfd, non-blocking and registered with
// the netpoller, so a sleeping sender holds no OS thread and no P.
func (d *dir) openTimer() error {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC|unix.TFD_NONBLOCK)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "timerfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return err
	}
	d.tfd, d.timer, d.timerRC = fd, f, rc
	return nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// openPacketSock must run inside the link node's namespace.
func openPacketSock(name string, bufSize int) (_ *packetSock, err error) {
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
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[0], bufSize) != nil {
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[1], bufSize) // capped by net.core.*mem_max
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		return nil, fmt.Errorf("bind to %s: %w", name, err)
	}
	// Frames between the two hosts are addressed to the hosts' MACs, not
	// to this interface; veth passes them up anyway, real NICs need this.
	mreq := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_PROMISC}
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
		return nil, fmt.Errorf("promiscuous mode on %s: %w", name, err)
	}
	if err := disableOffloads(fd, name); err != nil {
		return nil, fmt.Errorf("disabling offloads on %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), "packet:"+name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &packetSock{name: name, mtu: ifi.MTU, file: f, rc: rc}, nil
}

func (l *Link) closeSocks() error {
	var errs []error
	for _, s := range l.socks {
		if s != nil {
			errs = append(errs, s.file.Close())
		}
	}
	return errors.Join(errs...)
}

// Close stops forwarding, waits for the goroutines and closes the sockets.
// Frames still queued are discarded. Close is idempotent.
func (l *Link) Close() error {
	l.closeOnce.Do(func() {
		for _, d := range l.dirs {
			d.mu.Lock()
			d.stopping = true
			d.wakeLocked()
			d.mu.Unlock()
		}
		l.closeErr = l.closeSocks() // wakes the readers
		l.wg.Wait()
		// Only now: until the readers are gone they may still set the timer.
		for _, d := range l.dirs {
			d.timer.Close()
		}
	})
	return l.closeErr
}

// SetShape replaces the shape of one direction while the Link runs. The
// loss chain restarts in its initial state and the serializer idle; frames
// already scheduled keep their send times.
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
	x.mu.Unlock()
	return nil
}

// Reseed restarts the loss and jitter streams of both directions from seed
// (each direction draws its own, as at Start) and the loss chains in their
// initial state, keeping the rest of the shape, the queues and the frames in
// flight: from here on the link makes the decisions a fresh link with this
// Seed would make for the same frames. The lab reseeds before every
// repetition so that each transport meets the same loss sequence.
func (l *Link) Reseed(seed uint64) {
	for _, x := range l.dirs {
		x.mu.Lock()
		x.pipe.reseed(seed, x.d)
		x.mu.Unlock()
	}
}

// Shape returns the shape one direction currently applies.
func (l *Link) Shape(d Direction) Shape {
	x := l.dirs[d&1]
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.pipe.shape
}

// FirstLosses returns the 0-based places, among the frames direction d's
// loss model judged since the last Reseed (or the start), of the first it
// dropped, at most FirstLosses of them: the direction's loss sequence as it
// went, which the same seed repeats whatever the frames were (Drops gives
// the same from the shape alone).
func (l *Link) FirstLosses(d Direction) []uint64 {
	x := l.dirs[d&1]
	x.mu.Lock()
	defer x.mu.Unlock()
	m := &x.pipe.marks
	return slices.Clone(m.first[:m.n])
}

// Stats returns a snapshot of one direction's counters.
func (l *Link) Stats(d Direction) Stats {
	return l.dirs[d&1].stats()
}

func (d *dir) stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.st
	st.Queued = d.line.Len()
	st.Delay = d.hist.stats()
	st.Lateness = d.late.stats()
	return st
}

// ---- reader ----

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
		n, errno, err := d.recv(buf)
		if err != nil {
			return // socket closed
		}
		if errno != 0 {
			// ENETDOWN and the like are reported once per event; keep
			// reading, but do not spin on something persistent.
			time.Sleep(time.Millisecond)
			continue
		}
		now := monoNow()
		d.mu.Lock()
		if d.receivedLocked(cur, n, len(buf), now) {
			cur = nil
		}
		d.mu.Unlock()
	}
}

func (d *dir) recv(buf []byte) (n int, errno unix.Errno, err error) {
	d.rbuf, d.rn, d.rerr = buf, 0, 0
	if err := d.in.rc.Read(d.readFn); err != nil {
		return 0, 0, err
	}
	return d.rn, d.rerr, nil
}

// doRead is the RawConn callback: one recvfrom with MSG_TRUNC, so an
// oversized frame reports its real length instead of passing truncated.
func (d *dir) doRead(fd uintptr) bool {
	n, e, ok := rawIO(unix.SYS_RECVFROM, fd, d.rbuf, unix.MSG_TRUNC)
	if ok {
		d.rn, d.rerr = int(n), e
	}
	return ok
}

// rawIO is the system call of a RawConn callback: trap (read, write or
// recvfrom, which takes flags) on fd with b. It retries an interrupted
// call; ok is false on EAGAIN, which parks the goroutine in the netpoller
// until fd is ready.
func rawIO(trap, fd uintptr, b []byte, flags uintptr) (n uintptr, e unix.Errno, ok bool) {
	for {
		n, _, e = unix.Syscall6(trap, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), flags, 0, 0)
		if e != unix.EINTR {
			return n, e, e != unix.EAGAIN
		}
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
	}
	s.n, s.rx, s.at = n, now, at
	d.line.Push(at, s.idx)
	if !d.armed || at < d.armedAt {
		d.armLocked(at)
	}
	return true
}

func (d *dir) getSlotLocked() *slot {
	if k := len(d.free); k > 0 {
		s := d.slots[d.free[k-1]]
		d.free = d.free[:k-1]
		return s
	}
	if len(d.slots) < d.maxSlots {
		s := &slot{buf: make([]byte, d.bufSize), idx: int32(len(d.slots))}
		d.slots = append(d.slots, s)
		return s
	}
	return nil
}

// ---- sender ----

// sendLoop sleeps on a timerfd rather than a Go timer: when the process
// is idle the runtime waits for its timers with epoll timeouts in whole
// milliseconds, so a time.Timer fires up to a millisecond late, while a
// timerfd is an hrtimer that makes its descriptor readable within
// microseconds of the deadline, and the netpoller wakes this goroutine as
// soon as it is. The descriptor goes through the netpoller (not a blocking
// read) so that a sleeping sender pins neither an OS thread nor a P: with
// two blocking senders and GOMAXPROCS=2 every other goroutine would wait
// for sysmon to take a P back.
func (d *dir) sendLoop() {
	for {
		d.mu.Lock()
		if d.stopping {
			d.mu.Unlock()
			return
		}
		k := d.dueLocked(monoNow())
		d.mu.Unlock()
		if k > 0 {
			for i, s := range d.batch[:k] {
				// Stamped as the frame is released: the write that follows
				// also runs the receiving host's input path (veth delivers
				// inside the sender's syscall), which is not link delay.
				d.sentAt[i] = monoNow()
				e, err := d.send(s.buf[:s.n])
				d.sentErr[i] = e != 0 || err != nil
			}
			d.mu.Lock()
			d.sentLocked(k)
			d.mu.Unlock()
			continue
		}
		if err := d.timerRC.Read(d.tickFn); err != nil {
			return // timer closed (only after Close stopped us)
		}
	}
}

// doTick consumes a timer expiry; false (EAGAIN) parks the goroutine in
// the netpoller until the next one.
func (d *dir) doTick(fd uintptr) bool {
	_, _, ok := rawIO(unix.SYS_READ, fd, d.tick[:], 0)
	return ok
}

// dueLocked moves the frames due by now into d.batch. With nothing due it
// sets the timer for the earliest frame (or disarms it), so the sender
// sleeps exactly until then; the reader moves the timer earlier when it
// schedules an earlier frame.
func (d *dir) dueLocked(now time.Duration) int {
	k := 0
	for k < sendBatch && d.line.Len() > 0 && d.line.Peek().at <= now {
		e := d.line.Pop()
		d.batch[k] = d.slots[e.slot]
		k++
	}
	if k == 0 {
		if d.line.Len() > 0 {
			d.armLocked(d.line.Peek().at)
		} else {
			d.disarmLocked()
		}
	}
	return k
}

// sentLocked accounts the batch just written and frees its slots.
func (d *dir) sentLocked(k int) {
	for i := 0; i < k; i++ {
		s := d.batch[i]
		if d.sentErr[i] {
			d.st.SendErrors++
		} else {
			d.st.Forwarded++
			d.st.BytesForwarded += uint64(s.n)
			d.hist.add(d.sentAt[i] - s.rx)
			d.late.add(d.sentAt[i] - s.at)
		}
		d.free = append(d.free, s.idx)
		d.batch[i] = nil
	}
}

func (d *dir) send(b []byte) (unix.Errno, error) {
	d.wbuf, d.werr = b, 0
	if err := d.out.rc.Write(d.writeFn); err != nil {
		return 0, err
	}
	return d.werr, nil
}

// doWrite is the RawConn callback. A socket bound to an interface sends
// the frame out of it as is: no address needed.
func (d *dir) doWrite(fd uintptr) bool {
	_, e, ok := rawIO(unix.SYS_WRITE, fd, d.wbuf, 0)
	if ok {
		d.werr = e
	}
	return ok
}

// ---- timer ----

func (d *dir) armLocked(at time.Duration) {
	d.armed, d.armedAt = true, at
	if d.tfd < 0 {
		return
	}
	its := unix.ItimerSpec{Value: unix.NsecToTimespec(clockBase + int64(at))}
	unix.TimerfdSettime(d.tfd, unix.TFD_TIMER_ABSTIME, &its, nil)
}

func (d *dir) disarmLocked() {
	if !d.armed {
		return
	}
	d.armed = false
	if d.tfd < 0 {
		return
	}
	var its unix.ItimerSpec
	unix.TimerfdSettime(d.tfd, 0, &its, nil)
}

// wakeLocked makes the sender's sleep end now.
func (d *dir) wakeLocked() {
	d.armed, d.armedAt = true, 0
	if d.tfd < 0 {
		return
	}
	its := unix.ItimerSpec{Value: unix.Timespec{Nsec: 1}} // long past
	unix.TimerfdSettime(d.tfd, unix.TFD_TIMER_ABSTIME, &its, nil)
}

// ---- clock ----

// The emulator's clock is Go's monotonic clock as an offset from
// clockStart (cheap: vDSO, no syscall). The timerfd needs absolute
// CLOCK_MONOTONIC values, which is the clock Go's monotonic readings come
// from on Linux; clockBase is CLOCK_MONOTONIC at clockStart, measured once
// to within the duration of a clock_gettime call.
var (
	clockStart = time.Now()
	clockBase  = measureClockBase()
)

func monoNow() time.Duration { return time.Since(clockStart) }

func measureClockBase() int64 {
	best, base := int64(math.MaxInt64), int64(0)
	for i := 0; i < 8; i++ {
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
