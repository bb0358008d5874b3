package reorder

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

func pushUnordered(t *testing.T, b *Buffer[uint32], flow uint16, seq uint32, ms int, want []uint32, wantDup bool) {
	t.Helper()
	got, dup := b.PushUnordered(flow, seq, seq, Recoverable, at(msd(ms)), nil)
	if dup != wantDup || !slices.Equal(got, want) {
		t.Fatalf("PushUnordered(flow %d, seq %d) = %v dup=%v, want %v dup=%v", flow, seq, got, dup, want, wantDup)
	}
}

// A packet that needs no order goes out at once, ahead of the gap; when the gap
// fills, the flow moves past its place without delivering it again, and a copy of
// it is a duplicate.
func TestPushUnorderedPassesGap(t *testing.T) {
	b := New[uint32](fixed(50 * ms))
	push(t, b, 0, 0, at(0), []uint32{0}, false)
	push(t, b, 0, 2, at(1*ms), nil, false)               // held behind 1
	pushUnordered(t, b, 0, 3, 2, []uint32{3}, false)     // out at once
	pushUnordered(t, b, 0, 3, 3, nil, true)              // a copy while the gap waits
	push(t, b, 0, 4, at(4*ms), nil, false)               // held
	push(t, b, 0, 1, at(5*ms), []uint32{1, 2, 4}, false) // 3 is not delivered again
	pushUnordered(t, b, 0, 3, 6, nil, true)              // a copy after the gap closed
	pushUnordered(t, b, 0, 5, 7, []uint32{5}, false)     // in order: as Push
	push(t, b, 0, 6, at(8*ms), []uint32{6}, false)
	wantStats(t, b, Stats{InOrder: 4, Bypassed: 1, Reordered: 2, Duplicates: 2})
}

// A gap behind which only unordered packets wait is given up at its hold like
// any other, delivering nothing twice; the gap's packet, if it comes later, is
// delivered once, late.
func TestPushUnorderedGapTimesOut(t *testing.T) {
	b := New[uint32](fixed(50 * ms))
	push(t, b, 0, 0, at(0), []uint32{0}, false)
	pushUnordered(t, b, 0, 2, 1, []uint32{2}, false)
	pushUnordered(t, b, 0, 3, 2, []uint32{3}, false)
	if d, ok := b.NextDeadline(); !ok || d != at(51*ms) {
		t.Fatalf("NextDeadline = %v %v, want the gap's at 51 ms", d.Sub(t0), ok)
	}
	expire(t, b, at(60*ms), nil)
	if b.Stats().Held != 0 {
		t.Fatalf("%d held after the gap timed out", b.Stats().Held)
	}
	push(t, b, 0, 1, at(61*ms), []uint32{1}, false)
	push(t, b, 0, 3, at(62*ms), nil, true)
	push(t, b, 0, 4, at(63*ms), []uint32{4}, false)
	wantStats(t, b, Stats{InOrder: 2, Bypassed: 2, Timeouts: 1, Skipped: 1, Late: 1, Duplicates: 1})
}

// An unordered packet whose place the sender abandoned goes out once.
func TestPushUnorderedAfterAbandon(t *testing.T) {
	b := New[uint32](fixed(50 * ms))
	push(t, b, 0, 0, at(0), []uint32{0}, false)
	push(t, b, 0, 3, at(1*ms), nil, false)
	abandon(t, b, 0, 2, 2, nil)
	pushUnordered(t, b, 0, 2, 3, []uint32{2}, false)
	push(t, b, 0, 1, at(4*ms), []uint32{1, 3}, false)
	push(t, b, 0, 2, at(5*ms), nil, true)
	wantStats(t, b, Stats{InOrder: 2, Bypassed: 1, Reordered: 1, Duplicates: 1})
}

// Mixed ordered and unordered packets, displaced, copied and (in the lossy run)
// lost: every packet that arrives is delivered exactly once, and without loss
// the ordered ones keep their order.
func TestUnorderedRandomizedExactlyOnce(t *testing.T) {
	for _, lossy := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(3, 77))
		const n = 3000
		var order []uint32
		for i := uint32(0); i < n; i++ {
			if lossy && i > 0 && rng.IntN(10) == 0 {
				continue
			}
			order = append(order, i)
			if rng.IntN(3) == 0 {
				order = append(order, i)
			}
		}
		for i := 1; i < len(order); i++ {
			if j := i + rng.IntN(20); j < len(order) {
				order[i], order[j] = order[j], order[i]
			}
		}
		unordered := func(seq uint32) bool { return seq%3 == 1 }
		b := randomRunBuffer[uint32](lossy, 1)
		var out []uint32
		now := t0
		for _, s := range order {
			if unordered(s) {
				out, _ = b.PushUnordered(0, s, s, Recoverable, now, out)
			} else {
				out, _ = b.Push(0, s, s, now, out)
			}
			now = now.Add(100 * 1000)
			out = b.Expire(now, out)
		}
		out = b.Flush(out)
		seen := map[uint32]bool{}
		for _, s := range out {
			if seen[s] {
				t.Fatalf("lossy=%v: %d delivered twice", lossy, s)
			}
			seen[s] = true
		}
		for _, s := range order {
			if !seen[s] {
				t.Fatalf("lossy=%v: %d arrived and was never delivered", lossy, s)
			}
		}
		if !lossy {
			last := int64(-1)
			for _, s := range out {
				if !unordered(s) {
					if int64(s) <= last {
						t.Fatalf("ordered %d after %d", s, last)
					}
					last = int64(s)
				}
			}
		}
		if st := b.Stats(); st.Bypassed == 0 {
			t.Fatalf("lossy=%v: nothing bypassed a gap: %+v", lossy, st)
		}
	}
}

