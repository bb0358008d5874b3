package cc

import (
	"testing"
	"time"
)

// benchPaths returns a controller with 8 active paths of assorted windows and RTTs.
func benchPaths(tb testing.TB, alg string) (*Controller, []*Path) {
	c, err := New(alg, Config{MSS: mss})
	if err != nil {
		tb.Fatal(err)
	}
	var ps []*Path
	for i := 0; i < 8; i++ {
		p := setup(c, i, float64(10+7*i), time.Duration(10+13*i)*time.Millisecond)
		p.l1 = float64(1e5 * (i + 1))
		ps = append(ps, p)
	}
	return c, ps
}

func BenchmarkOnAck8Paths(b *testing.B) {
	for _, alg := range []string{Reno, Cubic, LIA, OLIA, BALIA, WVegas, Coupled, EWTCP, Rate} {
		b.Run(alg, func(b *testing.B) {
			_, ps := benchPaths(b, alg)
			now := t0.Add(time.Second)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := ps[i&7]
				now = now.Add(time.Microsecond)
				p.OnAck(Ack{Now: now, Bytes: 2 * mss, PriorInFlight: p.Window(), RTT: 30 * time.Millisecond, SRTT: 30 * time.Millisecond, LargestSent: now.Add(-30 * time.Millisecond),
					DeliveryRate: float64(1e6 + i&1023), MinRTT: 25 * time.Millisecond})
				if p.cwnd > 500 {
					p.cwnd = 50
				}
			}
		})
	}
}

func BenchmarkOnLoss8Paths(b *testing.B) {
	for _, alg := range []string{Reno, Cubic, LIA, OLIA, BALIA, WVegas, Coupled, EWTCP, Rate} {
		b.Run(alg, func(b *testing.B) {
			_, ps := benchPaths(b, alg)
			now := t0.Add(time.Second)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := ps[i&7]
				now = now.Add(time.Microsecond)
				p.cwnd = 40 // every call is a fresh congestion event from the same window
				p.OnLoss(Loss{Now: now, Bytes: mss, LargestSent: now})
			}
		})
	}
}

func TestUpdatesDoNotAllocate(t *testing.T) {
	for _, alg := range Names() {
		_, ps := benchPaths(t, alg)
		now := t0.Add(time.Second)
		i := 0
		allocs := testing.AllocsPerRun(1000, func() {
			p := ps[i&7]
			i++
			now = now.Add(time.Millisecond)
			p.OnSent(mss, p.Window(), now)
			p.OnAck(Ack{Now: now, Bytes: mss, PriorInFlight: p.Window(), RTT: 30 * time.Millisecond, LargestSent: now.Add(-30 * time.Millisecond),
				DeliveryRate: float64(1e6 + i), MinRTT: 25 * time.Millisecond})
			p.OnLoss(Loss{Now: now, Bytes: mss, LargestSent: now})
			_ = p.CanSend(1000, 1400)
			_ = p.PaceDelay(now, 1400)
			_ = p.Stats()
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per update", alg, allocs)
		}
	}
}

// BenchmarkPacing is one paced send on one of 8 "rate" paths: PaceDelay, then OnSent.
func BenchmarkPacing(b *testing.B) {
	_, ps := benchPaths(b, Rate)
	now := t0.Add(time.Second)
	for _, p := range ps {
		p.OnAck(Ack{Now: now, RTT: 30 * time.Millisecond, DeliveryRate: 1e6})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := ps[i&7]
		now = now.Add(time.Microsecond)
		if p.PaceDelay(now, mss) == 0 {
			p.OnSent(mss, mss, now)
		}
	}
}
