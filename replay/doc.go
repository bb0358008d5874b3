// Package replay rejects transport messages whose counter was already accepted or
// has fallen too far behind the newest one.
//
// # Why the window is large
//
// A single-path tunnel sees counters almost in order, so WireGuard's window of
// 8128 counters is plenty there. braid spreads one counter sequence over several
// paths whose delays differ, and a packet on the slow path arrives after every
// packet sent later on the fast path. The window must therefore cover the path
// skew times the packet rate: at 1 Gbit/s of 1400-byte packets (about 89 000
// packets/s) WireGuard's 8128 counters last only ~90 ms, less than the delay
// difference between, say, a fibre line and an LTE link. The default of 65536
// counters lasts ~730 ms at that rate and costs 8 KiB per session key. Counters
// that fall out of the window are dropped as too old, which to the inner
// transport looks like loss, so an undersized window turns skew into loss.
//
// # Layout
//
// The window is a ring of 64-bit bitmap words, one bit per counter; advancing
// the newest counter clears only the words it skips over, so both checking and
// advancing cost O(1) except for a jump, which costs at most one pass over the
// ring. The ring holds one word more than size/64 so that every counter within
// size of the newest is tracked exactly, whatever its position inside a word.
//
// # Concurrency
//
// Several path sockets decrypt at once. Check is lock-free (atomic loads): it is
// only a cheap filter before the AEAD. Update is the authority: it tests and sets
// the bit under a mutex, so of two goroutines that authenticated the same counter
// concurrently exactly one gets true.
package replay
