// Package wire defines braid's datagram and frame formats.
//
// Every constant of the wire format lives in this file so the protocol can be read
// in one place; docs/protocol.md describes the same layout in prose. All integers
// are big-endian (network order) except the AEAD nonce, which follows the Noise
// ChaChaPoly convention (4 zero bytes, then the 64-bit counter little-endian).
package wire

// Message types: the first byte of every UDP datagram.
const (
	TypeHandshakeInit = 1 // Noise IKpsk2 message 1, client → server
	TypeHandshakeResp = 2 // Noise IKpsk2 message 2, server → client
	TypeCookieReply   = 3 // a server under load answers an initiation with a cookie
	TypeData          = 4 // an AEAD-sealed transport message
)

// Transport message header, authenticated as associated data.
//
//	0      1      2      4              8                      16
//	| type | flags| rsvd | receiver idx | counter (u64)         | ciphertext … | tag (16)
const (
	DataHeaderLen = 16
	TagLen        = 16 // Poly1305 tag
	// DataOverhead is what a transport message adds around its plaintext.
	DataOverhead = DataHeaderLen + TagLen
)

// Inner header: the first bytes of every transport plaintext.
//
//	0            4            8       10      11     12
//	| path seq   | tx time µs | path  | flags | rsvd | frames …
//
// The path sequence number counts datagrams per path (for acks, loss and delivery
// rate); the sender's microsecond clock lets the receiver measure one-way delay up to
// a constant offset that is the same on every path of a session.
const (
	InnerHeaderLen = 12
	// FlagAckEliciting marks a datagram the receiver must acknowledge (data, ping,
	// challenge); pure acks are not, so acks never trigger acks.
	FlagAckEliciting = 1 << 0
)

// Frame types inside the plaintext, one byte each, then the body.
const (
	FramePadding   = 0x00 // the rest of the plaintext is padding
	FrameData      = 0x01 // flow u16 | flow seq u32 | len u16 | IP packet
	FrameAck       = 0x02 // see Ack
	FramePing      = 0x03 // empty; asks for an immediate ack (RTT probe, keepalive)
	FrameChallenge = 0x04 // 8 random bytes; the peer must echo them on the same path
	FrameResponse  = 0x05 // 8 bytes echoed from a challenge
	FrameClose     = 0x06 // the sender is ending the session (clean shutdown)
	// FrameGiveUp: flow u16 | flow seq u32. The sender abandoned that packet (it
	// was lost and can no longer arrive in time): the receiver stops waiting for
	// it at once (in the spirit of SCTP's FORWARD-TSN, RFC 3758).
	FrameGiveUp = 0x07
	// FrameRepair: an erasure-coded repair symbol over recent DATA payloads
	// (package fec defines its body, which is self-delimiting).
	FrameRepair = 0x08
	// FrameRebuilt: flow u16 | flow seq u32. The receiver rebuilt that packet
	// from repairs: the sender need not resend it.
	FrameRebuilt = 0x09
	// FramePathGone: path u16. The sender's path with that id left (its
	// interface went down or lost its address): the receiver stops sending on
	// its path for it at once instead of waiting for its liveness timer.
	FramePathGone = 0x0a
	// FrameCookie: cookie (16). Server → client: the cookie of the client's
	// source address and port on the path it arrives on, so that the client's
	// next initiations from there carry a valid mac2 without asking (a server
	// rate-limits proven sources apart from spoofable ones). Sent on every
	// validated path, again when the server's cookie secret changes and every
	// 30 s (tunnel's cookieRefresh); a client takes it only on its own paths.
	FrameCookie = 0x0b
)

// Frame sizes, type byte included.
const (
	DataFrameHeaderLen = 1 + 2 + 4 + 2
	AckFrameLen        = 1 + 2 + 4 + 8 + 4 + 4 + 8 + 4
	PingFrameLen       = 1
	ChallengeFrameLen  = 1 + ChallengeLen
	CloseFrameLen      = 1
	GiveUpFrameLen     = 1 + 2 + 4 // GIVEUP and REBUILT
	PathGoneFrameLen   = 1 + 2
	CookieFrameLen     = 1 + CookieLen
	ChallengeLen       = 8
)

// DataPrefixLen is the headroom before an IP packet in a buffer that will be sealed in
// place: outer header, inner header and the DATA frame header.
const DataPrefixLen = DataHeaderLen + InnerHeaderLen + DataFrameHeaderLen

// DataPacketOverhead is what a datagram carrying one IP packet in one DATA frame
// adds to the packet (before UDP and IP): headroom plus the tag.
const DataPacketOverhead = DataPrefixLen + TagLen

