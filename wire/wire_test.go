package wire

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Sizes written out by hand from the layouts in constants.go.
func TestSizes(t *testing.T) {
	cases := []struct {
		name      string
		got, want int
	}{
		{"DataOverhead", DataOverhead, 32},
		{"DataFrameHeaderLen", DataFrameHeaderLen, 9},
		{"AckFrameLen", AckFrameLen, 35},
		{"ChallengeFrameLen", ChallengeFrameLen, 9},
		{"DataPrefixLen", DataPrefixLen, 16 + 12 + 9},
		{"MinInitLen", MinInitLen, 8 + 32 + 48 + 16 + 16 + 16}, // mac1, mac2
		{"CookieReplyLen", CookieReplyLen, 8 + 24 + 16 + 16},
		{"MinRespLen", MinRespLen, 12 + 32 + 16 + 16},
		{"MaxPacket", MaxPacket, 65535 - 37 - 16},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}

func TestDataHeader(t *testing.T) {
	b := bytes.Repeat([]byte{0xee}, DataOverhead)
	h := DataHeader{Flags: 0x81, Receiver: 0x01020304, Counter: 0x1112131415161718}
	PutDataHeader(b, h)
	want := []byte{TypeData, 0x81, 0, 0, 1, 2, 3, 4, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18}
	if !bytes.Equal(b[:DataHeaderLen], want) {
		t.Fatalf("header % x, want % x", b[:DataHeaderLen], want)
	}
	if b[DataHeaderLen] != 0xee {
		t.Fatal("PutDataHeader wrote past the header")
	}
	got, err := ParseDataHeader(b)
	if err != nil || got != h {
		t.Fatalf("ParseDataHeader = %+v, %v; want %+v", got, err, h)
	}
	for n := 0; n < DataOverhead; n++ {
		if _, err := ParseDataHeader(b[:n]); !errors.Is(err, ErrShort) {
			t.Fatalf("length %d: err = %v, want ErrShort", n, err)
		}
	}
	b[0] = TypeHandshakeInit
	if _, err := ParseDataHeader(b); err == nil {
		t.Fatal("wrong message type accepted")
	}
}

func TestInnerHeader(t *testing.T) {
	b := bytes.Repeat([]byte{0xee}, InnerHeaderLen+1)
	h := InnerHeader{Seq: 0xa1a2a3a4, TxUs: 0xb1b2b3b4, Path: 0xc1c2, Flags: FlagAckEliciting}
	PutInnerHeader(b, h)
	want := []byte{0xa1, 0xa2, 0xa3, 0xa4, 0xb1, 0xb2, 0xb3, 0xb4, 0xc1, 0xc2, 1, 0}
	if !bytes.Equal(b[:InnerHeaderLen], want) || b[InnerHeaderLen] != 0xee {
		t.Fatalf("inner header % x, want % x", b, want)
	}
	got, err := ParseInnerHeader(b[:InnerHeaderLen])
	if err != nil || got != h {
		t.Fatalf("ParseInnerHeader = %+v, %v", got, err)
	}
	for n := 0; n < InnerHeaderLen; n++ {
		if _, err := ParseInnerHeader(b[:n]); !errors.Is(err, ErrShort) {
			t.Fatalf("length %d: err = %v, want ErrShort", n, err)
		}
	}
}

var testAck = Ack{
	Path: 0x0102, Largest: 0x03040506, Bitmap: 0x0708090a0b0c0d0e,
	AckDelayUs: 0x0f101112, RxPackets: 0x13141516, RxBytes: 0x1718191a1b1c1d1e, OWDRaw: 0x1f202122,
}

func TestAckLayout(t *testing.T) {
	b := AppendAck([]byte{0xff}, testAck)
	want := []byte{0xff, FrameAck}
	for i := byte(1); i <= 0x22; i++ { // the fields above count up byte by byte
		want = append(want, i)
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("ack\n got % x\nwant % x", b, want)
	}
}

// frames returns one encoded frame of every kind and its expected decoding.
func frames() []struct {
	enc []byte
	dec Frame
} {
	pkt := []byte{0x45, 0, 0, 20, 1, 2, 3}
	ch := [ChallengeLen]byte{1, 2, 3, 4, 5, 6, 7, 8}
	return []struct {
		enc []byte
		dec Frame
	}{
		{AppendData(nil, 0xabcd, 0x01020304, pkt), Frame{Type: FrameData, Flow: 0xabcd, FlowSeq: 0x01020304, Packet: pkt}},
		{AppendAck(nil, testAck), Frame{Type: FrameAck, Ack: testAck}},
		{AppendPing(nil), Frame{Type: FramePing}},
		{AppendClose(nil), Frame{Type: FrameClose}},
		{AppendChallenge(nil, ch, false), Frame{Type: FrameChallenge, Challenge: ch}},
		{AppendChallenge(nil, ch, true), Frame{Type: FrameResponse, Challenge: ch}},
		{AppendGiveUp(nil, 0xbeef, 0x0a0b0c0d), Frame{Type: FrameGiveUp, Flow: 0xbeef, FlowSeq: 0x0a0b0c0d}},
		{AppendRebuilt(nil, 0xcafe, 0x01020304), Frame{Type: FrameRebuilt, Flow: 0xcafe, FlowSeq: 0x01020304}},
		{AppendCookie(nil, [CookieLen]byte{1, 2, 3, 15: 16}), Frame{Type: FrameCookie, Cookie: [CookieLen]byte{1, 2, 3, 15: 16}}},
		{AppendPathGone(nil, 0x0102), Frame{Type: FramePathGone, Ack: Ack{Path: 0x0102}}},
	}
}

func TestFrameRoundTrips(t *testing.T) {
	for _, c := range frames() {
		f, rest, err := NextFrame(c.enc)
		if err != nil {
			t.Fatalf("type %d: %v", c.dec.Type, err)
		}
		if len(rest) != 0 {
			t.Fatalf("type %d: %d bytes left over", c.dec.Type, len(rest))
		}
		if !reflect.DeepEqual(f, c.dec) {
			t.Fatalf("type %d: decoded %+v, want %+v", c.dec.Type, f, c.dec)
		}
	}
}

func TestDataFrameLayout(t *testing.T) {
	b := AppendData(nil, 0x0102, 0x03040506, []byte{0xaa, 0xbb})
	want := []byte{FrameData, 1, 2, 3, 4, 5, 6, 0, 2, 0xaa, 0xbb}
	if !bytes.Equal(b, want) {
		t.Fatalf("data frame % x, want % x", b, want)
	}
	// In place: the packet already sits behind the header room.
	buf := make([]byte, DataFrameHeaderLen+2)
	copy(buf[DataFrameHeaderLen:], []byte{0xaa, 0xbb})
	PutDataFrameHeader(buf, 0x0102, 0x03040506, 2)
	if !bytes.Equal(buf, want) {
		t.Fatalf("in-place data frame % x, want % x", buf, want)
	}
}

func TestChallengeLayout(t *testing.T) {
	c := [ChallengeLen]byte{9, 8, 7, 6, 5, 4, 3, 2}
	if b := AppendChallenge(nil, c, false); !bytes.Equal(b, []byte{FrameChallenge, 9, 8, 7, 6, 5, 4, 3, 2}) {
		t.Fatalf("challenge % x", b)
	}
	if b := AppendChallenge(nil, c, true); !bytes.Equal(b, []byte{FrameResponse, 9, 8, 7, 6, 5, 4, 3, 2}) {
		t.Fatalf("response % x", b)
	}
	if b := AppendPing(nil); !bytes.Equal(b, []byte{FramePing}) {
		t.Fatalf("ping % x", b)
	}
	if b := AppendClose(nil); !bytes.Equal(b, []byte{FrameClose}) {
		t.Fatalf("close % x", b)
	}
	if b := AppendGiveUp(nil, 0x0102, 0x03040506); !bytes.Equal(b, []byte{FrameGiveUp, 1, 2, 3, 4, 5, 6}) || len(b) != GiveUpFrameLen {
		t.Fatalf("give-up % x", b)
	}
}

func TestFrameSequence(t *testing.T) {
	var b []byte
	want := frames()
	for _, c := range want {
		b = append(b, c.enc...)
	}
	b = append(b, FramePadding, 0xde, 0xad, FramePing) // padding swallows the ping
	var got []Frame
	for len(b) > 0 {
		f, rest, err := NextFrame(b)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f)
		b = rest
	}
	if len(got) != len(want)+1 {
		t.Fatalf("%d frames, want %d", len(got), len(want)+1)
	}
	for i, c := range want {
		if !reflect.DeepEqual(got[i], c.dec) {
			t.Fatalf("frame %d: %+v, want %+v", i, got[i], c.dec)
		}
	}
	if got[len(want)].Type != FramePadding {
		t.Fatal("last frame is not padding")
	}
}

