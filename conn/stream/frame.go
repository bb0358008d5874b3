package stream

import (
	"errors"
	"fmt"
	"io"

	"github.com/braid-vpn/braid/wire"
)

// A peerError says the peer broke the framing: the connection is closed and counted
// as a bad peer (drop reason stream_bad_peer), unlike an ordinary disconnect.
type peerError struct{ msg string }

func (e *peerError) Error() string { return e.msg }

// errTruncated: the stream ended inside a frame.
var errTruncated = &peerError{"stream ended inside a frame (truncated)"}

// isPeerError reports whether err blames the peer's bytes.
func isPeerError(err error) bool {
	var pe *peerError
	return errors.As(err, &pe)
}

// appendFrame appends datagram d as one frame. The caller checks the length.
func appendFrame(b, d []byte) []byte {
	b = append(b, byte(len(d)>>8), byte(len(d)))
	return append(b, d...)
}

// checkDatagram is the sanity check of a frame's datagram: the message types braid
// sends, each within the lengths it can have. It is what tells a braid peer from
// anything else at the first frame; authentication is the engine's job.
func checkDatagram(d []byte) error {
	if len(d) == 0 {
		return &peerError{"empty frame"}
	}
	lo, hi, ok := wire.StreamFrameBounds(d[0])
	if !ok {
		return &peerError{fmt.Sprintf("frame with unknown message type %d", d[0])}
	}
	if len(d) < lo || len(d) > hi {
		return &peerError{fmt.Sprintf("frame of type %d with %d bytes (valid: %d..%d)", d[0], len(d), lo, hi)}
	}
	return nil
}

// frameReader cuts frames out of a byte stream. Bytes are read into buf[w:] and
// consumed from buf[r:]; a partial frame is moved to the front when the buffer's
// tail runs out. The buffer grows only if a frame is larger than it (to at most
// 2+65535 bytes) or on grow, so steady-state reading does not allocate.
type frameReader struct {
	buf   []byte
	r, w  int
	hello bool // the peer's hello has been checked
}

func newFrameReader(size int) frameReader {
	return frameReader{buf: make([]byte, size)}
}

// grow makes the buffer at least size bytes, keeping what it holds. Only the
// reader's own goroutine may call it, and not while it holds a datagram from peek.
func (f *frameReader) grow(size int) {
	if len(f.buf) >= size {
		return
	}
	nb := make([]byte, size)
	f.w = copy(nb, f.buf[f.r:f.w])
	f.r = 0
	f.buf = nb
}

// peek returns the next complete datagram, checked, without consuming it; ok is
// false when more bytes are needed. A non-nil error condemns the stream.
func (f *frameReader) peek() (d []byte, ok bool, err error) {
	if !f.hello {
		if f.w-f.r < wire.StreamHelloLen {
			return nil, false, nil
		}
		if [wire.StreamHelloLen]byte(f.buf[f.r:f.r+wire.StreamHelloLen]) != wire.StreamHello {
			return nil, false, &peerError{fmt.Sprintf("bad hello %q (not a braid stream peer, or another version)", f.buf[f.r:f.r+wire.StreamHelloLen])}
		}
		f.r += wire.StreamHelloLen
		f.hello = true
	}
	avail := f.w - f.r
	if avail < wire.StreamFrameHeaderLen {
		return nil, false, nil
	}
	n := int(f.buf[f.r])<<8 | int(f.buf[f.r+1])
	if n == 0 {
		return nil, false, &peerError{"empty frame"}
	}
	if avail >= wire.StreamFrameHeaderLen+1 {
		// The type byte alone already tells garbage apart; no need to wait for
		// the whole (claimed) length.
		if _, _, ok := wire.StreamFrameBounds(f.buf[f.r+2]); !ok {
			return nil, false, checkDatagram(f.buf[f.r+2 : f.r+3])
		}
	}
	if avail < wire.StreamFrameHeaderLen+n {
		return nil, false, nil
	}
	d = f.buf[f.r+2 : f.r+2+n]
	if err := checkDatagram(d); err != nil {
		return nil, false, err
	}
	return d, true, nil
}

// consume drops the datagram peek returned.
func (f *frameReader) consume(d []byte) {
	f.r += wire.StreamFrameHeaderLen + len(d)
	if f.r == f.w {
		f.r, f.w = 0, 0
	}
}

// fill reads at least one more byte from src. It makes room first: a partial
// frame moves to the front, and the buffer grows if the pending frame cannot fit.
// An EOF inside a frame (or inside the hello) is errTruncated; at a frame boundary
// it is io.EOF.
func (f *frameReader) fill(src io.Reader) error {
	need := wire.StreamHelloLen
	if f.hello {
		need = wire.StreamFrameHeaderLen
		if f.w-f.r >= wire.StreamFrameHeaderLen {
			need += int(f.buf[f.r])<<8 | int(f.buf[f.r+1])
		}
	}
	if f.r > 0 && len(f.buf)-f.r < need {
		f.w = copy(f.buf, f.buf[f.r:f.w])
		f.r = 0
	}
	f.grow(need)
	n, err := src.Read(f.buf[f.w:])
	f.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		return io.ErrNoProgress
	}
	if errors.Is(err, io.EOF) && f.w > f.r {
		return errTruncated
	}
	return err
}
