//go:build linux

package conn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// oobSize is the control buffer per datagram: room for one IPV6_PKTINFO
// (CmsgSpace(20) = 40 bytes) or IP_PKTINFO (32 bytes) message, with slack for
// the kernel adding another option we did not ask for.
const oobSize = 64

type udpConn struct {
	uc      *net.UDPConn
	rc      syscall.RawConn
	family  int  // unix.AF_INET or unix.AF_INET6
	pktinfo bool // wildcard socket: report/choose the local address per datagram
	local   netip.AddrPort
	batch   int
	closed  atomic.Bool
	off     offload

	rmu sync.Mutex
	r   reader

	wmu sync.Mutex
	w   writer
}

// reader holds everything recvmmsg needs, allocated once per Conn.
type reader struct {
	hs    []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6
	oob   []byte
	gro   *groRuns // with UDP_GRO: the runs received, cut on the way out
	vlen  int
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool // r.recv bound once: a method value allocates
}

// writer holds everything sendmmsg needs, allocated once per Conn. A message
// carries one datagram, or with GSO a run of them, each in its own iovec.
type writer struct {
	hs        []unix.Mmsghdr
	iovs      []unix.Iovec // one per datagram
	names     []unix.RawSockaddrInet6
	oob       []byte
	first     []int // message j carries the caller's datagrams first[j]..first[j]+count[j]-1
	count     []int
	pkt       []bool // message j selects its source address (IP_PKTINFO)
	off, vlen int
	n         int
	errno     syscall.Errno
	fn        func(fd uintptr) bool
}

// Listen opens a UDP path socket. See Options for the binding rules and Error
// for the errors it returns.
func Listen(opt Options) (Conn, error) {
	addr := opt.Addr.Addr()
	network := opt.Network
	if network == "" {
		switch {
		case !addr.IsValid():
			network = "udp"
		case addr.Is4() || addr.Is4In6():
			network = "udp4"
		default:
			network = "udp6"
		}
	}
	switch network {
	case "udp", "udp4", "udp6":
	default:
		return nil, &Error{Msg: fmt.Sprintf("listen: unknown network %q (want udp, udp4 or udp6)", network), Err: net.UnknownNetworkError(network)}
	}
	hostport := ":" + strconv.Itoa(int(opt.Addr.Port()))
	if addr.IsValid() {
		hostport = opt.Addr.String()
	}
	wildcard := !addr.IsValid() || addr.IsUnspecified()

	rb, sb := opt.RecvBuf, opt.SendBuf
	if rb == 0 {
		rb = DefaultRecvBuf
	}
	if sb == 0 {
		sb = DefaultSendBuf
	}
	batch := opt.BatchSize
	if batch <= 0 {
		batch = DefaultBatchSize
	}

	family := 0
	lc := net.ListenConfig{Control: func(netw, _ string, raw syscall.RawConn) error {
		var serr error
		cerr := raw.Control(func(fd uintptr) {
			s := int(fd)
			family = unix.AF_INET6
			if netw == "udp4" {
				family = unix.AF_INET
			}
			if opt.Device != "" {
				if err := unix.SetsockoptString(s, unix.SOL_SOCKET, unix.SO_BINDTODEVICE, opt.Device); err != nil {
					serr = deviceError(opt.Device, err)
					return
				}
			}
			if opt.ReusePort {
				if err := unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
					serr = &Error{Msg: "listen udp " + hostport + ": SO_REUSEPORT: " + err.Error(), Err: err}
					return
				}
			}
			setBuf(s, unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, rb)
			setBuf(s, unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, sb)
			if wildcard {
				var err error
				if family == unix.AF_INET {
					err = unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
				} else {
					// Also covers IPv4 datagrams on a dual-stack socket: they
					// come with an IPV6_PKTINFO holding a v4-mapped address.
					err = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
				}
				if err != nil {
					serr = &Error{Msg: "listen udp " + hostport + ": enabling packet info: " + err.Error(), Err: err}
				}
			}
		})
		if cerr != nil {
			return cerr
		}
		return serr
	}}
	pc, err := lc.ListenPacket(context.Background(), network, hostport)
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) {
			return nil, ce
		}
		return nil, listenError(hostport, err)
	}
	uc := pc.(*net.UDPConn)
	rc, err := uc.SyscallConn()
	if err != nil {
		uc.Close()
		return nil, &Error{Msg: "listen udp " + hostport + ": " + err.Error(), Err: err}
	}
	c := &udpConn{
		uc:      uc,
		rc:      rc,
		family:  family,
		pktinfo: wildcard,
		batch:   batch,
	}
	if err := rc.Control(func(fd uintptr) { c.off.detect(int(fd), opt.NoOffload) }); err != nil {
		uc.Close()
		return nil, &Error{Msg: "listen udp " + hostport + ": " + err.Error(), Err: err}
	}
	local := uc.LocalAddr().(*net.UDPAddr).AddrPort()
	if family == unix.AF_INET {
		local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	}
	c.local = local
	c.r.init(batch, wildcard || c.off.gro, c.off.gro)
	c.w.init(batch)
	return c, nil
}

