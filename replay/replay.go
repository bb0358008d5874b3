package replay

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
)

// Window sizes.
const (
	// DefaultSize is the number of counters behind the newest one that the window
	// tracks when New is given 0; see the package documentation for the sizing.
	DefaultSize = 1 << 16
	// MinSize is the smallest window New builds; smaller requests are raised to it.
	MinSize = 128
	// MaxSize bounds the memory of one window (2^24 counters = 2 MiB).
	MaxSize = 1 << 24
)

// Window is a sliding replay window over 64-bit message counters. The zero value
// is not usable; call New.
type Window struct {
	mu    sync.Mutex      // serialises Update and Reset; Check does not take it
	next  atomic.Uint64   // newest accepted counter + 1; 0 = nothing accepted yet
	size  uint64          // counters tracked behind the newest (a power of two)
	words []atomic.Uint64 // ring; block b (= counter>>6) lives at words[b % len(words)]
}

// New returns a window tracking size counters behind the newest accepted one.
// size is rounded up to a power of two and clamped to [MinSize, MaxSize]; 0 (or
// a negative value) selects DefaultSize.
func New(size int) *Window {
	if size <= 0 {
		size = DefaultSize
	}
	size = min(max(size, MinSize), MaxSize)
	s := uint64(1) << bits.Len64(uint64(size-1)) // round up to a power of two
	return &Window{size: s, words: make([]atomic.Uint64, s/64+1)}
}

// Size returns the number of counters the window tracks behind the newest one: a
// counter c is accepted only if newest-c < Size().
func (w *Window) Size() int { return int(w.size) }

// Check reports whether counter might be accepted: false if it is too old or was
// already accepted. It is a cheap pre-check before decryption and does not record
// anything; Update, after authentication, is authoritative. The counter
// 2^64-1 is never accepted (a sender never gets that far; see noise).
func (w *Window) Check(counter uint64) bool {
	if counter == math.MaxUint64 {
		return false
	}
	next := w.next.Load()
	if counter >= next {
		return true
	}
	if next-1-counter >= w.size {
		return false
	}
	word, bit := w.locate(counter)
	return word.Load()&bit == 0
}

// Update records counter as accepted. It returns false, recording nothing, if the
// counter is too old or was already accepted: callers must then drop the message
// even though it authenticated. Call it only after the message authenticated, or
// a forger could advance the window and make genuine messages look old.
func (w *Window) Update(counter uint64) bool {
	if counter == math.MaxUint64 {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	next := w.next.Load()
	if counter >= next {
		if next > 0 {
			w.clear(((next-1)>>6)+1, counter>>6)
		}
		word, bit := w.locate(counter)
		word.Store(word.Load() | bit)
		w.next.Store(counter + 1)
		return true
	}
	if next-1-counter >= w.size {
		return false
	}
	word, bit := w.locate(counter)
	old := word.Load()
	if old&bit != 0 {
		return false
	}
	word.Store(old | bit)
	return true
}

// Highest returns the newest accepted counter; ok is false if none was accepted
// since New or Reset.
func (w *Window) Highest() (counter uint64, ok bool) {
	next := w.next.Load()
	return next - 1, next > 0
}

// Reset forgets every accepted counter. Only use it together with a key change:
// with the same key it re-opens the door to every old message.
func (w *Window) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.words {
		w.words[i].Store(0)
	}
	w.next.Store(0)
}

// locate returns the ring word and the bit mask for counter.
func (w *Window) locate(counter uint64) (*atomic.Uint64, uint64) {
	return &w.words[(counter>>6)%uint64(len(w.words))], 1 << (counter & 63)
}

// clear zeroes the ring words of blocks from..to (inclusive) as the newest counter
// moves into block to; a jump past the whole ring clears every word once.
func (w *Window) clear(from, to uint64) {
	if from > to {
		return
	}
	n := uint64(len(w.words))
	if to-from >= n {
		for i := range w.words {
			w.words[i].Store(0)
		}
		return
	}
	i := from % n
	for b := from; b <= to; b++ {
		w.words[i].Store(0)
		if i++; i == n {
			i = 0
		}
	}
}
