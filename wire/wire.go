package wire

import (
	"encoding/binary"
	"errors"
)

var be = binary.BigEndian

// Errors returned by the decoders. Callers count them; none of them is fatal.
var (
	ErrShort       = errors.New("wire: truncated")
	ErrUnknownType = errors.New("wire: unknown frame type")
	ErrBadLength   = errors.New("wire: bad length")
)

// DataHeader is the clear header of a transport message.
type DataHeader struct {
	Flags    uint8
	Receiver uint32
	Counter  uint64
}

// PutDataHeader writes the 16-byte transport header at b[0:16].
func PutDataHeader(b []byte, h DataHeader) {
	_ = b[DataHeaderLen-1]
	b[0] = TypeData
	b[1] = h.Flags
	b[2], b[3] = 0, 0
	be.PutUint32(b[4:], h.Receiver)
	be.PutUint64(b[8:], h.Counter)
}

// ParseDataHeader decodes the transport header; it checks only the length and type,
// the rest is authenticated by the AEAD.
func ParseDataHeader(b []byte) (DataHeader, error) {
	if len(b) < DataOverhead || b[0] != TypeData {
		return DataHeader{}, ErrShort
	}
	return DataHeader{Flags: b[1], Receiver: be.Uint32(b[4:]), Counter: be.Uint64(b[8:])}, nil
}

// InnerHeader starts every transport plaintext.
type InnerHeader struct {
	Seq   uint32 // per-path datagram number
	TxUs  uint32 // sender clock, µs mod 2^32
	Path  uint16 // sender's id for the path this datagram travels on
	Flags uint8
}

// PutInnerHeader writes the 12-byte inner header at b[0:12].
func PutInnerHeader(b []byte, h InnerHeader) {
	_ = b[InnerHeaderLen-1]
	be.PutUint32(b[0:], h.Seq)
	be.PutUint32(b[4:], h.TxUs)
	be.PutUint16(b[8:], h.Path)
	b[10] = h.Flags
	b[11] = 0
}

// ParseInnerHeader decodes the inner header.
func ParseInnerHeader(b []byte) (InnerHeader, error) {
	if len(b) < InnerHeaderLen {
		return InnerHeader{}, ErrShort
	}
	return InnerHeader{Seq: be.Uint32(b[0:]), TxUs: be.Uint32(b[4:]), Path: be.Uint16(b[8:]), Flags: b[10]}, nil
}

// Ack is the body of an ACK frame: the receiver's view of one of the sender's paths.
type Ack struct {
	Path       uint16 // the sender's path id being acknowledged
	Largest    uint32 // largest path sequence number received
	Bitmap     uint64 // bit i: Largest-1-i was received
	AckDelayUs uint32 // time between receiving Largest and sending this ack
	RxPackets  uint32 // cumulative datagrams received on the path
	RxBytes    uint64 // cumulative bytes received on the path
	OWDRaw     uint32 // receiver clock minus sender timestamp of Largest, µs mod 2^32
}

// Frame is one decoded frame. Packet aliases the input buffer.
type Frame struct {
	Type      uint8
	Flow      uint16 // DATA, GIVEUP, REBUILT
	FlowSeq   uint32 // DATA, GIVEUP, REBUILT
	Packet    []byte // DATA
	Ack       Ack    // ACK; PATH_GONE uses Ack.Path
	Challenge [ChallengeLen]byte
	Cookie    [CookieLen]byte // COOKIE
}

