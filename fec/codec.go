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