// setBuf asks for size bytes, forcing past the sysctl limit when we hold
// CAP_NET_ADMIN and settling for the capped size otherwise. A smaller buffer
// costs throughput under bursts, not correctness, so failure is not an error.
func setBuf(fd, force, normal, size int) {
	if size <= 0 {
		return
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, force, size) == nil {
		return
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, normal, size)
}

// alignedBytes returns n zero bytes starting at an 8-byte boundary, so control
// messages inside can be read through struct pointers.
func alignedBytes(n int) []byte {
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
}

func (r *reader) init(batch int, oob, gro bool) {
	if gro {
		r.gro = new(groRuns)
		r.gro.init()
		batch = groSlots
	}
	r.hs = make([]unix.Mmsghdr, batch)
	r.iovs = make([]unix.Iovec, batch)
	r.names = make([]unix.RawSockaddrInet6, batch)
	if oob {
		r.oob = alignedBytes(batch * oobSize)
	}
	for i := range r.hs {
		h := &r.hs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&r.names[i]))
		h.Iov = &r.iovs[i]
		h.SetIovlen(1)
		if oob {
			h.Control = &r.oob[i*oobSize]
		}
		if gro {
			r.iovs[i].Base = &r.gro.bufs[i][0]
			r.iovs[i].SetLen(groBufSize)
		}
	}
	r.fn = r.recv
}

// recv runs inside RawConn.Read: returning false parks the goroutine in the
// netpoller until the socket is readable again.
func (r *reader) recv(fd uintptr) bool {
	for {
		n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.hs[0])), uintptr(r.vlen), 0, 0, 0)
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		r.n, r.errno = int(n), e
		return true
	}
}

// recvmmsg receives up to vlen messages into the iovecs already set.
func (c *udpConn) recvmmsg(vlen int) error {
	r := &c.r
	for i := 0; i < vlen; i++ {
		h := &r.hs[i].Hdr
		h.Namelen = unix.SizeofSockaddrInet6
		if r.oob != nil {
			h.SetControllen(oobSize)
		}
		h.Flags = 0
		r.hs[i].Len = 0
	}
	r.vlen = vlen
	if err := c.rc.Read(r.fn); err != nil {
		return err
	}
	if r.errno != 0 {
		if c.closed.Load() {
			return &net.OpError{Op: "read", Net: "udp", Addr: net.UDPAddrFromAddrPort(c.local), Err: net.ErrClosed}
		}
		return &net.OpError{Op: "read", Net: "udp", Addr: net.UDPAddrFromAddrPort(c.local), Err: os.NewSyscallError("recvmmsg", r.errno)}
	}
	return nil
}

// message returns the length, endpoint and GRO segment size of received
// message i.
func (r *reader) message(i int) (n int, ep Endpoint, seg int) {
	ep.Remote = sockaddrAddrPort(&r.names[i])
	if r.oob != nil {
		cl := int(r.hs[i].Hdr.Controllen)
		ep.Local, seg = parseControl(r.oob[i*oobSize : i*oobSize+min(cl, oobSize)])
	}
	return int(r.hs[i].Len), ep, seg
}

