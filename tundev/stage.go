package tundev

import "encoding/binary"

// MaxCoalesced is the largest packet the device's GRO may build: an IP packet's
// length field holds no more.
const MaxCoalesced = 65535

// Stager prepares a batch for Device.Write so that the device can coalesce it.
//
// wireguard-go's TUN coalesces the consecutive TCP segments (and UDP datagrams)
// of a flow in a batch into the buffer of the first one, in place, and only when
// that buffer has the capacity for the whole coalesced packet. A packet in a
// buffer sized for one datagram never heads a coalesced packet, so every
// segment crosses the kernel's stack on its own: through braid at a gigabit,
// 95 000 skbs of 1140 bytes on average every 2 s, and an inner ACK for every
// few of them (bench, 2026-11-26).
//
// Stage finds the runs the device can coalesce and copies the first packet of
// each into a region of its arena sized for the whole run (one copy per run, not
// per packet; the arena holds at most the batch's bytes and twice the headroom
// per run, and keeps its size for the next batch). A run ends where the
// device's GRO would end it: another flow, a gap in the TCP sequence, a segment
// after one with PSH, other TCP options (timestamps), a larger UDP datagram, or
// MaxCoalesced bytes. A wrong guess costs only coalescing: a region too small
// makes the device start a new packet. The Stager owns the arena until the next
// Stage; it is not safe for concurrent use.
type Stager struct {
	arena []byte
	runs  []int // the first pass's run lengths, for the second
}

// Stage moves, in bufs, the head of each run into a region with room to
// coalesce the run. Packets start at offset. It returns how many runs it gave
// room and how many packets they hold.
func (s *Stager) Stage(bufs [][]byte, offset int) (runs, packets int) {
	// First pass: the runs, and the room they need, to size the arena once.
	need := 0
	s.runs = s.runs[:0]
	for i := 0; i < len(bufs); {
		n, size := Run(bufs[i:], offset)
		if n > 1 {
			need += regionLen(offset, size)
		}
		s.runs = append(s.runs, n, size)
		i += n
	}
	if need == 0 {
		return 0, 0
	}
	if cap(s.arena) < need {
		s.arena = make([]byte, need+need/4)
	}
	at, i := 0, 0
	for r := 0; r < len(s.runs); r += 2 {
		n, size := s.runs[r], s.runs[r+1]
		if n > 1 {
			end := at + regionLen(offset, size)
			region := s.arena[at:end:end]
			k := copy(region[offset:], bufs[i][offset:])
			bufs[i] = region[:offset+k]
			at = end
			runs++
			packets += n
		}
		i += n
	}
	return runs, packets
}

// regionLen is the buffer a run coalesced to size bytes needs: the headroom,
// the packet, and the headroom once more, because wireguard-go measures the
// room from the packet's start and then takes the offset off again.
func regionLen(offset, size int) int { return 2*offset + size }

// Run returns how many packets at the start of bufs (each at offset) the
// device could coalesce into the first one, and the coalesced packet's size.
// The device does so only when the first one's buffer has the room (Stager).
func Run(bufs [][]byte, offset int) (n, size int) {
	if len(bufs[0]) < offset {
		return 1, 0
	}
	head := bufs[0][offset:]
	hk, ok := flowKey(head)
	size = len(head)
	if !ok {
		return 1, size
	}
	first := payloadLen(head, hk)
	last := first
	for n = 1; n < len(bufs) && len(bufs[n]) >= offset; n++ {
		pkt := bufs[n][offset:]
		k, ok := flowKey(pkt)
		if !ok || k != hk || last != first { // nothing follows a short one
			break
		}
		payload := payloadLen(pkt, k)
		if payload <= 0 || payload > first || size+payload > MaxCoalesced {
			break
		}
		if k.proto == 6 && !tcpFollows(bufs[n-1][offset:], pkt, k.v6) {
			break
		}
		size += payload
		last = payload
	}
	return n, size
}

// payloadLen is the bytes after the TCP or UDP header, -1 if the headers do not fit.
func payloadLen(pkt []byte, k key) int {
	h := ipHeaderLen(pkt, k.v6)
	if k.proto == 17 {
		return len(pkt) - h - 8
	}
	if len(pkt) < h+20 {
		return -1
	}
	return len(pkt) - h - int(pkt[h+12]>>4)*4
}

// tcpFollows reports whether TCP segment pkt can be appended to prev in one
// coalesced packet: only ACK set (PSH allowed on the later one, which then
// ends the run), the same options (timestamps included) and adjacent
// sequence numbers.
func tcpFollows(prev, pkt []byte, v6 bool) bool {
	pt, tt := prev[ipHeaderLen(prev, v6):], pkt[ipHeaderLen(pkt, v6):]
	phl, thl := int(pt[12]>>4)*4, int(tt[12]>>4)*4
	if phl != thl || phl < 20 || len(pt) < phl || len(tt) < thl {
		return false
	}
	const ack, psh = 0x10, 0x08
	if pt[13] != ack || tt[13]&^psh != ack {
		return false
	}
	if string(pt[20:phl]) != string(tt[20:thl]) {
		return false
	}
	return binary.BigEndian.Uint32(tt[4:]) == binary.BigEndian.Uint32(pt[4:])+uint32(len(pt)-phl)
}

func ipHeaderLen(pkt []byte, v6 bool) int {
	if v6 {
		return 40
	}
	return int(pkt[0]&0x0f) * 4
}

// key is an IP version, a transport protocol, two addresses and two ports.
type key struct {
	v6         bool
	proto      uint8
	src, dst   [16]byte
	sport, dpt uint16
}

// flowKey returns pkt's TCP or UDP flow; ok is false for anything the device
// would not coalesce (other protocols, fragments, IPv6 extension headers).
func flowKey(pkt []byte) (k key, ok bool) {
	if len(pkt) < 1 {
		return k, false
	}
	var hl int
	switch pkt[0] >> 4 {
	case 4:
		hl = int(pkt[0]&0x0f) * 4
		if hl < 20 || len(pkt) < hl+4 {
			return k, false
		}
		if pkt[6]&0x3f != 0 || pkt[7] != 0 { // MF or a fragment offset
			return k, false
		}
		k.proto = pkt[9]
		copy(k.src[:], pkt[12:16])
		copy(k.dst[:], pkt[16:20])
	case 6:
		hl = 40
		if len(pkt) < hl+4 {
			return k, false
		}
		k.v6 = true
		k.proto = pkt[6]
		copy(k.src[:], pkt[8:24])
		copy(k.dst[:], pkt[24:40])
	default:
		return k, false
	}
	if k.proto != 6 && k.proto != 17 { // TCP, UDP
		return k, false
	}
	k.sport = binary.BigEndian.Uint16(pkt[hl:])
	k.dpt = binary.BigEndian.Uint16(pkt[hl+2:])
	return k, true
}
