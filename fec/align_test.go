package fec

import (
	"testing"
	"unsafe"
)

// TestSymbolBuffersAligned checks that every buffer the encoder and decoder hand to
// the Reed-Solomon codec starts on an 8-byte boundary whatever MaxPayload is. The
// codec's portable kernels (every architecture but amd64, arm64 and ppc64le) load
// and store through unsafe uint16/uint64 pointers; carved from one arena at a stride
// of LenPrefix+MaxPayload, the buffers sat at odd addresses for odd MaxPayload (the
// default among them), which killed the tests with SIGBUS on mips under qemu.
func TestSymbolBuffersAligned(t *testing.T) {
	aligned := func(what string, mp, i int, b []byte) {
		t.Helper()
		if cap(b) < LenPrefix+mp {
			t.Fatalf("MaxPayload %d: %s[%d] has capacity %d, want ≥ %d", mp, what, i, cap(b), LenPrefix+mp)
		}
		if a := uintptr(unsafe.Pointer(unsafe.SliceData(b))) % 8; a != 0 {
			t.Errorf("MaxPayload %d: %s[%d] starts %d bytes past an 8-byte boundary", mp, what, i, a)
		}
	}
	for _, mp := range []int{1, 1401, DefaultMaxPayload} {
		e := NewEncoder(EncoderConfig{MaxPayload: mp})
		e.take() // the memory a block opening takes
		for l := range e.lanes {
			for i, b := range e.lanes[l].src {
				aligned("encoder source", mp, i, b)
			}
		}
		for i, b := range e.parity {
			aligned("encoder parity", mp, i, b)
		}
		d := NewDecoder(DecoderConfig{MaxPayload: mp, Blocks: 3})
		for bl := range d.blocks {
			for i, b := range d.blocks[bl].repairs {
				aligned("decoder repair", mp, i, b)
			}
		}
		for i, b := range d.scratch {
			aligned("decoder scratch", mp, i, b)
		}
		for i, b := range d.src.data {
			aligned("decoder source", mp, i, b)
		}
	}
}