func TestFrameTruncated(t *testing.T) {
	for _, c := range frames() {
		for n := 0; n < len(c.enc); n++ {
			in := bytes.Clone(c.enc[:n]) // cap == len: any over-read panics
			_, _, err := NextFrame(in)
			if n == 0 && !errors.Is(err, ErrShort) {
				t.Fatalf("empty input: err = %v", err)
			}
			if n > 0 && !errors.Is(err, ErrShort) {
				t.Fatalf("type %d truncated to %d: err = %v, want ErrShort", c.dec.Type, n, err)
			}
		}
	}
}

func TestFrameErrors(t *testing.T) {
	if _, _, err := NextFrame([]byte{0x77, 1, 2}); !errors.Is(err, ErrUnknownType) {
		t.Errorf("unknown type: err = %v", err)
	}
	zero := []byte{FrameData, 0, 1, 0, 0, 0, 1, 0, 0}
	if _, _, err := NextFrame(zero); !errors.Is(err, ErrBadLength) {
		t.Errorf("empty DATA: err = %v, want ErrBadLength", err)
	}
	// A length that runs past the datagram.
	long := []byte{FrameData, 0, 1, 0, 0, 0, 1, 0, 3, 0xaa, 0xbb}
	if _, _, err := NextFrame(long); !errors.Is(err, ErrShort) {
		t.Errorf("overlong DATA: err = %v, want ErrShort", err)
	}
}

