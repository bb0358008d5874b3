package stream

import (
	"fmt"
	"testing"
	"time"

	"github.com/braid-vpn/braid/conn"
)

// pingPong moves one batch client → server and one back, reading until each batch
// has arrived whole.
type pingPong struct {
	p            *pair
	out          [][]byte
	toSrv, toCli []conn.Endpoint
	in           [][]byte
	sizes        []int
	eps          []conn.Endpoint
	failed       error
}

func newPingPong(t testing.TB, p *pair, n, size int) *pingPong {
	pp := &pingPong{p: p}
	for i := 0; i < n; i++ {
		pp.out = append(pp.out, dgram(size, uint32(i)))
		pp.in = append(pp.in, make([]byte, 2048))
		pp.toSrv = append(pp.toSrv, conn.Endpoint{Remote: p.srvAddr})
	}
	pp.sizes = make([]int, n)
	pp.eps = make([]conn.Endpoint, n)
	// Connect, and learn the client's endpoint as the server sees it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.cli.WriteBatch(pp.out[:1], pp.toSrv[:1])
		got := make(chan conn.Endpoint, 1)
		go func() {
			k, err := p.srv.ReadBatch(pp.in, pp.sizes, pp.eps)
			if err == nil && k > 0 {
				got <- pp.eps[0]
			}
		}()
		select {
		case ep := <-got:
			if a, ok := p.srv.(conn.Authenticator); ok {
				a.Authenticated(ep, peerOf(ep))
			}
			for i := 0; i < n; i++ {
				pp.toCli = append(pp.toCli, ep)
			}
			return pp
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection")
		}
	}
}

func (pp *pingPong) recv(c conn.Conn, want int) {
	a, _ := c.(conn.Authenticator)
	for got := 0; got < want; {
		k, err := c.ReadBatch(pp.in, pp.sizes, pp.eps)
		if err != nil {
			pp.failed = err
			return
		}
		if a != nil { // as the engine does
			for _, ep := range pp.eps[:k] {
				a.Authenticated(ep, peerOf(ep))
			}
		}
		got += k
	}
}

func (pp *pingPong) run() {
	if err := pp.p.cli.WriteBatch(pp.out, pp.toSrv); err != nil {
		pp.failed = err
		return
	}
	pp.recv(pp.p.srv, len(pp.out))
	if err := pp.p.srv.WriteBatch(pp.out, pp.toCli); err != nil {
		pp.failed = err
		return
	}
	pp.recv(pp.p.cli, len(pp.out))
}

func TestZeroAllocs(t *testing.T) {
	cfg := testConfig()
	cfg.MaxPending = 1 << 20 // nothing is dropped, or recv would wait forever
	p := newPair(t, cfg)
	pp := newPingPong(t, p, 32, 1200)
	pp.run() // warm up
	allocs := testing.AllocsPerRun(200, pp.run)
	if pp.failed != nil {
		t.Fatal(pp.failed)
	}
	if allocs != 0 && !raceEnabled {
		t.Fatalf("%v allocations per batch round trip, want 0", allocs)
	}
	if d := p.tr.dropFull.Load() + p.tr.dropDown.Load(); d != 0 {
		t.Fatalf("%d datagrams dropped", d)
	}
}

// BenchmarkLoopback: one op = a WriteBatch of n datagrams of 1200 bytes client →
// server, the ReadBatch calls that receive them, and the same back, over loopback.
func BenchmarkLoopback(b *testing.B) {
	for _, n := range []int{1, 32, 128} {
		b.Run(fmt.Sprintf("batch-%d", n), func(b *testing.B) {
			cfg := testConfig()
			cfg.MaxPending = 1 << 20
			p := newPair(b, cfg)
			pp := newPingPong(b, p, n, 1200)
			b.ReportAllocs()
			b.SetBytes(int64(2 * n * 1200))
			for b.Loop() {
				pp.run()
			}
			if pp.failed != nil {
				b.Fatal(pp.failed)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2*n), "ns/datagram")
		})
	}
}