func TestPushUnorderedDoesNotAllocate(t *testing.T) {
	b := New[uint32](fixed(50 * ms))
	out := make([]uint32, 0, 16)
	seq := uint32(0)
	allocs := testing.AllocsPerRun(200, func() {
		// A gap, an unordered packet past it, then the gap's packet.
		out, _ = b.PushUnordered(0, seq+1, seq+1, Recoverable, t0, out[:0])
		out, _ = b.Push(0, seq, seq, t0, out[:0])
		seq += 2
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per run", allocs)
	}
}

// tcpSeg builds an IPv4 (or IPv6) TCP segment with the given flags, payload
// length and TCP header length.
func tcpSeg(v6 bool, flags byte, payload, thl int) []byte {
	ipl := 20
	if v6 {
		ipl = 40
	}
	p := make([]byte, ipl+thl+payload)
	if v6 {
		p[0] = 6 << 4
		binary.BigEndian.PutUint16(p[4:], uint16(thl+payload))
		p[6] = 6
	} else {
		p[0] = 4<<4 | 5
		binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
		p[9] = 6
	}
	p[ipl+12] = byte(thl/4) << 4
	p[ipl+13] = flags
	return p
}

func TestPureAck(t *testing.T) {
	const ack, syn, fin, rst, psh = 0x10, 0x02, 0x01, 0x04, 0x08
	padded := append(tcpSeg(false, ack, 0, 20), 0, 0, 0, 0, 0, 0) // Ethernet padding
	frag := tcpSeg(false, ack, 0, 20)
	frag[6] = 0x20 // more fragments
	v6ext := tcpSeg(true, ack, 0, 20)
	v6ext[6] = 0 // hop-by-hop options first
	udp := tcpSeg(false, ack, 0, 20)
	udp[9] = 17
	badOff := tcpSeg(false, ack, 0, 20)
	badOff[32] = 2 << 4 // data offset below the header's size
	for _, c := range []struct {
		name string
		pkt  []byte
		want bool
	}{
		{"v4 ack", tcpSeg(false, ack, 0, 20), true},
		{"v4 ack with timestamps", tcpSeg(false, ack, 0, 32), true},
		{"v4 ack+psh, no data", tcpSeg(false, ack|psh, 0, 20), true},
		{"v4 ack, padded frame", padded, true},
		{"v6 ack", tcpSeg(true, ack, 0, 32), true},
		{"v4 data", tcpSeg(false, ack, 1, 20), false},
		{"v6 data", tcpSeg(true, ack, 100, 20), false},
		{"syn-ack", tcpSeg(false, ack|syn, 0, 20), false},
		{"fin", tcpSeg(false, ack|fin, 0, 20), false},
		{"rst", tcpSeg(false, ack|rst, 0, 20), false},
		{"no ack flag", tcpSeg(false, 0, 0, 20), false},
		{"fragment", frag, false},
		{"v6 extension header", v6ext, false},
		{"udp", udp, false},
		{"data offset too small", badOff, false},
		{"truncated", tcpSeg(false, ack, 0, 20)[:30], false},
		{"empty", nil, false},
	} {
		if got := PureAck(c.pkt); got != c.want {
			t.Errorf("%s: PureAck = %v, want %v", c.name, got, c.want)
		}
	}
}

// A gap behind which only unordered packets waited held nothing up: its filling
// late does not raise the adaptive hold, as a held packet's does.
func TestUnorderedGapDoesNotTeachTheHold(t *testing.T) {
	for _, held := range []bool{false, true} {
		b := New[uint32](Config{Mode: Adaptive, Hold: 200 * ms, MinHold: ms, MaxHeld: 64, Flows: 16, MaxRecoveryHold: 100 * ms})
		b.SetHold(5 * ms)
		b.SetRecoveryHold(50 * ms)
		b.PushClass(0, 0, 0, Recoverable, at(0), nil)
		if held {
			b.PushClass(0, 2, 2, Recoverable, at(0), nil)
		} else {
			pushUnordered(t, b, 0, 2, 0, []uint32{2}, false)
		}
		// The gap fills after 20 ms (a resend), within the recovery hold.
		if out, _ := b.PushClass(0, 1, 1, Recoverable, at(20*ms), nil); len(out) == 0 {
			t.Fatalf("held=%v: nothing delivered", held)
		}
		want := 5 * ms
		if held {
			want = 25 * ms // 1.25 × 20 ms
		}
		if b.Hold() != want {
			t.Fatalf("held=%v: hold %v, want %v", held, b.Hold(), want)
		}
	}
}