// Handshake initiation (client → server):
//
//	0      1          4            8
//	| type | rsvd (3) | sender idx | noise msg 1 (e, s, payload) | mac1 (16) | mac2 (16)
//
// Handshake response (server → client):
//
//	0      1          4            8              12
//	| type | rsvd (3) | sender idx | receiver idx | noise msg 2 (e, payload) | mac1 (16)
//
// mac1 is a keyed BLAKE2s-128 over everything before it, keyed with a hash of the
// receiver's static public key: a server drops datagrams from anyone who does not
// know its public key before spending a Diffie-Hellman on them. mac2 is a keyed
// BLAKE2s-128 over everything before it, keyed with a cookie the server gave this
// source address, or zero when the initiator has no cookie: a server under load
// answers an initiation without a valid mac2 with a cookie reply instead of
// processing it, so spoofed sources cost it no Diffie-Hellman.
//
// Cookie reply (server → client):
//
//	0      1          4              8            32
//	| type | rsvd (3) | receiver idx | nonce (24) | cookie (16) sealed, tag (16)
//
// The receiver index is the initiation's sender index; the cookie is sealed with
// XChaCha20-Poly1305 under a hash of the server's public key, with the initiation's
// mac1 as associated data.
const (
	InitHeaderLen = 8
	RespHeaderLen = 12
	MACLen        = 16
	// NoiseInitFixedLen is e (32) + encrypted s (32 + 16) + payload tag (16).
	NoiseInitFixedLen = 32 + 32 + 16 + 16
	// NoiseRespFixedLen is e (32) + payload tag (16).
	NoiseRespFixedLen = 32 + 16
	// MaxHandshakePayload bounds the plaintext payload of either handshake message.
	MaxHandshakePayload = 256
	MinInitLen          = InitHeaderLen + NoiseInitFixedLen + 2*MACLen
	MaxInitLen          = MinInitLen + MaxHandshakePayload
	MinRespLen          = RespHeaderLen + NoiseRespFixedLen + MACLen
	MaxRespLen          = MinRespLen + MaxHandshakePayload
	TimestampLen        = 12 // TAI64N, first bytes of the initiation payload
	CookieLen           = 16
	CookieReplyLen      = 8 + 24 + CookieLen + TagLen
)

// Handshake payload parameters (TLV after the timestamp in message 1): the client
// states how it wants the session run, so an operator configures one side only.
const (
	ParamScheduler   = 1 // string
	ParamReorder     = 2 // string
	ParamReorderHold = 3 // u32 microseconds
	ParamWeights     = 4 // n × u16 per-mille, by client path id
	ParamCongestion  = 5 // string
	// ParamRekey (empty) says the client still holds a session: this handshake only
	// replaces keys, and per-flow sequence numbers continue.
	ParamRekey = 6
	// ParamRecovery (string): loss recovery inside the tunnel, both directions
	// ("retransmit", "off"; the client resolves "auto" before sending).
	ParamRecovery = 7
	// ParamTiers: n × u8, the priority tier of each client path id (0 = first);
	// the server sends on the lowest tier that has a usable path.
	ParamTiers = 8
	MaxWeights = 64
)

// Handshake response payload: a flags byte, then the server's boot epoch (u64, random
// per start), so a client learns that a server restarted even if a response was lost.
const (
	RespPayloadLen = 1 + 8
	// RespFresh tells the client the server starts the session afresh (it had no
	// session to continue, or the client asked for a new one): both sides number
	// their flows from 0 again and reset their reorder buffers.
	RespFresh = 1 << 0
)

// Receiver session indices carry an optional server id in their top bits so a
// stateless load balancer can send every path of a session to the same server.
const MaxServerIDBits = 16

// Limits.
const (
	// MaxDatagram bounds what a receiver reads; larger datagrams are dropped as
	// oversized. 65535 fits any UDP payload.
	MaxDatagram = 65535
	// MaxPacket is the largest inner IP packet braid carries.
	MaxPacket = 65535 - DataPrefixLen - TagLen
)

// Stream framing: transport = "tcp" and "mptcp" carry the same datagrams as UDP over
// one byte stream per connection (docs/protocol.md, "Stream transports").
//
// Each side first sends StreamHello, then every datagram as a frame:
//
//	0          2
//	| len u16  | datagram (len bytes) |
//
// The length counts the datagram only. A receiver checks each frame before passing it
// on: the datagram must be 1..MaxStreamFrame bytes, start with a known message type and
// have a length that type allows (StreamFrameBounds). Anything else means the peer does
// not speak braid (or the stream is corrupt): the connection is closed.
const (
	// StreamHelloLen is the length of StreamHello.
	StreamHelloLen = 8
	// StreamFrameHeaderLen is the length prefix of a frame.
	StreamFrameHeaderLen = 2
	// MaxStreamFrame is the largest datagram a frame carries (the u16 limit).
	MaxStreamFrame = 65535
)

// StreamHello opens every stream connection in both directions: the protocol name
// and a version byte (1), so a port scanner, a web client or a future version is
// told apart from garbage in the first 8 bytes.
var StreamHello = [StreamHelloLen]byte{'b', 'r', 'a', 'i', 'd', 0, 1, '\n'}
