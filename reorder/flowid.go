package reorder

import "encoding/binary"

// FlowID hashes the inner packet's flow into [0, flows) (flows ≤ 65536; ≤ 1 gives 0).
// The key is the protocol, both addresses and, for TCP, UDP, UDP-Lite, SCTP and DCCP,
// both ports. Fragments are hashed without ports — later fragments carry none, and
// all fragments of a datagram must share a bucket — and so are other protocols. The
// two endpoints are ordered before hashing, so both directions of a connection map to
// the same bucket (handy for statistics; reordering itself is per direction). IPv6
// extension headers are skipped to find the transport header. Anything that is not
// parseable IPv4/IPv6 maps to 0. It never allocates and never panics.
func FlowID(pkt []byte, flows int) uint16 {
	if flows <= 1 {
		return 0
	}
	flows = min(flows, 1<<16)
	var h uint64
	switch {
	case len(pkt) >= 20 && pkt[0]>>4 == 4:
		h = hash4(pkt)
	case len(pkt) >= 40 && pkt[0]>>4 == 6:
		h = hash6(pkt)
	default:
		return 0
	}
	// Multiply-shift reduction works for any bucket count, power of two or not.
	return uint16((h >> 32) * uint64(flows) >> 32)
}

// hasPorts reports whether the transport header starts with 16-bit source and
// destination ports.
func hasPorts(proto byte) bool {
	switch proto {
	case 6, 17, 33, 132, 136: // TCP, UDP, DCCP, SCTP, UDP-Lite
		return true
	}
	return false
}

func hash4(pkt []byte) uint64 {
	ihl := int(pkt[0]&0x0f) * 4
	proto := pkt[9]
	src := uint64(binary.BigEndian.Uint32(pkt[12:16]))
	dst := uint64(binary.BigEndian.Uint32(pkt[16:20]))
	var sp, dp uint64
	frag := binary.BigEndian.Uint16(pkt[6:8])&0x3fff != 0 // MF flag or fragment offset
	if !frag && ihl >= 20 && hasPorts(proto) && len(pkt) >= ihl+4 {
		sp = uint64(binary.BigEndian.Uint16(pkt[ihl:]))
		dp = uint64(binary.BigEndian.Uint16(pkt[ihl+2:]))
	}
	a, b := src<<16|sp, dst<<16|dp
	if a > b {
		a, b = b, a
	}
	return finish(combine(combine(combine(4, uint64(proto)), a), b))
}

func hash6(pkt []byte) uint64 {
	next := pkt[6]
	off := 40
	frag := false
walk:
	for range 8 { // bounded: a chain of extension headers cannot loop us
		switch next {
		case 0, 43, 60, 135, 139, 140: // hop-by-hop, routing, dest opts, mobility, HIP, shim6
			if len(pkt) < off+2 {
				break walk
			}
			next, off = pkt[off], off+(int(pkt[off+1])+1)*8
		case 44: // fragment
			if len(pkt) < off+8 {
				break walk
			}
			next, off, frag = pkt[off], off+8, true
		case 51: // AH
			if len(pkt) < off+2 {
				break walk
			}
			next, off = pkt[off], off+(int(pkt[off+1])+2)*4
		default:
			break walk
		}
	}
	var sp, dp uint64
	if !frag && hasPorts(next) && len(pkt) >= off+4 {
		sp = uint64(binary.BigEndian.Uint16(pkt[off:]))
		dp = uint64(binary.BigEndian.Uint16(pkt[off+2:]))
	}
	sh, sl := binary.BigEndian.Uint64(pkt[8:16]), binary.BigEndian.Uint64(pkt[16:24])
	dh, dl := binary.BigEndian.Uint64(pkt[24:32]), binary.BigEndian.Uint64(pkt[32:40])
	if dh < sh || dh == sh && (dl < sl || dl == sl && dp < sp) {
		sh, sl, sp, dh, dl, dp = dh, dl, dp, sh, sl, sp
	}
	h := combine(6, uint64(next))
	h = combine(h, sh)
	h = combine(h, sl)
	h = combine(h, sp<<16|dp)
	h = combine(h, dh)
	return finish(combine(h, dl))
}

// combine folds v into h (multiply-rotate, as in common 64-bit string hashes).
func combine(h, v uint64) uint64 {
	h ^= v * 0x9e3779b97f4a7c15
	h = h<<27 | h>>37
	return h*5 + 0x52dce729
}

// finish is MurmurHash3's 64-bit finaliser: every input bit affects the top bits
// the reduction in FlowID uses.
func finish(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
