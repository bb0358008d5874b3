package wire

import "testing"

func TestStreamFrameBounds(t *testing.T) {
	cases := []struct {
		typ    byte
		lo, hi int
		ok     bool
	}{
		// 8 header + 96 noise + 2 × 16 mac = 136; +256 payload = 392.
		{TypeHandshakeInit, 136, 392, true},
		// 12 header + 48 noise + 16 mac = 76; +256 payload = 332.
		{TypeHandshakeResp, 76, 332, true},
		// 16 header + 16 tag + 12 inner header = 44.
		{TypeData, 44, 65535, true},
		{0, 0, 0, false},
		{TypeCookieReply, 64, 64, true},
		{5, 0, 0, false},
		{'G', 0, 0, false}, // "GET / HTTP/1.1"
	}
	for _, c := range cases {
		lo, hi, ok := StreamFrameBounds(c.typ)
		if lo != c.lo || hi != c.hi || ok != c.ok {
			t.Errorf("StreamFrameBounds(%d) = %d, %d, %v; want %d, %d, %v", c.typ, lo, hi, ok, c.lo, c.hi, c.ok)
		}
	}
	if string(StreamHello[:5]) != "braid" || StreamHello[6] != 1 {
		t.Errorf("StreamHello = %q", StreamHello)
	}
}
