package wire

// StreamFrameBounds returns the smallest and largest datagram length allowed for a
// message type; ok is false for a type braid never sends.
func StreamFrameBounds(typ byte) (lo, hi int, ok bool) {
	switch typ {
	case TypeHandshakeInit:
		return MinInitLen, MaxInitLen, true
	case TypeHandshakeResp:
		return MinRespLen, MaxRespLen, true
	case TypeCookieReply:
		return CookieReplyLen, CookieReplyLen, true
	case TypeData:
		return DataOverhead + InnerHeaderLen, MaxStreamFrame, true
	}
	return 0, 0, false
}
