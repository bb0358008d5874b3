package aqm

import (
	"testing"
	"time"
)

// churn is a busy queue's dequeue pattern: one packet every 10µs whose
// sojourn time cycles through below target, above target and back, so that
// CoDel enters and leaves the dropping state and drops (the caller's loop
// included). It is the body of the allocation test and the benchmark.
type churn struct {
	c   *CoDel
	now time.Time
	i   uint64
}

func newChurn() *churn { return &churn{c: New(Config{}), now: base} }

func (ch *churn) packet() {
	ch.i++
	ch.now = ch.now.Add(10 * time.Microsecond)
	sojourn := time.Duration(ch.i%100_000) * time.Microsecond / 4 // 0 to 25ms, period 1s
	for ch.c.OnDequeue(sojourn, 64*1024, ch.now) {
	}
	if ch.i%50_000 == 0 {
		ch.c.OnEmpty(ch.now)
	}
}

func TestZeroAllocs(t *testing.T) {
	ch := newChurn()
	if n := testing.AllocsPerRun(200_000, ch.packet); n != 0 {
		t.Errorf("OnDequeue: %v allocs per packet", n)
	}
	if ch.c.Count() == 0 {
		t.Error("the churn never dropped: the test does not exercise the dropping state")
	}
	p4, p6 := ipv4(0x02), ipv6(0x02)
	if n := testing.AllocsPerRun(1000, func() {
		p4[1], p6[1] = 0x02, 0x25
		MarkCE(p4)
		MarkCE(p6)
		ECNCapable(p4)
	}); n != 0 {
		t.Errorf("MarkCE: %v allocs per run", n)
	}
}

func BenchmarkOnDequeue(b *testing.B) {
	ch := newChurn()
	b.ReportAllocs()
	for b.Loop() {
		ch.packet()
	}
}

func BenchmarkMarkCEIPv4(b *testing.B) {
	p := ipv4(0x02)
	b.ReportAllocs()
	for b.Loop() {
		p[1] = 0x02
		if !MarkCE(p) {
			b.Fatal("not marked")
		}
	}
}

func BenchmarkMarkCEIPv6(b *testing.B) {
	p := ipv6(0x02)
	b.ReportAllocs()
	for b.Loop() {
		p[1] = 0x25
		if !MarkCE(p) {
			b.Fatal("not marked")
		}
	}
}
