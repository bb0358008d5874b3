// Package mss lowers the maximum segment size that TCP SYN packets announce, so
// that the TCP connections inside the tunnel send segments every path can carry
// (what routers call MSS clamping). It edits the packet in place and updates the
// TCP checksum incrementally (RFC 1624); it never allocates.
package mss

import "encoding/binary"

const (
	protoTCP   = 6
	tcpSYN     = 0x02
	optEnd     = 0
	optNOP     = 1
	optMSS     = 2
	optMSSLen  = 4
	ipv4MinHdr = 20
	ipv6Hdr    = 40
	tcpMinHdr  = 20
)

// Clamp lowers the MSS option of an IPv4 or IPv6 TCP SYN (or SYN-ACK) to max and
// reports whether it changed the packet. Anything else — other protocols,
// fragments, IPv6 extension headers, a SYN without an MSS option or with one at
// or below max, a malformed header — is left alone.
func Clamp(pkt []byte, max uint16) bool {
	if len(pkt) < 1 || max == 0 {
		return false
	}
	var tcp []byte
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < ipv4MinHdr {
			return false
		}
		ihl := int(pkt[0]&0x0f) * 4
		frag := binary.BigEndian.Uint16(pkt[6:]) & 0x1fff
		if ihl < ipv4MinHdr || len(pkt) < ihl+tcpMinHdr || pkt[9] != protoTCP || frag != 0 {
			return false
		}
		tcp = pkt[ihl:]
	case 6:
		if len(pkt) < ipv6Hdr+tcpMinHdr || pkt[6] != protoTCP {
			return false
		}
		tcp = pkt[ipv6Hdr:]
	default:
		return false
	}
	if tcp[13]&tcpSYN == 0 {
		return false
	}
	off := int(tcp[12]>>4) * 4
	if off < tcpMinHdr || off > len(tcp) {
		return false
	}
	opts := tcp[tcpMinHdr:off]
	for i := 0; i < len(opts); {
		switch opts[i] {
		case optEnd:
			return false
		case optNOP:
			i++
			continue
		}
		if i+1 >= len(opts) || opts[i+1] < 2 || i+int(opts[i+1]) > len(opts) {
			return false
		}
		if opts[i] == optMSS && opts[i+1] == optMSSLen {
			at := tcpMinHdr + i + 2
			old := binary.BigEndian.Uint16(tcp[at:])
			if old <= max {
				return false
			}
			binary.BigEndian.PutUint16(tcp[at:], max)
			updateChecksum(tcp[16:18], old, max)
			return true
		}
		i += int(opts[i+1])
	}
	return false
}

// updateChecksum adjusts the one's-complement checksum at sum for a 16-bit word
// that changed from old to new: HC' = ~(~HC + ~m + m') (RFC 1624, eqn. 3).
func updateChecksum(sum []byte, old, new uint16) {
	hc := binary.BigEndian.Uint16(sum)
	x := uint32(^hc) + uint32(^old) + uint32(new)
	for x>>16 != 0 {
		x = x&0xffff + x>>16
	}
	binary.BigEndian.PutUint16(sum, ^uint16(x))
}

// For returns the MSS that keeps a TCP segment inside an IP packet of at most mtu
// bytes: mtu minus the IP and TCP headers (without options, as routers clamp).
func For(mtu int, ipv6 bool) uint16 {
	h := ipv4MinHdr + tcpMinHdr
	if ipv6 {
		h = ipv6Hdr + tcpMinHdr
	}
	if mtu <= h {
		return 0
	}
	return uint16(mtu - h)
}