func TestDataPacketCapped(t *testing.T) {
	b := append(AppendData(nil, 1, 2, []byte{1, 2, 3}), AppendPing(nil)...)
	f, rest, err := NextFrame(b)
	if err != nil {
		t.Fatal(err)
	}
	if cap(f.Packet) != len(f.Packet) {
		t.Fatalf("Packet cap %d > len %d: appending would overwrite the next frame", cap(f.Packet), len(f.Packet))
	}
	_ = append(f.Packet, 0xff)
	if len(rest) != 1 || rest[0] != FramePing {
		t.Fatal("next frame damaged")
	}
}

func TestMessageType(t *testing.T) {
	if MessageType(nil) != 0 || MessageType([]byte{TypeData, 9}) != TypeData {
		t.Fatal("MessageType")
	}
}

func TestParamsRoundTrip(t *testing.T) {
	p := SessionParams{
		Scheduler:   "minrtt",
		Reorder:     "flow",
		ReorderHold: 0x01020304,
		Weights:     []uint16{1000, 0, 0xfffe},
		Tiers:       []uint8{0, 1, 7},
		Congestion:  "bbr",
		Recovery:    "off",
		Rekey:       true,
	}
	b, err := AppendParams([]byte{0xaa}, p)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0xaa,
		ParamScheduler, 6, 'm', 'i', 'n', 'r', 't', 't',
		ParamReorder, 4, 'f', 'l', 'o', 'w',
		ParamCongestion, 3, 'b', 'b', 'r',
		ParamRecovery, 3, 'o', 'f', 'f',
		ParamRekey, 0,
		ParamReorderHold, 4, 1, 2, 3, 4,
		ParamWeights, 6, 0x03, 0xe8, 0, 0, 0xff, 0xfe,
		ParamTiers, 3, 0, 1, 7,
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("params\n got % x\nwant % x", b, want)
	}
	got, err := ParseParams(b[1:])
	if err != nil || !reflect.DeepEqual(got, p) {
		t.Fatalf("ParseParams = %+v, %v", got, err)
	}
	if b, err := AppendParams(nil, SessionParams{}); err != nil || len(b) != 0 {
		t.Fatalf("empty params encode to % x, %v", b, err)
	}
	if got, err := ParseParams(nil); err != nil || !reflect.DeepEqual(got, SessionParams{}) {
		t.Fatalf("ParseParams(nil) = %+v, %v", got, err)
	}
}

func TestParamsUnknownSkipped(t *testing.T) {
	b := []byte{200, 3, 1, 2, 3, ParamReorder, 1, 'x', 201, 0}
	p, err := ParseParams(b)
	if err != nil || p.Reorder != "x" {
		t.Fatalf("ParseParams = %+v, %v", p, err)
	}
}

