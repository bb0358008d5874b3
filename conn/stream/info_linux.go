//go:build linux

package stream

import (
	"encoding/binary"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MPTCP socket options (linux/mptcp.h); x/sys/unix does not have them yet.
const (
	mptcpInfoOpt     = 1 // MPTCP_INFO
	mptcpFullInfoOpt = 4 // MPTCP_FULL_INFO, Linux 6.5+

	// struct mptcp_info grew over time; 96 bytes is its size since Linux 6.9.
	// The kernel copies min(our size, its size) and says how much it wrote.
	mptcpInfoSize = 96
	// struct mptcp_full_info: six u32, two u64 user pointers, then mptcp_info.
	mptcpFullInfoHead = 40
	// struct mptcp_subflow_info: u32 id, 4 bytes padding, then two
	// __kernel_sockaddr_storage (128 bytes each, 8-aligned).
	mptcpSubflowInfoSize = 8 + 2*128
	maxSubflowsReported  = 16
)

func kernelInfo(l *link, in *Info) {
	tc, ok := l.nc.(*net.TCPConn)
	if !ok {
		return
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return
	}
	if l.kind == MPTCP {
		in.MPTCP = mptcpInfo(rc)
		return
	}
	var ti *unix.TCPInfo
	rc.Control(func(fd uintptr) {
		ti, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	})
	if err == nil && ti != nil {
		x := fromTCPInfo(ti)
		in.TCP = &x
	}
}

func fromTCPInfo(ti *unix.TCPInfo) TCPInfo {
	return TCPInfo{
		RTT:           time.Duration(ti.Rtt) * time.Microsecond,
		RTTVar:        time.Duration(ti.Rttvar) * time.Microsecond,
		Cwnd:          ti.Snd_cwnd,
		MSS:           ti.Snd_mss,
		Retransmits:   ti.Total_retrans,
		BytesSent:     ti.Bytes_sent,
		BytesReceived: ti.Bytes_received,
		BytesAcked:    ti.Bytes_acked,
		BytesRetrans:  ti.Bytes_retrans,
		DeliveryRate:  ti.Delivery_rate,
		NotSent:       ti.Notsent_bytes,
	}
}

// mptcpInfo reads MPTCP_FULL_INFO (connection and every subflow in one consistent
// snapshot), or MPTCP_INFO on kernels before 6.5.
func mptcpInfo(rc syscall.RawConn) *MPTCPInfo {
	head := make([]byte, mptcpFullInfoHead+mptcpInfoSize)
	// The kernel writes the subflow arrays through the addresses in head,
	// which the compiler cannot see: arrays it proves local would live on
	// the goroutine's stack, which moves when it grows (the kernel then
	// wrote to the old copy, and every subflow read as zero). The heap does
	// not move: heapArrays keeps them there.
	arrays := heapArrays()
	sfi, tcpi := arrays.sfi[:], arrays.tcpi[:]
	ne := binary.NativeEndian
	ne.PutUint32(head[4:], uint32(unix.SizeofTCPInfo))
	ne.PutUint32(head[12:], mptcpSubflowInfoSize)
	ne.PutUint32(head[20:], maxSubflowsReported)
	ne.PutUint64(head[24:], uint64(uintptr(unsafe.Pointer(&sfi[0]))))
	ne.PutUint64(head[32:], uint64(uintptr(unsafe.Pointer(&tcpi[0]))))
	full := true
	var n int
	var gerr error
	rc.Control(func(fd uintptr) {
		n, gerr = getsockopt(int(fd), unix.SOL_MPTCP, mptcpFullInfoOpt, head)
		if gerr != nil {
			full = false
			n, gerr = getsockopt(int(fd), unix.SOL_MPTCP, mptcpInfoOpt, head[mptcpFullInfoHead:])
			n += mptcpFullInfoHead
		}
	})
	runtime.KeepAlive(sfi)
	runtime.KeepAlive(tcpi)
	if gerr != nil || n < mptcpFullInfoHead+16 {
		return nil
	}
	mi := head[mptcpFullInfoHead:n]
	m := &MPTCPInfo{
		Subflows:        int(mi[0]),
		AddAddrAccepted: int(mi[2]),
		SubflowsMax:     int(mi[3]),
		Fallback:        ne.Uint32(mi[8:])&1 != 0, // MPTCP_INFO_FLAG_FALLBACK
		Token:           ne.Uint32(mi[12:]),
	}
	if len(mi) >= 80 {
		m.Retransmits = ne.Uint32(mi[44:])
		m.BytesRetrans = ne.Uint64(mi[48:])
		m.BytesSent = ne.Uint64(mi[56:])
		m.BytesReceived = ne.Uint64(mi[64:])
		m.BytesAcked = ne.Uint64(mi[72:])
	}
	if !full {
		return m
	}
	count := min(int(ne.Uint32(head[16:])), maxSubflowsReported)
	sfSize := int(min(ne.Uint32(head[8:]), mptcpSubflowInfoSize))
	tiSize := int(min(ne.Uint32(head[0:]), uint32(unix.SizeofTCPInfo)))
	if sfSize < 8+2*16 || tiSize < 104 {
		return m
	}
	for i := 0; i < count; i++ {
		e := sfi[i*mptcpSubflowInfoSize:]
		m.SubflowList = append(m.SubflowList, Subflow{
			ID:     ne.Uint32(e[0:]),
			Local:  sockaddrPort(e[8 : 8+128]),
			Remote: sockaddrPort(e[8+128 : 8+256]),
			TCP:    fromTCPInfo(&tcpi[i]),
		})
	}
	return m
}

// mptcpArrays are the arrays MPTCP_FULL_INFO fills through user pointers.
type mptcpArrays struct {
	sfi  [maxSubflowsReported * mptcpSubflowInfoSize]byte
	tcpi [maxSubflowsReported]unix.TCPInfo
}

// arraysSink makes every mptcpArrays escape to the heap (escape analysis
// cannot tell a global store from a real use).
var arraysSink atomic.Pointer[mptcpArrays]

func heapArrays() *mptcpArrays {
	a := new(mptcpArrays)
	arraysSink.Store(a)
	return a
}

func getsockopt(fd, level, opt int, b []byte) (int, error) {
	l := uint32(len(b))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return 0, e
	}
	return int(l), nil
}

// sockaddrPort decodes a sockaddr_in or sockaddr_in6 (port in network order).
func sockaddrPort(b []byte) netip.AddrPort {
	fam := binary.NativeEndian.Uint16(b[0:])
	port := binary.BigEndian.Uint16(b[2:])
	switch fam {
	case unix.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])).Unmap(), port)
	}
	return netip.AddrPort{}
}

// runsMPTCP reports whether an MPTCP socket still runs MPTCP, rather than having
// fallen back to TCP because the peer does not speak it. (net.TCPConn.MultipathTCP
// only says the socket was opened as MPTCP on this kernel.)
func runsMPTCP(tc *net.TCPConn) bool {
	if mp, err := tc.MultipathTCP(); err != nil || !mp {
		return false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	var b [mptcpInfoSize]byte
	var n int
	var gerr error
	rc.Control(func(fd uintptr) { n, gerr = getsockopt(int(fd), unix.SOL_MPTCP, mptcpInfoOpt, b[:]) })
	if gerr != nil || n < 12 {
		return false // EOPNOTSUPP on kernels that refuse MPTCP_INFO after a fallback
	}
	return binary.NativeEndian.Uint32(b[8:])&1 == 0 // MPTCP_INFO_FLAG_FALLBACK
}