func (c *udpConn) ReadBatch(bufs [][]byte, sizes []int, eps []Endpoint) (int, error) {
	n := min(len(bufs), len(sizes), len(eps), c.batch)
	if n == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	r := &c.r
	if g := r.gro; g != nil {
		if g.empty() {
			if err := c.recvmmsg(groSlots); err != nil {
				return 0, err
			}
			for i := 0; i < r.n; i++ {
				g.lens[i], g.eps[i], g.segs[i] = r.message(i)
			}
			g.n, g.m, g.off = r.n, 0, 0
		}
		return g.cut(bufs[:n], sizes, eps, &c.off), nil
	}
	for i := 0; i < n; i++ {
		r.iovs[i].Base = unsafe.SliceData(bufs[i])
		r.iovs[i].SetLen(len(bufs[i]))
	}
	if err := c.recvmmsg(n); err != nil {
		return 0, err
	}
	for i := 0; i < r.n; i++ {
		sizes[i], eps[i], _ = r.message(i)
	}
	return r.n, nil
}

// sockaddrAddrPort decodes a kernel sockaddr_in/sockaddr_in6 without
// allocating; v4-mapped addresses come back as IPv4.
func sockaddrAddrPort(sa *unix.RawSockaddrInet6) netip.AddrPort {
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), ntohs(sa4.Port))
	case unix.AF_INET6:
		a := netip.AddrFrom16(sa.Addr)
		if a.Is4In6() {
			a = a.Unmap()
		} else if sa.Scope_id != 0 {
			a = a.WithZone(zoneName(sa.Scope_id))
		}
		return netip.AddrPortFrom(a, ntohs(sa.Port))
	}
	return netip.AddrPort{}
}

// ntohs reads a port stored in network byte order.
func ntohs(p uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(&p))
	return uint16(b[0])<<8 | uint16(b[1])
}

// zones caches interface index → name for link-local peers, so that only the
// first datagram from a zone pays for the lookup.
var zones sync.Map // uint32 → string

// zoneIndexes caches interface name → index for sending to link-local peers.
var zoneIndexes sync.Map // string → uint32

func zoneIndex(zone string) uint32 {
	if i, ok := zoneIndexes.Load(zone); ok {
		return i.(uint32)
	}
	var index uint32
	if ifi, err := net.InterfaceByName(zone); err == nil {
		index = uint32(ifi.Index)
	} else if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		index = uint32(n)
	}
	zoneIndexes.Store(zone, index)
	return index
}

func zoneName(index uint32) string {
	if z, ok := zones.Load(index); ok {
		return z.(string)
	}
	name := strconv.FormatUint(uint64(index), 10)
	if ifi, err := net.InterfaceByIndex(int(index)); err == nil {
		name = ifi.Name
	}
	zones.Store(index, name)
	return name
}

func (w *writer) init(batch int) {
	w.hs = make([]unix.Mmsghdr, batch)
	w.iovs = make([]unix.Iovec, batch)
	w.names = make([]unix.RawSockaddrInet6, batch)
	w.oob = alignedBytes(batch * oobSize)
	w.first = make([]int, batch)
	w.count = make([]int, batch)
	w.pkt = make([]bool, batch)
	for i := range w.hs {
		w.hs[i].Hdr.Name = (*byte)(unsafe.Pointer(&w.names[i]))
	}
	w.fn = w.send
}

// send runs inside RawConn.Write: returning false waits until the socket is
// writable again.
func (w *writer) send(fd uintptr) bool {
	for {
		n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&w.hs[w.off])), uintptr(w.vlen), 0, 0, 0)
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		w.n, w.errno = int(n), e
		return true
	}
}