func TestParamsTruncated(t *testing.T) {
	b, _ := AppendParams(nil, SessionParams{Scheduler: "abc", ReorderHold: 7, Weights: []uint16{1, 2}})
	// TLV boundaries: 0, 5 (scheduler), 11 (hold), 17 (weights).
	bounds := map[int]bool{0: true, 5: true, 11: true, 17: true}
	if len(b) != 17 {
		t.Fatalf("encoded %d bytes, want 17", len(b))
	}
	for n := 0; n <= len(b); n++ {
		_, err := ParseParams(bytes.Clone(b[:n]))
		if bounds[n] && err != nil {
			t.Fatalf("prefix of %d (a TLV boundary): %v", n, err)
		}
		if !bounds[n] && !errors.Is(err, ErrShort) {
			t.Fatalf("prefix of %d: err = %v, want ErrShort", n, err)
		}
	}
}

func TestParamsBadLengths(t *testing.T) {
	bad := [][]byte{
		{ParamReorderHold, 3, 0, 0, 1},
		{ParamReorderHold, 5, 0, 0, 0, 0, 1},
		{ParamWeights, 3, 0, 1, 2},
		append([]byte{ParamWeights, 2 * (MaxWeights + 1)}, make([]byte, 2*(MaxWeights+1))...),
	}
	for _, b := range bad {
		if _, err := ParseParams(b); !errors.Is(err, ErrBadLength) {
			t.Errorf("% x: err = %v, want ErrBadLength", b[:3], err)
		}
	}
	ok := append([]byte{ParamWeights, 2 * MaxWeights}, make([]byte, 2*MaxWeights)...)
	if p, err := ParseParams(ok); err != nil || len(p.Weights) != MaxWeights {
		t.Errorf("MaxWeights weights: %d, %v", len(p.Weights), err)
	}
}

func TestAppendParamsLimits(t *testing.T) {
	if _, err := AppendParams(nil, SessionParams{Scheduler: strings.Repeat("s", 256)}); err == nil {
		t.Error("256-byte scheduler name accepted")
	}
	if _, err := AppendParams(nil, SessionParams{Congestion: strings.Repeat("c", 255)}); err != nil {
		t.Errorf("255-byte name refused: %v", err)
	}
	if _, err := AppendParams(nil, SessionParams{Weights: make([]uint16, MaxWeights+1)}); err == nil {
		t.Error("too many weights accepted")
	}
}

// FuzzNextFrame walks all frames of arbitrary input like the receive path does.
// Whatever decodes must re-encode to exactly the bytes it came from.
func FuzzNextFrame(f *testing.F) {
	var all []byte
	for _, c := range frames() {
		f.Add(c.enc)
		all = append(all, c.enc...)
	}
	f.Add(all)
	f.Add(append(bytes.Clone(all), FramePadding, 1, 2))
	f.Add([]byte{FrameData, 0, 0, 0, 0, 0, 0, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		b := bytes.Clone(in)
		b = b[:len(b):len(b)] // any read past the end panics
		for len(b) > 0 {
			fr, rest, err := NextFrame(b)
			if err != nil {
				if rest != nil {
					t.Fatal("error with a rest")
				}
				return
			}
			if len(rest) >= len(b) {
				t.Fatalf("no progress: %d → %d bytes", len(b), len(rest))
			}
			consumed := b[:len(b)-len(rest)]
			if len(rest) > 0 && &rest[0] != &b[len(consumed)] {
				t.Fatal("rest is not the tail of the input")
			}
			var enc []byte
			switch fr.Type {
			case FramePadding:
				if rest != nil {
					t.Fatal("padding left a rest")
				}
				enc = append([]byte{FramePadding}, consumed[1:]...)
			case FrameData:
				if len(fr.Packet) == 0 || cap(fr.Packet) != len(fr.Packet) {
					t.Fatalf("packet len %d cap %d", len(fr.Packet), cap(fr.Packet))
				}
				enc = AppendData(nil, fr.Flow, fr.FlowSeq, fr.Packet)
			case FrameAck:
				enc = AppendAck(nil, fr.Ack)
			case FramePing:
				enc = AppendPing(nil)
			case FrameClose:
				enc = AppendClose(nil)
			case FrameChallenge, FrameResponse:
				enc = AppendChallenge(nil, fr.Challenge, fr.Type == FrameResponse)
			case FrameGiveUp:
				enc = AppendGiveUp(nil, fr.Flow, fr.FlowSeq)
			case FrameRebuilt:
				enc = AppendRebuilt(nil, fr.Flow, fr.FlowSeq)
			case FrameCookie:
				enc = AppendCookie(nil, fr.Cookie)
			case FramePathGone:
				enc = AppendPathGone(nil, fr.Ack.Path)
			default:
				t.Fatalf("decoded unknown type %d", fr.Type)
			}
			if !bytes.Equal(enc, consumed) {
				t.Fatalf("type %d re-encodes to % x, came from % x", fr.Type, enc, consumed)
			}
			b = rest
		}
	})
}

