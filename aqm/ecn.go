package aqm

// ECN codepoints (RFC 3168 §5), the two low bits of the IPv4 TOS byte and of
// the IPv6 Traffic Class.
const (
	ecnNotECT = 0b00
	ecnECT1   = 0b01
	ecnECT0   = 0b10
	ecnCE     = 0b11
	ecnMask   = 0b11
)

// Header sizes this file checks against.
const (
	ipv4MinHeader = 20
	ipv6Header    = 40
)

// ecnField locates the ECN bits of an IP packet: the byte that holds them
// and the shift of the two bits within that byte. In IPv4 they are the low
// bits of the TOS byte (byte 1). In IPv6 the Traffic Class straddles bytes 0
// and 1 (version:4 | class:8 | flow label:20); its low nibble is the high
// nibble of byte 1, so the ECN bits are bits 5..4 of byte 1. ok is false for
// anything that is not a complete IPv4 header (including options) or IPv6
// fixed header.
func ecnField(pkt []byte) (ipv4 bool, shift uint, ok bool) {
	if len(pkt) == 0 {
		return false, 0, false
	}
	switch pkt[0] >> 4 {
	case 4:
		ihl := int(pkt[0]&0x0f) * 4
		if ihl < ipv4MinHeader || len(pkt) < ihl {
			return false, 0, false
		}
		return true, 0, true
	case 6:
		if len(pkt) < ipv6Header {
			return false, 0, false
		}
		return false, 4, true
	}
	return false, 0, false
}

// ECNCapable reports whether pkt is an IPv4 or IPv6 packet whose ECN field is
// ECT(0), ECT(1) or CE, that is, whose sender will react to a CE mark as to a
// loss. Non-IP and truncated packets report false.
func ECNCapable(pkt []byte) bool {
	_, shift, ok := ecnField(pkt)
	return ok && (pkt[1]>>shift)&ecnMask != ecnNotECT
}

// MarkCE sets Congestion Experienced on an ECN-capable IPv4 or IPv6 packet
// (ECT(0) or ECT(1)) in place and reports true; an IPv4 header checksum is
// updated incrementally (RFC 1624). A packet already CE reports true
// unchanged. Not-ECT, non-IP or truncated packets report false and are not
// modified: the caller then drops them instead.
func MarkCE(pkt []byte) bool {
	ipv4, shift, ok := ecnField(pkt)
	if !ok {
		return false
	}
	switch (pkt[1] >> shift) & ecnMask {
	case ecnNotECT:
		return false
	case ecnCE:
		return true
	}
	if !ipv4 {
		pkt[1] |= ecnCE << shift // IPv6 has no header checksum
		return true
	}
	// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), where m is the 16-bit word
	// holding the TOS byte (bytes 0-1) before the change and m' after it.
	old := uint16(pkt[0])<<8 | uint16(pkt[1])
	pkt[1] |= ecnCE
	m := uint16(pkt[0])<<8 | uint16(pkt[1])
	hc := uint16(pkt[10])<<8 | uint16(pkt[11])
	sum := uint32(^hc) + uint32(^old) + uint32(m)
	sum = (sum & 0xffff) + (sum >> 16)
	sum = (sum & 0xffff) + (sum >> 16)
	hc = ^uint16(sum)
	pkt[10], pkt[11] = byte(hc>>8), byte(hc)
	return true
}
