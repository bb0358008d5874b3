package reorder

import "encoding/binary"

// TCP header flags that PureAck looks at.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

// PureAck reports whether pkt is a TCP segment that carries no data and no SYN,
// FIN or RST: an acknowledgement, which the next one supersedes, so it needs no
// place in its flow's order (PushUnordered). IPv6 packets with extension headers
// and IPv4 fragments are not recognised (they keep their order). It never
// allocates and never panics.
func PureAck(pkt []byte) bool {
	var tcp []byte
	switch {
	case len(pkt) >= 20 && pkt[0]>>4 == 4:
		ihl := int(pkt[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(pkt[2:4]))
		if pkt[9] != 6 || ihl < 20 || total > len(pkt) || total < ihl ||
			binary.BigEndian.Uint16(pkt[6:8])&0x3fff != 0 {
			return false
		}
		tcp = pkt[ihl:total]
	case len(pkt) >= 40 && pkt[0]>>4 == 6:
		total := 40 + int(binary.BigEndian.Uint16(pkt[4:6]))
		if pkt[6] != 6 || total > len(pkt) {
			return false
		}
		tcp = pkt[40:total]
	default:
		return false
	}
	if len(tcp) < 20 {
		return false
	}
	doff := int(tcp[12]>>4) * 4
	flags := tcp[13]
	return doff >= 20 && len(tcp) == doff && flags&tcpACK != 0 && flags&(tcpSYN|tcpFIN|tcpRST) == 0
}