// putName writes ap as the socket family's sockaddr and returns its length,
// or 0 when an IPv4 socket is asked to reach an IPv6 address.
func (c *udpConn) putName(sa *unix.RawSockaddrInet6, ap netip.AddrPort) uint32 {
	a := ap.Addr()
	if c.family == unix.AF_INET {
		if !a.Is4() && !a.Is4In6() {
			return 0
		}
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		*sa4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Port: ntohs(ap.Port()), Addr: a.Unmap().As4()}
		return unix.SizeofSockaddrInet4
	}
	*sa = unix.RawSockaddrInet6{Family: unix.AF_INET6, Port: ntohs(ap.Port()), Addr: a.As16()}
	if z := a.Zone(); z != "" {
		sa.Scope_id = zoneIndex(z)
	}
	return unix.SizeofSockaddrInet6
}

// putPktinfo writes the control message that picks the source address of a
// datagram and returns its length. On an AF_INET6 socket IPV6_PKTINFO is used
// for both families: the kernel accepts a v4-mapped address there when it
// sends the datagram as IPv4.
func (c *udpConn) putPktinfo(b []byte, local netip.Addr) int {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	data := b[unix.CmsgLen(0):]
	if c.family == unix.AF_INET {
		if !local.Is4() && !local.Is4In6() {
			return 0
		}
		h.Level, h.Type = unix.IPPROTO_IP, unix.IP_PKTINFO
		h.SetLen(unix.CmsgLen(unix.SizeofInet4Pktinfo))
		pi := (*unix.Inet4Pktinfo)(unsafe.Pointer(&data[0]))
		*pi = unix.Inet4Pktinfo{Spec_dst: local.Unmap().As4()}
		return unix.CmsgSpace(unix.SizeofInet4Pktinfo)
	}
	h.Level, h.Type = unix.IPPROTO_IPV6, unix.IPV6_PKTINFO
	h.SetLen(unix.CmsgLen(unix.SizeofInet6Pktinfo))
	pi := (*unix.Inet6Pktinfo)(unsafe.Pointer(&data[0]))
	*pi = unix.Inet6Pktinfo{Addr: local.As16()}
	return unix.CmsgSpace(unix.SizeofInet6Pktinfo)
}

