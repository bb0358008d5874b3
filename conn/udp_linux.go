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

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// oobSize is the control buffer per datagram: room for one IPV6_PKTINFO
// (CmsgSpace(20) = 40 bytes) or IP_PKTINFO (32 bytes) message, with slack for
// the kernel adding another option we did not ask for.
const oobSize = 64

// batchWriter is the WriteBatch method shared by ipv4.PacketConn and
// ipv6.PacketConn (both Message types are aliases of the same struct).
type batchWriter interface {
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

type udpConn struct {
	uc      *net.UDPConn
	rc      syscall.RawConn
	wpc     batchWriter
	family  int  // unix.AF_INET or unix.AF_INET6
	pktinfo bool // wildcard socket: report/choose the local address per datagram
	local   netip.AddrPort
	batch   int
	closed  atomic.Bool

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
	vlen  int
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool // r.recv bound once: a method value allocates
}

// writer holds the preallocated x/net Messages and their addresses.
type writer struct {
	msgs  []ipv4.Message
	bufs  [][]byte // backing for msgs[i].Buffers, one slot each
	addrs []net.UDPAddr
	ips   [][16]byte
	oob   []byte
	idx   []int // msgs[j] carries the caller's datagram idx[j]
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
	local := uc.LocalAddr().(*net.UDPAddr).AddrPort()
	if family == unix.AF_INET {
		local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
		c.wpc = ipv4.NewPacketConn(uc)
	} else {
		c.wpc = ipv6.NewPacketConn(uc)
	}
	c.local = local
	c.r.init(batch, wildcard)
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

func (r *reader) init(batch int, oob bool) {
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

func (c *udpConn) ReadBatch(bufs [][]byte, sizes []int, eps []Endpoint) (int, error) {
	n := min(len(bufs), len(sizes), len(eps), c.batch)
	if n == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	r := &c.r
	for i := 0; i < n; i++ {
		r.iovs[i].Base = unsafe.SliceData(bufs[i])
		r.iovs[i].SetLen(len(bufs[i]))
		h := &r.hs[i].Hdr
		h.Namelen = unix.SizeofSockaddrInet6
		if r.oob != nil {
			h.SetControllen(oobSize)
		}
		h.Flags = 0
		r.hs[i].Len = 0
	}
	r.vlen = n
	if err := c.rc.Read(r.fn); err != nil {
		return 0, err
	}
	if r.errno != 0 {
		if c.closed.Load() {
			return 0, &net.OpError{Op: "read", Net: "udp", Addr: net.UDPAddrFromAddrPort(c.local), Err: net.ErrClosed}
		}
		return 0, &net.OpError{Op: "read", Net: "udp", Addr: net.UDPAddrFromAddrPort(c.local), Err: os.NewSyscallError("recvmmsg", r.errno)}
	}
	for i := 0; i < r.n; i++ {
		sizes[i] = int(r.hs[i].Len)
		eps[i].Remote = sockaddrAddrPort(&r.names[i])
		eps[i].Local = netip.Addr{}
		if r.oob != nil {
			cl := int(r.hs[i].Hdr.Controllen)
			eps[i].Local = pktinfoAddr(r.oob[i*oobSize : i*oobSize+min(cl, oobSize)])
		}
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

// pktinfoAddr finds the local address in IP_PKTINFO / IPV6_PKTINFO control
// messages. For IPv4 it takes ipi_spec_dst, the local address a reply should
// use (equal to the header destination for unicast).
func pktinfoAddr(b []byte) netip.Addr {
	hdr := unix.CmsgLen(0)
	for len(b) >= hdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		l := int(h.Len)
		if l < hdr || l > len(b) {
			break
		}
		data := b[hdr:l]
		switch {
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			pi := (*unix.Inet4Pktinfo)(unsafe.Pointer(&data[0]))
			return netip.AddrFrom4(pi.Spec_dst)
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
			pi := (*unix.Inet6Pktinfo)(unsafe.Pointer(&data[0]))
			return netip.AddrFrom16(pi.Addr).Unmap()
		}
		next := (l + 7) &^ 7
		if next >= len(b) {
			break
		}
		b = b[next:]
	}
	return netip.Addr{}
}

func (w *writer) init(batch int) {
	w.msgs = make([]ipv4.Message, batch)
	w.bufs = make([][]byte, batch)
	w.addrs = make([]net.UDPAddr, batch)
	w.ips = make([][16]byte, batch)
	w.oob = alignedBytes(batch * oobSize)
	w.idx = make([]int, batch)
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
	for start := 0; start < len(bufs); {
		end := min(start+c.batch, len(bufs))
		nm := 0
		for i := start; i < end; i++ {
			ep := eps[i]
			if !ep.Remote.Addr().IsValid() || ep.Remote.Port() == 0 {
				fail(i, fmt.Errorf("write udp %v: invalid destination %v", c.local, ep.Remote))
				continue
			}
			m := &w.msgs[nm]
			w.bufs[nm] = bufs[i]
			m.Buffers = w.bufs[nm : nm+1]
			w.ips[nm] = ep.Remote.Addr().As16()
			ua := &w.addrs[nm]
			ua.IP = w.ips[nm][:]
			ua.Port = int(ep.Remote.Port())
			ua.Zone = ep.Remote.Addr().Zone()
			m.Addr = ua
			m.OOB = nil
			if c.pktinfo && ep.Local.IsValid() {
				o := w.oob[nm*oobSize : (nm+1)*oobSize]
				if l := c.putPktinfo(o, ep.Local); l > 0 {
					m.OOB = o[:l]
				}
			}
			w.idx[nm] = i
			nm++
		}
		ms := w.msgs[:nm]
		for len(ms) > 0 {
			k, err := c.wpc.WriteBatch(ms, 0)
			if err == nil {
				ms = ms[max(k, 1):]
				continue
			}
			if c.closed.Load() || errors.Is(err, net.ErrClosed) {
				return &net.OpError{Op: "write", Net: "udp", Addr: net.UDPAddrFromAddrPort(c.local), Err: net.ErrClosed}
			}
			// sendmmsg reports the error of the first datagram it could not
			// send: ms[0]. A source address that is no longer ours (IPv4
			// says ENETUNREACH, IPv6 EINVAL) should not kill the path; let
			// the kernel choose a source instead. A real routing failure
			// just fails once more.
			var errno syscall.Errno
			if errors.As(err, &errno) {
				err = errno
			}
			if ms[0].OOB != nil && (errno == syscall.EINVAL || errno == syscall.ENETUNREACH || errno == syscall.EADDRNOTAVAIL) {
				ms[0].OOB = nil
				continue
			}
			i := w.idx[nm-len(ms)]
			fail(i, fmt.Errorf("write udp %v to %v: %w", c.local, eps[i].Remote, err))
			ms = ms[1:]
		}
		for j := 0; j < nm; j++ {
			w.bufs[j] = nil // do not pin the caller's buffers
		}
		start = end
	}
	return first
}

func (c *udpConn) LocalAddr() netip.AddrPort { return c.local }
func (c *udpConn) BatchSize() int            { return c.batch }

func (c *udpConn) Close() error {
	c.closed.Store(true)
	return c.uc.Close()
}
