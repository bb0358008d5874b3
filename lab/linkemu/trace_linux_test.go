//go:build linux

package linkemu

import (
	"math"
	"net/netip"
	"testing"
	"time"
)

// With a trace and a schedule with bursts the per-frame path still
// allocates nothing after warm-up.
func TestDirCycleAllocsTrace(t *testing.T) {
	ms := make([]uint32, 0, 100*90)
	for m := range 100 {
		for range 90 { // 90 opportunities a ms, about 1.08 Gbit/s
			ms = append(ms, uint32(m+1))
		}
	}
	sh := Shape{Trace: mustTrace(t, ms...), QueuePackets: 1000, Schedule: &Schedule{Period: 50 * time.Millisecond,
		Steps: []Step{{At: 0, Delay: 10 * time.Millisecond}, {At: 20 * time.Millisecond, Delay: 5 * time.Millisecond, DropFor: time.Millisecond}}}}
	d := newDir(AtoB, sh, frameBufSize(1500))
	var cur *slot
	now := time.Duration(0)
	step := func() {
		now += 12 * time.Microsecond
		cycle(d, &cur, now)
	}
	for range 20000 {
		step()
	}
	if allocs := testing.AllocsPerRun(10000, step); allocs != 0 {
		t.Errorf("%v allocations per frame", allocs)
	}
	if st := d.stats(); st.Forwarded == 0 || st.DroppedBurst == 0 {
		t.Errorf("cycle did not exercise the trace and the bursts: %+v", st)
	}
}

// TestTraceLink saturates a link whose capacity is a trace, 12.032 Mbit/s
// for the first half of each second and 24.064 for the second, and checks
// at the receiver the mean rate over two periods (18.048 Mbit/s ± 2 %) and
// the ratio of the halves (2 ± 5 %); that the bytes forwarded follow
// Offered; and that Offered counts from the Reseed.
func TestTraceLink(t *testing.T) {
	tp := newTopo(t)
	ms := make([]uint32, 0, 1500)
	for m := uint32(1); m <= 1000; m++ {
		ms = append(ms, m)
		if m > 500 {
			ms = append(ms, m)
		}
	}
	tr := mustTrace(t, ms...)
	l := tp.start(t, Shape{Trace: tr, QueuePackets: 64}, Shape{})
	c1 := listenUDP(t, tp.h1, ip1, 5101)
	c2 := listenUDP(t, tp.h2, ip2, 5102)
	const payload = 1200
	frame := payload + udpOverhead
	dur := 3300 * time.Millisecond
	pps := 1.3 * 24.064e6 / float64(8*frame)
	k := collect(c2, int(pps*dur.Seconds())+100)

	r0 := monoNow()
	l.Reseed(1)
	r1 := monoNow()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sendPaced(t, c1, netip.AddrPortFrom(ip2, 5102), 0, int(pps*dur.Seconds()), payload, pps)
	}()
	// Offered is the trace's bytes from the Reseed until now: between
	// what it offered in the shortest and longest intervals it can mean.
	sample := func() (off uint64, st Stats) {
		a := monoNow()
		off, st = l.Offered(AtoB), l.Stats(AtoB)
		b := monoNow()
		if lo, hi := tr.OfferedBytes(a-r1), tr.OfferedBytes(b-r0); off < lo || off > hi {
			t.Errorf("Offered %d at %v after the Reseed, want in [%d, %d]", off, a-r1, lo, hi)
		}
		return off, st
	}
	time.Sleep(300 * time.Millisecond) // the queue fills
	o1, st1 := sample()
	time.Sleep(2500 * time.Millisecond)
	o2, st2 := sample()
	<-done
	got := k.stop(100 * time.Millisecond)

	fwd, off := float64(st2.BytesForwarded-st1.BytesForwarded), float64(o2-o1)
	t.Logf("offered %.0f B, forwarded %.0f B (%+.2f %%); queue drops %d", off, fwd, 100*(fwd/off-1), st2.DroppedQueue)
	if math.Abs(fwd/off-1) > 0.02 {
		t.Errorf("forwarded %.0f B while the trace offered %.0f", fwd, off)
	}
	if st2.DroppedQueue == 0 {
		t.Error("no queue drops: the link was not saturated")
	}
	// Arrivals at the receiver by the trace's time (from the Reseed).
	// Over the second and third periods, away from the halves' edges.
	var total float64
	var halves [2]float64
	for _, a := range got {
		rel := a.at - r0
		if rel < time.Second || rel >= 3*time.Second {
			continue
		}
		total += float64(8 * a.size)
		switch ph := rel % time.Second; {
		case ph >= 50*time.Millisecond && ph < 450*time.Millisecond:
			halves[0] += float64(8 * a.size)
		case ph >= 550*time.Millisecond && ph < 950*time.Millisecond:
			halves[1] += float64(8 * a.size)
		}
	}
	// a.size is the UDP payload: count whole frames, as the trace does.
	rate := total / 2 * float64(frame) / payload
	ratio := halves[1] / halves[0]
	t.Logf("delivered %.4f Mbit/s over two periods (trace %.4f), fast/slow half %.3f", rate/1e6, tr.MeanRate()/1e6, ratio)
	if math.Abs(rate/tr.MeanRate()-1) > 0.02 {
		t.Errorf("delivered %.4f Mbit/s, want %.4f ± 2 %%", rate/1e6, tr.MeanRate()/1e6)
	}
	if math.Abs(ratio/2-1) > 0.05 {
		t.Errorf("the fast half carried %.3f× the slow one, want 2", ratio)
	}
}