// NextFrame decodes the frame at the start of b and returns it with the rest of b.
// Padding consumes everything. It never allocates and never reads past b.
func NextFrame(b []byte) (f Frame, rest []byte, err error) {
	if len(b) == 0 {
		return f, nil, ErrShort
	}
	f.Type = b[0]
	switch f.Type {
	case FramePadding:
		return f, nil, nil
	case FrameData:
		if len(b) < DataFrameHeaderLen {
			return f, nil, ErrShort
		}
		f.Flow = be.Uint16(b[1:])
		f.FlowSeq = be.Uint32(b[3:])
		n := int(be.Uint16(b[7:]))
		if n == 0 {
			return f, nil, ErrBadLength
		}
		if len(b) < DataFrameHeaderLen+n {
			return f, nil, ErrShort
		}
		f.Packet = b[DataFrameHeaderLen : DataFrameHeaderLen+n : DataFrameHeaderLen+n]
		return f, b[DataFrameHeaderLen+n:], nil
	case FrameAck:
		if len(b) < AckFrameLen {
			return f, nil, ErrShort
		}
		a := &f.Ack
		a.Path = be.Uint16(b[1:])
		a.Largest = be.Uint32(b[3:])
		a.Bitmap = be.Uint64(b[7:])
		a.AckDelayUs = be.Uint32(b[15:])
		a.RxPackets = be.Uint32(b[19:])
		a.RxBytes = be.Uint64(b[23:])
		a.OWDRaw = be.Uint32(b[31:])
		return f, b[AckFrameLen:], nil
	case FramePing, FrameClose:
		return f, b[1:], nil
	case FrameGiveUp, FrameRebuilt:
		if len(b) < GiveUpFrameLen {
			return f, nil, ErrShort
		}
		f.Flow = be.Uint16(b[1:])
		f.FlowSeq = be.Uint32(b[3:])
		return f, b[GiveUpFrameLen:], nil
	case FramePathGone:
		if len(b) < PathGoneFrameLen {
			return f, nil, ErrShort
		}
		f.Ack.Path = be.Uint16(b[1:])
		return f, b[PathGoneFrameLen:], nil
	case FrameCookie:
		if len(b) < CookieFrameLen {
			return f, nil, ErrShort
		}
		copy(f.Cookie[:], b[1:CookieFrameLen])
		return f, b[CookieFrameLen:], nil
	case FrameChallenge, FrameResponse:
		if len(b) < ChallengeFrameLen {
			return f, nil, ErrShort
		}
		copy(f.Challenge[:], b[1:ChallengeFrameLen])
		return f, b[ChallengeFrameLen:], nil
	}
	return f, nil, ErrUnknownType
}

// PutDataFrameHeader writes a DATA frame header for a packet of n bytes that follows
// it directly in b (the packet is already in place: TUN reads land behind the prefix).
func PutDataFrameHeader(b []byte, flow uint16, seq uint32, n int) {
	_ = b[DataFrameHeaderLen-1]
	b[0] = FrameData
	be.PutUint16(b[1:], flow)
	be.PutUint32(b[3:], seq)
	be.PutUint16(b[7:], uint16(n))
}

// AppendAck appends an ACK frame.
func AppendAck(b []byte, a Ack) []byte {
	var f [AckFrameLen]byte
	f[0] = FrameAck
	be.PutUint16(f[1:], a.Path)
	be.PutUint32(f[3:], a.Largest)
	be.PutUint64(f[7:], a.Bitmap)
	be.PutUint32(f[15:], a.AckDelayUs)
	be.PutUint32(f[19:], a.RxPackets)
	be.PutUint64(f[23:], a.RxBytes)
	be.PutUint32(f[31:], a.OWDRaw)
	return append(b, f[:]...)
}

// AppendGiveUp appends a GIVEUP frame: the sender abandoned packet seq of flow.
func AppendGiveUp(b []byte, flow uint16, seq uint32) []byte {
	return appendFlowRef(b, FrameGiveUp, flow, seq)
}

// AppendRebuilt appends a REBUILT frame: the receiver rebuilt packet seq of flow
// from repair packets.
func AppendRebuilt(b []byte, flow uint16, seq uint32) []byte {
	return appendFlowRef(b, FrameRebuilt, flow, seq)
}

func appendFlowRef(b []byte, t byte, flow uint16, seq uint32) []byte {
	var f [GiveUpFrameLen]byte
	f[0] = t
	be.PutUint16(f[1:], flow)
	be.PutUint32(f[3:], seq)
	return append(b, f[:]...)
}

// AppendPathGone appends a PATH_GONE frame for the sender's path id.
func AppendPathGone(b []byte, path uint16) []byte {
	b = append(b, FramePathGone)
	return be.AppendUint16(b, path)
}

// AppendCookie appends a COOKIE frame.
func AppendCookie(b []byte, c [CookieLen]byte) []byte {
	b = append(b, FrameCookie)
	return append(b, c[:]...)
}

// AppendPing appends a PING frame.
func AppendPing(b []byte) []byte { return append(b, FramePing) }

// AppendClose appends a CLOSE frame.
func AppendClose(b []byte) []byte { return append(b, FrameClose) }

// AppendChallenge appends a CHALLENGE (resp=false) or RESPONSE (resp=true) frame.
func AppendChallenge(b []byte, c [ChallengeLen]byte, resp bool) []byte {
	t := byte(FrameChallenge)
	if resp {
		t = FrameResponse
	}
	b = append(b, t)
	return append(b, c[:]...)
}

// AppendData appends a DATA frame carrying a copy of pkt (used where the packet is
// not already in place, e.g. tests and retransmission onto another path).
func AppendData(b []byte, flow uint16, seq uint32, pkt []byte) []byte {
	var h [DataFrameHeaderLen]byte
	PutDataFrameHeader(h[:], flow, seq, len(pkt))
	b = append(b, h[:]...)
	return append(b, pkt...)
}

// MessageType returns the type byte of a datagram, or 0 for an empty one.
func MessageType(b []byte) uint8 {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}
