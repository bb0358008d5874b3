package fec

import (
	"sync"
	"sync/atomic"

	"github.com/klauspost/reedsolomon"
)

// codecs caches one Reed-Solomon codec per (k, m). A reedsolomon.Encoder is safe for
// concurrent use and holds only its coding matrix, so every Encoder and Decoder of the
// process shares them; building one allocates, so it happens once per (k, m).
var (
	codecs  [MaxK + 1][MaxM + 1]atomic.Pointer[codec]
	codecMu sync.Mutex
)

type codec struct{ rs reedsolomon.Encoder }

// codecFor returns the codec for k source and m repair symbols (1 ≤ k ≤ MaxK,
// 1 ≤ m ≤ MaxM).
//
// Options: one goroutine (the engine calls under its peer lock and symbols are
// ~1500 bytes, far below any split threshold anyway), and no inversion cache: the
// cache keeps one k×k inverse per loss pattern ever seen, for the life of the
// process, which is not bounded memory; without it a reconstruction inverts its
// k×k matrix afresh (a few µs, and only for blocks that lost something).
func codecFor(k, m int) (reedsolomon.Encoder, error) {
	if c := codecs[k][m].Load(); c != nil {
		return c.rs, nil
	}
	codecMu.Lock()
	defer codecMu.Unlock()
	if c := codecs[k][m].Load(); c != nil {
		return c.rs, nil
	}
	rs, err := reedsolomon.New(k, m, reedsolomon.WithMaxGoroutines(1), reedsolomon.WithInversionCache(false))
	if err != nil {
		return nil, err
	}
	codecs[k][m].Store(&codec{rs: rs})
	return rs, nil
}

// symbolBufs returns n empty buffers of capacity size each (one allocation), for
// the symbols handed to the codec. Each starts on a 64-byte boundary
// (reedsolomon.AllocAligned): without assembly (mips, arm, riscv64, …) the codec
// multiplies 2 bytes at a time through unsafe uint16 loads and stores, and a buffer
// at an odd address (one carved at a stride of LenPrefix+MaxPayload, with odd
// MaxPayload, as the default is) makes every one of them unaligned. A MIPS CPU
// traps on that: Linux emulates the access in the trap handler, orders of
// magnitude slower, and qemu-user raises SIGBUS.
func symbolBufs(n, size int) [][]byte {
	bufs := reedsolomon.AllocAligned(n, size)
	for i := range bufs {
		bufs[i] = bufs[i][:0:size]
	}
	return bufs
}