// FuzzParseParams: whatever parses must encode and parse back to the same value.
func FuzzParseParams(f *testing.F) {
	b, _ := AppendParams(nil, SessionParams{Scheduler: "minrtt", Reorder: "flow", ReorderHold: 5000, Weights: []uint16{3, 4}, Congestion: "cubic"})
	f.Add(b)
	f.Add([]byte{200, 1, 0})
	f.Add([]byte{ParamWeights, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := ParseParams(in)
		if err != nil {
			return
		}
		enc, err := AppendParams(nil, p)
		if err != nil {
			t.Fatalf("parsed params %+v do not encode: %v", p, err)
		}
		q, err := ParseParams(enc)
		if err != nil {
			t.Fatalf("re-encoded params do not parse: %v", err)
		}
		if len(p.Weights) == 0 {
			p.Weights = nil // an empty weights TLV is not re-encoded
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("round trip %+v → %+v", p, q)
		}
	})
}

func BenchmarkNextFrameData(b *testing.B) {
	d := AppendData(nil, 7, 9, make([]byte, 1400))
	b.ReportAllocs()
	for b.Loop() {
		f, _, err := NextFrame(d)
		if err != nil || len(f.Packet) != 1400 {
			b.Fatal(err)
		}
	}
}

func BenchmarkNextFrameMixed(b *testing.B) {
	var d []byte
	for _, c := range frames() {
		d = append(d, c.enc...)
	}
	b.ReportAllocs()
	for b.Loop() {
		for r := d; len(r) > 0; {
			_, rest, err := NextFrame(r)
			if err != nil {
				b.Fatal(err)
			}
			r = rest
		}
	}
}

func BenchmarkAppendAck(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendAck(buf[:0], testAck)
	}
}

func BenchmarkHeaders(b *testing.B) {
	buf := make([]byte, DataPrefixLen+100+TagLen)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		PutDataHeader(buf, DataHeader{Receiver: 1, Counter: uint64(i)})
		PutInnerHeader(buf[DataHeaderLen:], InnerHeader{Seq: uint32(i), Path: 1})
		PutDataFrameHeader(buf[DataHeaderLen+InnerHeaderLen:], 3, uint32(i), 100)
		h, err := ParseDataHeader(buf)
		if err != nil || h.Counter != uint64(i) {
			b.Fatal(err)
		}
		if _, err := ParseInnerHeader(buf[DataHeaderLen:]); err != nil {
			b.Fatal(err)
		}
	}
}

func TestFrameAllocs(t *testing.T) {
	var d []byte
	for _, c := range frames() {
		d = append(d, c.enc...)
	}
	buf := make([]byte, 0, 128)
	n := testing.AllocsPerRun(100, func() {
		for r := d; len(r) > 0; {
			_, rest, _ := NextFrame(r)
			r = rest
		}
		buf = AppendAck(buf[:0], testAck)
		buf = AppendChallenge(buf, [ChallengeLen]byte{}, true)
		buf = AppendPing(buf)
	})
	if n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func TestPathGoneFrame(t *testing.T) {
	b := AppendPathGone([]byte{}, 0x0102)
	if len(b) != PathGoneFrameLen || b[0] != FramePathGone {
		t.Fatalf("% x", b)
	}
	f, rest, err := NextFrame(append(b, FramePing))
	if err != nil || f.Type != FramePathGone || f.Ack.Path != 0x0102 || len(rest) != 1 {
		t.Fatalf("%+v %v %v", f, rest, err)
	}
	if _, _, err := NextFrame(b[:2]); err == nil {
		t.Fatal("truncated PATH_GONE parsed")
	}
}

func TestCookieFrame(t *testing.T) {
	c := [CookieLen]byte{1, 2, 3, 15: 16}
	b := AppendCookie([]byte{}, c)
	if len(b) != CookieFrameLen || b[0] != FrameCookie {
		t.Fatalf("% x", b)
	}
	f, rest, err := NextFrame(append(b, FramePing))
	if err != nil || f.Type != FrameCookie || f.Cookie != c || len(rest) != 1 {
		t.Fatalf("%+v %v %v", f, rest, err)
	}
	if _, _, err := NextFrame(b[:CookieFrameLen-1]); err == nil {
		t.Fatal("truncated COOKIE parsed")
	}
}
