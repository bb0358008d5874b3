package reorder

import (
	"slices"
	"testing"
	"time"
)

func abandon(t *testing.T, b *Buffer[uint32], flow uint16, seq uint32, ms int, want []uint32) {
	t.Helper()
	if got := b.Abandon(flow, seq, at(msd(ms)), nil); !slices.Equal(got, want) {
		t.Fatalf("Abandon(flow %d, seq %d) = %v, want %v", flow, seq, got, want)
	}
}

func msd(n int) time.Duration { return time.Duration(n) * ms }

const time5s = 5 * time.Second

// A give-up for the head gap releases what waits behind it at once.
func TestAbandonHeadGap(t *testing.T) {
	b := New[uint32](fixed(50 * ms))
	push(t, b, 0, 0, at(0), []uint32{0}, false)
	push(t, b, 0, 2, at(1*ms), nil, false)
	push(t, b, 0, 3, at(2*ms), nil, false)
	abandon(t, b, 0, 1, 5, []uint32{2, 3})
	if _, ok := b.NextDeadline(); ok {
		t.Fatal("a deadline is left after the gap was released")
	}
	// The abandoned packet turns up after all: delivered once, as late.
	push(t, b, 0, 1, at(6*ms), []uint32{1}, false)
	push(t, b, 0, 1, at(7*ms), nil, true)
	wantStats(t, b, Stats{InOrder: 1, Reordered: 2, Abandoned: 1, Late: 1, Duplicates: 1})
	// Give-ups for delivered or passed sequence numbers change nothing.
	abandon(t, b, 0, 2, 8, nil)
	abandon(t, b, 0, 0, 8, nil)
	push(t, b, 0, 4, at(9*ms), []uint32{4}, false)
}

// A give-up for a gap behind another gap leaves a tombstone: when the first gap
// fills, the release runs through it.
func TestAbandonLaterGap(t *testing.T) {
	b := New[uint32](fixed(50 * ms))
	push(t, b, 0, 0, at(0), []uint32{0}, false)
	push(t, b, 0, 3, at(1*ms), nil, false)
	abandon(t, b, 0, 2, 2, nil)
	push(t, b, 0, 1, at(3*ms), []uint32{1, 3}, false)
	wantStats(t, b, Stats{InOrder: 2, Reordered: 1, Abandoned: 1})
	// A tombstone whose packet arrives before the gap closes becomes the packet.
	push(t, b, 0, 6, at(4*ms), nil, false)
	abandon(t, b, 0, 5, 5, nil)
	push(t, b, 0, 5, at(6*ms), nil, false)
	push(t, b, 0, 4, at(7*ms), []uint32{4, 5, 6}, false)
	wantStats(t, b, Stats{InOrder: 3, Reordered: 3, Abandoned: 1})
	// With nothing held behind it there is nothing to release, and nothing kept.
	abandon(t, b, 0, 9, 8, nil)
	if b.Stats().Held != 0 {
		t.Fatal("a tombstone was held for a flow with no gap")
	}
}

// Recoverable flows wait the recovery hold, plain flows only the reorder hold,
// independently in one buffer.
func TestClassesHoldDifferently(t *testing.T) {
	cfg := fixed(20 * ms)
	cfg.MaxRecoveryHold = 200 * ms
	cfg.StartAtZero = true
	b := New[uint32](cfg)
	b.SetRecoveryHold(80 * ms)
	if b.RecoveryHold() != 80*ms {
		t.Fatalf("RecoveryHold = %v", b.RecoveryHold())
	}
	// flow 1: recoverable (TCP), flow 2: plain; both miss seq 0 from +0.
	if out, _ := b.PushClass(1, 1, 101, Recoverable, at(0), nil); len(out) != 0 {
		t.Fatal(out)
	}
	if out, _ := b.PushClass(2, 1, 201, Plain, at(0), nil); len(out) != 0 {
		t.Fatal(out)
	}
	if d, _ := b.NextDeadline(); d != at(20*ms) {
		t.Fatalf("NextDeadline = %v, want +20ms (the plain flow)", d.Sub(t0))
	}
	expire(t, b, at(20*ms), []uint32{201})
	if d, _ := b.NextDeadline(); d != at(80*ms) {
		t.Fatalf("NextDeadline = %v, want +80ms (the recoverable flow)", d.Sub(t0))
	}
	expire(t, b, at(79*ms), nil)
	expire(t, b, at(80*ms), []uint32{101})
	// The recovery hold is capped by MaxRecoveryHold and never below the hold.
	b.SetRecoveryHold(time5s)
	if b.RecoveryHold() != 200*ms {
		t.Fatalf("RecoveryHold = %v, want the 200ms cap", b.RecoveryHold())
	}
	b.SetRecoveryHold(5 * ms)
	if b.RecoveryHold() != 20*ms {
		t.Fatalf("RecoveryHold = %v, want the 20ms reorder hold", b.RecoveryHold())
	}
	// Without MaxRecoveryHold (recovery off) there is no extension at all.
	c := New[uint32](fixed(20 * ms))
	c.SetRecoveryHold(80 * ms)
	if c.RecoveryHold() != 20*ms {
		t.Fatalf("RecoveryHold without a cap = %v", c.RecoveryHold())
	}
}
