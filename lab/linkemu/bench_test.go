package linkemu

import (
	"math/rand/v2"
	"testing"
	"time"
)

func BenchmarkGilbertElliott(b *testing.B) {
	g := lossChain{Loss: GELoss(0.01, 0.3, 0.5, 0.01)}
	rng := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	for b.Loop() {
		g.drop(rng)
	}
}

// benchShape has every stage on: GE loss, a queue, 1 Gbit/s, delay, jitter.
var benchShape = Shape{
	Rate: 1_000_000_000, Delay: 10 * ms, Jitter: ms,
	Loss: GELoss(0.01, 0.3, 0.5, 0.001), QueuePackets: 1000, Seed: 1,
}

func BenchmarkPipeAdmit(b *testing.B) {
	p := newPipe(benchShape, AtoB)
	now := time.Duration(0)
	b.ReportAllocs()
	for b.Loop() {
		now += 12 * time.Microsecond // 1500 B at 1 Gbit/s
		p.admit(now, 1500)
	}
}