func (c *udpConn) WriteBatch(bufs [][]byte, eps []Endpoint) error {
	if len(eps) < len(bufs) {
		return fmt.Errorf("conn: WriteBatch with %d datagrams but %d endpoints", len(bufs), len(eps))
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	w := &c.w
	var first error
	firstIdx := len(bufs)
	fail := func(i int, err error) { // keep the error of the earliest datagram
		if i < firstIdx {
			first, firstIdx = err, i
		}
	}
	single := 0 // datagrams before this index are sent one per message (a refused run)
	for start := 0; start < len(bufs); {
		nm, next := c.build(bufs, eps, start, single, fail)
		start = next
		for sent := 0; sent < nm; {
			w.off, w.vlen = sent, nm-sent
			if err := c.rc.Write(w.fn); err != nil || c.closed.Load() {
				return &net.OpError{Op: "write", Net: "udp", Addr: net.UDPAddrFromAddrPort(c.local), Err: net.ErrClosed}
			}
			if w.errno == 0 {
				c.countRuns(sent, sent+max(w.n, 1))
				sent += max(w.n, 1)
				continue
			}
			// sendmmsg reports the error of the first message it could not send.
			j, errno := sent, w.errno
			if w.count[j] > 1 {
				// A run the kernel refused: EIO when the route's device cannot
				// segment UDP (GSO goes off for good), EINVAL when a datagram
				// of it would need IP fragmentation. Resend it datagram by
				// datagram, which gives each its own fate.
				if errno == syscall.EIO {
					c.off.deviceRefused()
				}
				single, start = w.first[j]+w.count[j], w.first[j]
				break
			}
			if w.pkt[j] && (errno == syscall.EINVAL || errno == syscall.ENETUNREACH || errno == syscall.EADDRNOTAVAIL) {
				// A source address that is no longer ours (IPv4 says
				// ENETUNREACH, IPv6 EINVAL) should not kill the path; let
				// the kernel choose a source instead. A real routing
				// failure just fails once more.
				c.setControl(j, netip.Addr{}, 0)
				continue
			}
			i := w.first[j]
			fail(i, fmt.Errorf("write udp %v to %v: %w", c.local, eps[i].Remote, errno))
			sent++
		}
		for i := range w.iovs {
			w.iovs[i].Base = nil // do not pin the caller's buffers
		}
	}
	return first
}

// build fills the writer's messages from bufs[start:] and returns how many it
// filled and the index of the first datagram left for the next round. With GSO
// a message takes a run of consecutive datagrams to the same endpoint, all of
// the first one's size but the last, which may be shorter; datagrams below
// single go alone.
func (c *udpConn) build(bufs [][]byte, eps []Endpoint, start, single int, fail func(int, error)) (nm, next int) {
	w := &c.w
	gso := c.off.gsoOn()
	ni, i := 0, start
	for i < len(bufs) && nm < len(w.hs) && ni < len(w.iovs) {
		ep := eps[i]
		if !ep.Remote.Addr().IsValid() || ep.Remote.Port() == 0 {
			fail(i, fmt.Errorf("write udp %v: invalid destination %v", c.local, ep.Remote))
			i++
			continue
		}
		h := &w.hs[nm].Hdr
		h.Namelen = c.putName(&w.names[nm], ep.Remote)
		if h.Namelen == 0 {
			fail(i, fmt.Errorf("write udp %v: cannot reach %v from an IPv4 socket", c.local, ep.Remote))
			i++
			continue
		}
		w.first[nm] = i
		seg, total, k := len(bufs[i]), len(bufs[i]), 1
		w.iovs[ni] = iovec(bufs[i])
		i++
		if gso && i > single && seg > 0 {
			for i < len(bufs) && ni+k < len(w.iovs) && k < maxSegments && eps[i] == ep &&
				len(bufs[i]) > 0 && len(bufs[i]) <= seg && total+len(bufs[i]) <= maxGSOBytes {
				w.iovs[ni+k] = iovec(bufs[i])
				total += len(bufs[i])
				k++
				i++
				if len(bufs[i-1]) < seg {
					break // only the last datagram of a run may be shorter
				}
			}
		}
		h.Iov = &w.iovs[ni]
		h.SetIovlen(k)
		w.count[nm] = k
		ni += k
		gs := 0
		if k > 1 {
			gs = seg
		}
		c.setControl(nm, ep.Local, gs)
		nm++
	}
	return nm, i
}

// countRuns counts the GSO runs among messages [from, to), which were sent.
func (c *udpConn) countRuns(from, to int) {
	var runs, dgrams uint64
	for _, k := range c.w.count[from:to] {
		if k > 1 {
			runs++
			dgrams += uint64(k)
		}
	}
	if runs > 0 {
		c.off.gsoSends.Add(runs)
		c.off.gsoDgrams.Add(dgrams)
	}
}

// setControl sets message j's control data: the source address (wildcard
// sockets, when local is valid) and the GSO segment size (when seg > 0).
func (c *udpConn) setControl(j int, local netip.Addr, seg int) {
	w := &c.w
	o := w.oob[j*oobSize : (j+1)*oobSize]
	l := 0
	w.pkt[j] = false
	if c.pktinfo && local.IsValid() {
		l = c.putPktinfo(o, local)
		w.pkt[j] = l > 0
	}
	if seg > 0 {
		l += putSegment(o[l:], seg)
	}
	h := &w.hs[j].Hdr
	h.Control = nil
	if l > 0 {
		h.Control = &o[0]
	}
	h.SetControllen(l)
}

// iovec points at b.
func iovec(b []byte) unix.Iovec {
	v := unix.Iovec{Base: unsafe.SliceData(b)}
	v.SetLen(len(b))
	return v
}

// Offload reports the socket's offloads and their counters.
func (c *udpConn) Offload() OffloadStats { return c.off.stats() }

func (c *udpConn) LocalAddr() netip.AddrPort { return c.local }
func (c *udpConn) BatchSize() int            { return c.batch }

func (c *udpConn) Close() error {
	c.closed.Store(true)
	return c.uc.Close()
}
