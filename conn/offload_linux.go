//go:build linux

package conn

import (
	"net/netip"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// UDP segmentation offload (GSO, UDP_SEGMENT) and receive offload (GRO,
// UDP_GRO). With GSO one sendmsg hands the kernel a run of equal-sized
// datagrams to one destination; it travels the stack as one buffer and is cut
// into datagrams by the device (or just before it). With GRO the kernel
// delivers a run of such datagrams as one buffer, which ReadBatch cuts again.
// Between two braid hosts on a veth or a NIC that coalesces, the kernel's
// per-datagram work (routing, netfilter, qdisc, socket wake-ups) is paid once
// per run instead of once per datagram.
const (
	// maxSegments is the most datagrams one GSO send carries (the kernel's
	// UDP_MAX_SEGMENTS was 64 before Linux 6.9).
	maxSegments = 64
	// maxGSOBytes bounds a GSO send's payload: 64 KiB less the UDP and a
	// (largest, IPv6) IP header.
	maxGSOBytes = 1<<16 - 1 - 8 - 40
	// groBufSize holds the largest run GRO can deliver as one message.
	groBufSize = 1 << 16
	// groSlots is how many runs one recvmmsg receives with GRO on: 2 MiB of
	// buffers per socket, against 128 slots of a datagram each without.
	groSlots = 32
)

// OffloadStats tells which offloads a socket uses and how much they coalesce.
type OffloadStats struct {
	GSO bool // sends coalesce runs of datagrams (UDP_SEGMENT)
	GRO bool // the kernel may deliver runs of datagrams (UDP_GRO)
	// GSOOff is why GSO is off: "" when on, "disabled", "kernel" (the socket
	// option is missing) or "device" (a send failed with EIO: the route's
	// device cannot segment or checksum UDP).
	GSOOff string
	// GSOSends and GSODatagrams count coalesced sends and the datagrams they
	// carried; GRORuns and GRODatagrams the coalesced runs received.
	GSOSends, GSODatagrams uint64
	GRORuns, GRODatagrams  uint64
}

// Offloader is implemented by the UDP Conns: the engine shows it in status.
type Offloader interface {
	Offload() OffloadStats
}

// offload is a socket's offload state; counters are atomics because status
// reads them while the data path runs.
type offload struct {
	gsoOff atomic.Pointer[string] // nil while GSO is on, else why it is off
	gro    bool

	gsoSends, gsoDgrams atomic.Uint64
	groRuns, groDgrams  atomic.Uint64
}

// Why GSO is off (OffloadStats.GSOOff).
var (
	gsoOffDisabled = "disabled"
	gsoOffKernel   = "kernel"
	gsoOffDevice   = "device"
)

// detect enables GRO and checks for GSO on a new socket; both fail soft.
func (o *offload) detect(fd int, disabled bool) {
	if disabled {
		o.gsoOff.Store(&gsoOffDisabled)
		return
	}
	if probeGSO(fd) != nil {
		o.gsoOff.Store(&gsoOffKernel)
	}
	o.gro = unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_GRO, 1) == nil
}

// probeGSO fails on a kernel without UDP_SEGMENT (before Linux 4.18); a
// variable so that tests can play such a kernel.
var probeGSO = func(fd int) error {
	_, err := unix.GetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT)
	return err
}

func (o *offload) gsoOn() bool { return o.gsoOff.Load() == nil }

// deviceRefused turns GSO off for good: the route's device cannot segment UDP.
func (o *offload) deviceRefused() { o.gsoOff.CompareAndSwap(nil, &gsoOffDevice) }

func (o *offload) stats() OffloadStats {
	off := ""
	if p := o.gsoOff.Load(); p != nil {
		off = *p
	}
	return OffloadStats{
		GSO: off == "", GRO: o.gro, GSOOff: off,
		GSOSends: o.gsoSends.Load(), GSODatagrams: o.gsoDgrams.Load(),
		GRORuns: o.groRuns.Load(), GRODatagrams: o.groDgrams.Load(),
	}
}

// putSegment writes a UDP_SEGMENT control message (the size of each datagram
// of the run) into b and returns its length.
func putSegment(b []byte, size int) int {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.IPPROTO_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	*(*uint16)(unsafe.Pointer(&b[unix.CmsgLen(0)])) = uint16(size)
	return unix.CmsgSpace(2)
}

// parseControl reads the control messages of one received message: the local
// address (IP_PKTINFO / IPV6_PKTINFO) and the GRO segment size (0 = one
// datagram).
func parseControl(b []byte) (local netip.Addr, seg int) {
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
			local = netip.AddrFrom4(pi.Spec_dst)
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
			pi := (*unix.Inet6Pktinfo)(unsafe.Pointer(&data[0]))
			local = netip.AddrFrom16(pi.Addr).Unmap()
		case h.Level == unix.IPPROTO_UDP && h.Type == unix.UDP_GRO && len(data) >= 4:
			seg = int(*(*int32)(unsafe.Pointer(&data[0])))
		}
		// The next header starts at CMSG_ALIGN(l): l rounded up to the size of a
		// long, 4 bytes on 32-bit kernels (mips, arm), not always 8.
		next := unix.CmsgSpace(l - hdr)
		if next >= len(b) {
			break
		}
		b = b[next:]
	}
	return local, seg
}

// groRuns is what one GRO recvmmsg left to hand out: message m is cut into
// datagrams of segs[m] bytes; off is where the next one starts.
type groRuns struct {
	bufs [][]byte
	lens []int
	segs []int
	eps  []Endpoint
	n    int // messages received
	m    int // next message to cut
	off  int // offset of the next datagram in message m
}

func (g *groRuns) init() {
	g.bufs = make([][]byte, groSlots)
	backing := make([]byte, groSlots*groBufSize)
	for i := range g.bufs {
		g.bufs[i] = backing[i*groBufSize : (i+1)*groBufSize : (i+1)*groBufSize]
	}
	g.lens = make([]int, groSlots)
	g.segs = make([]int, groSlots)
	g.eps = make([]Endpoint, groSlots)
}

func (g *groRuns) empty() bool { return g.m >= g.n }

// cut copies the next datagrams into bufs (truncating one larger than its
// buffer, as recvmmsg would) and returns how many.
func (g *groRuns) cut(bufs [][]byte, sizes []int, eps []Endpoint, o *offload) int {
	k := 0
	for k < len(bufs) && g.m < g.n {
		l, seg := g.lens[g.m], g.segs[g.m]
		if seg <= 0 || seg > l {
			seg = l
		}
		end := min(g.off+seg, l)
		sizes[k] = copy(bufs[k], g.bufs[g.m][g.off:end])
		eps[k] = g.eps[g.m]
		k++
		g.off = end
		if g.off >= l {
			if seg < l {
				o.groRuns.Add(1)
				o.groDgrams.Add(uint64((l + seg - 1) / seg))
			}
			g.m++
			g.off = 0
		}
	}
	return k
}
