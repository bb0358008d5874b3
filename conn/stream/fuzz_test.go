package stream

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/braid-vpn/braid/wire"
)

// chunkReader hands out its data in reads of 1, 2, …, max bytes, round and round,
// so a fuzz input also decides where the reads split the stream.
type chunkReader struct {
	data []byte
	max  int
	next int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := len(c.data)
	if c.max > 0 {
		n = min(n, c.next%c.max+1)
		c.next++
	}
	n = copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// refParse is the framing of wire.StreamHello and StreamFrameBounds written out the
// plain way, over the whole stream at once: the frames, then how the stream ends
// (io.EOF at a frame boundary, errTruncated, or another peer error).
func refParse(s []byte) (frames [][]byte, end error) {
	if len(s) < wire.StreamHelloLen {
		if len(s) == 0 {
			return nil, io.EOF
		}
		return nil, errTruncated
	}
	if [wire.StreamHelloLen]byte(s) != wire.StreamHello {
		return nil, &peerError{"bad hello"}
	}
	s = s[wire.StreamHelloLen:]
	for {
		switch {
		case len(s) == 0:
			return frames, io.EOF
		case len(s) < wire.StreamFrameHeaderLen:
			return frames, errTruncated
		}
		n := int(s[0])<<8 | int(s[1])
		if n == 0 {
			return frames, &peerError{"empty frame"}
		}
		if len(s) > 2 {
			if _, _, ok := wire.StreamFrameBounds(s[2]); !ok {
				return frames, &peerError{"unknown type"}
			}
		}
		if len(s) < 2+n {
			return frames, errTruncated
		}
		d := s[2 : 2+n]
		lo, hi, _ := wire.StreamFrameBounds(d[0])
		if n < lo || n > hi {
			return frames, &peerError{"bad length"}
		}
		frames = append(frames, d)
		s = s[2+n:]
	}
}

// FuzzFrameReader feeds a stream, split into reads as the input says, through a
// frameReader that starts at size bytes and grows to 32 KiB after growAt frames
// (a server connection being authenticated). It must not panic, and must cut the
// same frames and end the same way as refParse.
func FuzzFrameReader(f *testing.F) {
	init := dgram(wire.MinInitLen, 1)
	init[0] = wire.TypeHandshakeInit
	resp := dgram(wire.MinRespLen, 2)
	resp[0] = wire.TypeHandshakeResp
	good := streamOf(init, resp, dgram(44, 3), dgram(1400, 4), dgram(9000, 5))
	for _, s := range [][]byte{
		nil,
		good,
		good[:len(good)-1],
		good[:5],
		streamOf(),
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		append(streamOf(dgram(100, 1)), 0, 0),
		append(streamOf(dgram(100, 1)), 0xea, 0x60, 'x'),
		append(streamOf(dgram(100, 1)), 0, 10, wire.TypeData, 1, 2),
		append(streamOf(), 0xff, 0xff, wire.TypeData),
	} {
		f.Add(s, uint8(0), uint16(1024), uint8(0))
		f.Add(s, uint8(1), uint16(8), uint8(1))
		f.Add(s, uint8(7), uint16(unauthReadBuffer), uint8(2))
	}
	f.Fuzz(func(t *testing.T, s []byte, chunk uint8, size uint16, growAt uint8) {
		want, wantEnd := refParse(s)
		fr := newFrameReader(max(int(size), 1))
		src := &chunkReader{data: s, max: int(chunk)}
		var got [][]byte
		var end error
		for end == nil {
			d, ok, err := fr.peek()
			if err != nil {
				end = err
				break
			}
			if ok {
				if checkDatagram(d) != nil {
					t.Fatalf("frame %d fails the check", len(got))
				}
				got = append(got, bytes.Clone(d))
				fr.consume(d)
				if len(got) == int(growAt) {
					fr.grow(32 << 10)
				}
				continue
			}
			if err := fr.fill(src); err != nil {
				end = err
			}
			if fr.r < 0 || fr.r > fr.w || fr.w > len(fr.buf) || len(fr.buf) > wire.StreamHelloLen+wire.StreamFrameHeaderLen+wire.MaxStreamFrame+32<<10 {
				t.Fatalf("reader state r=%d w=%d len=%d", fr.r, fr.w, len(fr.buf))
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%d frames, the reference cuts %d (end %v, reference %v)", len(got), len(want), end, wantEnd)
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("frame %d differs", i)
			}
		}
		switch {
		case errors.Is(wantEnd, io.EOF):
			if !errors.Is(end, io.EOF) {
				t.Fatalf("ended with %v, the reference at a frame boundary", end)
			}
		case wantEnd == errTruncated:
			if end != errTruncated {
				t.Fatalf("ended with %v, the reference with a truncated frame", end)
			}
		default:
			if !isPeerError(end) || end == errTruncated {
				t.Fatalf("ended with %v, the reference with %v", end, wantEnd)
			}
		}
	})
}
