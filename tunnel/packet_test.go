package tunnel

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// ipv4 builds an IPv4 packet of protocol proto with an l4-byte transport
// header whose ports are set, followed by payload (checksums are not checked by
// the engine).
func ipv4(proto byte, l4 int, src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	p := make([]byte, 20+l4+len(payload))
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	p[8] = 64
	p[9] = proto
	s, d := src.As4(), dst.As4()
	copy(p[12:16], s[:])
	copy(p[16:20], d[:])
	binary.BigEndian.PutUint16(p[20:], sport)
	binary.BigEndian.PutUint16(p[22:], dport)
	copy(p[20+l4:], payload)
	return p
}

// udp4 builds an IPv4/UDP packet.
func udp4(src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	p := ipv4(17, 8, src, dst, sport, dport, payload)
	binary.BigEndian.PutUint16(p[24:], uint16(8+len(payload)))
	return p
}

// udp6 builds an IPv6/UDP packet.
func udp6(src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	p := make([]byte, 48+len(payload))
	p[0] = 0x60
	binary.BigEndian.PutUint16(p[4:], uint16(8+len(payload)))
	p[6] = 17
	p[7] = 64
	s, d := src.As16(), dst.As16()
	copy(p[8:24], s[:])
	copy(p[24:40], d[:])
	binary.BigEndian.PutUint16(p[40:], sport)
	binary.BigEndian.PutUint16(p[42:], dport)
	binary.BigEndian.PutUint16(p[44:], uint16(8+len(payload)))
	copy(p[48:], payload)
	return p
}

// tcp4 builds an IPv4/TCP segment whose sequence number is seq.
func tcp4(src, dst netip.Addr, sport, dport uint16, seq uint32, payload []byte) []byte {
	p := ipv4(6, 20, src, dst, sport, dport, payload)
	binary.BigEndian.PutUint32(p[24:], seq)
	p[32] = 5 << 4 // data offset
	return p
}

// streamDown injects UDP packets of size payload bytes from the server's side to
// client a, one every *gap (read before each), until the test ends.
func (r *rig) streamDown(t *testing.T, size int, gap *atomic.Int64) {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(gap.Load())):
			}
			r.srvTun.Inject(udp4(inSrv, inCliA, 5000, 4000, make([]byte, size)))
		}
	}()
}
