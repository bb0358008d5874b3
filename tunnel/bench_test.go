package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braid-vpn/braid/conn"
	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/fanout"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/noise"
	"github.com/braid-vpn/braid/path"
	"github.com/braid-vpn/braid/wire"
)

// capConn is a path socket that keeps the last datagram written (so a benchmark can
// hand it to the other side) and never delivers anything to ReadBatch.
type capConn struct {
	addr netip.AddrPort
	// record: every datagram written is kept in sent (buffers reused).
	record bool
	sent   [][]byte
	last   []byte
	lastEP conn.Endpoint
	writes int
	closed chan struct{}
	once   sync.Once
}

func newCapConn(addr netip.AddrPort) *capConn {
	return &capConn{addr: addr, last: make([]byte, 0, 2048), closed: make(chan struct{})}
}

func (c *capConn) ReadBatch([][]byte, []int, []conn.Endpoint) (int, error) {
	<-c.closed
	return 0, net.ErrClosed
}

func (c *capConn) WriteBatch(bufs [][]byte, eps []conn.Endpoint) error {
	for _, b := range bufs {
		if !c.record {
			break
		}
		if len(c.sent) < cap(c.sent) {
			c.sent = c.sent[:len(c.sent)+1]
		} else {
			c.sent = append(c.sent, nil)
		}
		c.sent[len(c.sent)-1] = append(c.sent[len(c.sent)-1][:0], b...)
	}
	if len(bufs) > 0 {
		c.last = append(c.last[:0], bufs[len(bufs)-1]...)
		c.lastEP = eps[len(eps)-1]
		c.writes++
	}
	return nil
}

func (c *capConn) LocalAddr() netip.AddrPort { return c.addr }
func (c *capConn) BatchSize() int            { return 64 }
func (c *capConn) Close() error              { c.once.Do(func() { close(c.closed) }); return nil }

// nullTUN discards writes and blocks reads.
type nullTUN struct {
	closed  chan struct{}
	once    sync.Once
	written int
}

func (d *nullTUN) Read([][]byte, []int, int) (int, error) { <-d.closed; return 0, errors.New("closed") }
func (d *nullTUN) Write(bufs [][]byte, _ int) (int, error) {
	d.written += len(bufs)
	return len(bufs), nil
}
func (d *nullTUN) BatchSize() int        { return 64 }
func (d *nullTUN) MTU() (int, error)     { return 1380, nil }
func (d *nullTUN) Name() (string, error) { return "null0", nil }
func (d *nullTUN) Close() error          { d.once.Do(func() { close(d.closed) }); return nil }
func newNullTUN() *nullTUN               { return &nullTUN{closed: make(chan struct{})} }

// benchPair is a client and a server engine joined by nothing but the benchmark:
// no goroutines run; the benchmark moves datagrams from one to the other itself.
type benchPair struct {
	cli, srv   *Engine
	cliConn    []*capConn
	srvConn    *capConn
	srvPeer    *peer
	srvTUN     *nullTUN
	in         *inbound
	cliW       *writer
	pkt        []byte
	remoteEP   conn.Endpoint
	serverSock *connState
	// acks: the server's datagrams (acks) go back to the client, so that
	// retained payloads are released as in a real session.
	cliIn     *inbound
	srvWrites int
	one       struct { // a read batch of one datagram (handOne)
		pbs   [1]*packetBuf
		sizes [1]int
		eps   [1]conn.Endpoint
	}
}

// newBenchPair runs the default loss recovery (payloads retained until acked)
// without a congestion window: the benchmark never acks, and a window would
// queue every packet after the first few.
func newBenchPair(tb testing.TB, paths int) *benchPair { return newBenchPairCC(tb, paths, "none") }

// newBenchPairCC is newBenchPair with the client running a congestion controller.
func newBenchPairCC(tb testing.TB, paths int, congestion string) *benchPair {
	return newBenchPairPeers(tb, paths, congestion, 0)
}

// newBenchPairPeers is newBenchPairCC with a server that has idle more
// clients besides the one the benchmark drives.
func newBenchPairPeers(tb testing.TB, paths int, congestion string, idle int) *benchPair {
	tb.Helper()
	cliKey, srvKey := mustKey(tb), mustKey(tb)
	bp := &benchPair{srvConn: newCapConn(srvAddr1), srvTUN: newNullTUN()}
	var locals []LocalPath
	for i := 0; i < paths; i++ {
		locals = append(locals, LocalPath{Addr: netip.AddrFrom4([4]byte{198, 18, byte(10 + i), 1})})
	}
	var err error
	bp.cli, err = New(Config{
		Role: Client, PrivateKey: cliKey, TUN: newNullTUN(), Logger: testLogger(nil),
		Listen: func(o conn.Options) (conn.Conn, error) {
			c := newCapConn(netip.AddrPortFrom(o.Addr.Addr(), 40000))
			bp.cliConn = append(bp.cliConn, c)
			return c, nil
		},
		ServerPublicKey: srvKey.Public(), Servers: []netip.AddrPort{srvAddr1}, LocalPaths: locals,
		Tunables: DefaultTunables(), Params: Params{Congestion: congestion},
	})
	if err != nil {
		tb.Fatal(err)
	}
	bp.srv, err = New(Config{
		Role: Server, PrivateKey: srvKey, TUN: bp.srvTUN, Logger: testLogger(nil),
		Listen:      func(conn.Options) (conn.Conn, error) { return bp.srvConn, nil },
		ListenAddrs: []netip.AddrPort{srvAddr1},
		Clients:     benchClients(tb, cliKey, idle),
		Tunables:    DefaultTunables(),
	})
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now()
	ikp, skp := sessionKeys(tb, cliKey, srvKey, cliAddr1, 2, now)
	cp := bp.cli.server
	cp.cur = ikp
	bp.cli.setIndex(ikp.LocalIndex, indexEntry{peer: cp, kp: ikp})
	bp.srvPeer = bp.srv.peers[0]
	if bp.srvPeer.pub != cliKey.Public() {
		tb.Fatal("the driven client is not the server's first peer")
	}
	bp.srvPeer.cur = skp
	bp.srv.setIndex(skp.LocalIndex, indexEntry{peer: bp.srvPeer, kp: skp})
	// Every client path has been measured (so the scheduler uses it) with equal
	// delay and rate.
	for _, ps := range cp.paths {
		for k := 0; k < 3; k++ {
			seq := ps.sender.NextSeq()
			ps.sender.OnSent(seq, 1400, true, now)
			ps.sender.OnAck(path.Ack{Largest: seq, RxBytes: uint64(1400 * (k + 1)), OWDRaw: 1000}, now.Add(2*time.Millisecond))
		}
	}
	bp.in = &inbound{e: bp.srv, w: newBatchWriter(bp.srv)}
	bp.cliW = newBatchWriter(bp.cli)
	bp.cliIn = &inbound{e: bp.cli, w: bp.cliW}
	bp.pkt = udp4(inCliA, inSrv, 4000, 5000, make([]byte, 1300))
	bp.serverSock = bp.srv.conns[0]
	return bp
}

// sessionKeys returns the client's and the server's keys of a real handshake
// between cliKey and srvKey (the client at src), made with the noise package
// directly; idx is the server's session index.
func sessionKeys(tb testing.TB, cliKey, srvKey keys.Key, src netip.Addr, idx uint32, now time.Time) (cli, srv *noise.Keypair) {
	tb.Helper()
	msg, st, err := noise.CreateInitiation(cliKey, srvKey.Public(), keys.Key{}, 1, nil, now)
	if err != nil {
		tb.Fatal(err)
	}
	r := noise.NewResponder(srvKey, noise.ResponderConfig{})
	acc, err := r.ConsumeInitiation(msg, src, func(keys.Key) (keys.Key, [12]byte, bool) { return keys.Key{}, [12]byte{}, true }, func() (uint32, bool) { return idx, true }, now)
	if err != nil {
		tb.Fatal(err)
	}
	ikp, _, err := st.ConsumeResponse(acc.Response, now)
	if err != nil {
		tb.Fatal(err)
	}
	return ikp, acc.Keypair
}

// benchClients is the server's client list: the driven client first, then
// idle ones with addresses of their own.
func benchClients(tb testing.TB, driven keys.Key, idle int) []ClientPeer {
	cs := []ClientPeer{{Name: "a", PublicKey: driven.Public(), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("100.64.0.2/32")}}}
	for i := range idle {
		a := netip.AddrFrom4([4]byte{100, 65, byte(i >> 8), byte(i)})
		cs = append(cs, ClientPeer{Name: fmt.Sprintf("idle%d", i), PublicKey: mustKey(tb).Public(), AllowedIPs: []netip.Prefix{netip.PrefixFrom(a, 32)}})
	}
	return cs
}

// send runs the client's inside path for one packet; the datagram ends up in the
// capture of the socket it was sent on.
func (bp *benchPair) send(now time.Time) *capConn {
	ps := sendInner(bp.cli.server, bp.cliW, bp.pkt, time.Now(), now)
	if ps == nil {
		return nil // queued for window room (congestion control)
	}
	bp.cliW.flush()
	return bp.cliConn[ps.cs.idx]
}

// sendInner runs p's inside path for inner packet pkt as routineInside does
// (the scheduler's view refreshed at refreshAt) and returns the path it took
// first, nil if none (no path, or it waits for window room). The datagram is
// sealed in w, not flushed.
func sendInner(p *peer, w *writer, pkt []byte, refreshAt, now time.Time) *pathState {
	e := p.e
	pb := e.pool.get()
	n := copy(pb.b[wire.DataPrefixLen:], pkt)
	pb.start, pb.end = wire.DataPrefixLen, wire.DataPrefixLen+n
	p.mu.Lock()
	p.refreshInfos(refreshAt)
	if !p.sendPacket(w, pb, now) {
		e.pool.put(pb)
	}
	w.seal()
	var ps *pathState
	if len(p.picks) > 0 {
		ps = p.infoP[p.picks[0]]
	}
	p.mu.Unlock()
	return ps
}

// receive runs the server's outside path for the datagram in c.
func (bp *benchPair) receive(c *capConn, now time.Time) {
	if c == nil {
		return
	}
	bp.handOne(bp.in, bp.serverSock, c.last, conn.Endpoint{Remote: c.addr}, now)
	if bp.srvConn.writes == bp.srvWrites {
		return
	}
	bp.srvWrites = bp.srvConn.writes
	for _, cs := range bp.cli.conns {
		if cs.c.LocalAddr() == bp.srvConn.lastEP.Remote {
			bp.handOne(bp.cliIn, cs, bp.srvConn.last, conn.Endpoint{Remote: srvAddr1}, now)
			return
		}
	}
}

// validateServerPaths marks the paths the server learnt as answered challenges.
func (bp *benchPair) validateServerPaths() {
	for _, ps := range bp.srvPeer.paths {
		if ps != nil {
			ps.validated = true
		}
	}
}

func BenchmarkInsideSend(b *testing.B) {
	for _, paths := range []int{1, 2, 8} {
		b.Run(map[int]string{1: "1path", 2: "2paths", 8: "8paths"}[paths], func(b *testing.B) {
			bp := newBenchPair(b, paths)
			now := time.Now()
			b.SetBytes(int64(len(bp.pkt)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				bp.send(now)
			}
		})
	}
}

func BenchmarkSendReceive(b *testing.B) {
	bp := newBenchPair(b, 2)
	now := time.Now()
	for i := 0; i < 4; i++ { // the server learns both paths
		bp.receive(bp.send(now), now)
	}
	bp.validateServerPaths()
	bp.measurePerPacket(b, func() {})
	if bp.srvTUN.written < b.N {
		b.Fatalf("only %d of %d packets reached the TUN", bp.srvTUN.written, b.N)
	}
}

// newLoadedServerBench is a pair in session whose server has 1000 more
// clients, a loopback listener for an HTTP endpoint, and a context that stops
// the load put on it.
func newLoadedServerBench(b *testing.B) (*benchPair, net.Listener, context.Context, context.CancelFunc) {
	bp := newBenchPairPeers(b, 2, "none", 1000)
	now := time.Now()
	for i := 0; i < 4; i++ {
		bp.receive(bp.send(now), now)
	}
	bp.validateServerPaths()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return bp, ln, ctx, cancel
}

// measurePerPacket times b.N packets through the pair, then stops the load.
func (bp *benchPair) measurePerPacket(b *testing.B, stop func()) {
	now := time.Now()
	b.SetBytes(int64(len(bp.pkt)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bp.receive(bp.send(now), now)
	}
	b.StopTimer()
	stop()
}

// BenchmarkSendReceiveScraped is BenchmarkSendReceive on a server with 1000
// more clients, without and with 50 scrapers fetching its metrics page over
// loopback, back to back or once a second each. The page is built from a snapshot (each peer's lock
// held only to copy it) at most once a second, so the per-packet time should
// not double while they run (issue 33's target; on a 2-core machine the
// scrapers also take CPU from the benchmark).
func BenchmarkSendReceiveScraped(b *testing.B) {
	for _, tc := range []struct {
		scrapers int
		static   bool          // the scrapers fetch a fixed page of the same size instead: the cost of serving alone
		every    time.Duration // each scraper's interval; 0: back to back
	}{{0, false, 0}, {50, false, 0}, {50, true, 0}, {50, false, time.Second}} {
		scrapers := tc.scrapers
		name := fmt.Sprintf("scrapers=%d", scrapers)
		if tc.static {
			name += "/static"
		}
		if tc.every > 0 {
			name += "/every=" + tc.every.String()
		}
		b.Run(name, func(b *testing.B) {
			bp, ln, ctx, cancel := newLoadedServerBench(b)
			defer cancel()
			provider := bp.srv.Status
			if tc.static {
				st := bp.srv.Status()
				provider = func() control.Status { return st }
			}
			go control.ServeMetricsOn(ctx, ln, control.NewCollector(provider))
			var scrapes atomic.Int64
			var wg sync.WaitGroup
			for range scrapers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cl := &http.Client{Timeout: 10 * time.Second}
					for ctx.Err() == nil {
						resp, err := cl.Get("http://" + ln.Addr().String() + "/metrics")
						if err != nil {
							continue
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						scrapes.Add(1)
						if tc.every > 0 {
							select {
							case <-ctx.Done():
							case <-time.After(tc.every):
							}
						}
					}
				}()
			}
			if scrapers > 0 {
				time.Sleep(100 * time.Millisecond) // the scrapers are running
			}
			bp.measurePerPacket(b, func() { cancel(); wg.Wait() })
			b.ReportMetric(float64(scrapes.Load()), "scrapes")
		})
	}
}

// The per-packet path allocates nothing in steady state: TUN packet → schedule →
// seal → socket batch on one side, datagram → open → reorder → TUN on the other.
func TestSendReceiveAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	bp := newBenchPair(t, 2)
	now := time.Now()
	for i := 0; i < 64; i++ {
		bp.receive(bp.send(now), now)
	}
	bp.validateServerPaths()
	for i := 0; i < 64; i++ {
		bp.receive(bp.send(now), now)
	}
	before := bp.srvTUN.written
	allocs := testing.AllocsPerRun(2000, func() { bp.receive(bp.send(now), now) })
	if allocs != 0 {
		t.Fatalf("%.2f allocations per packet, want 0", allocs)
	}
	if bp.srvTUN.written-before < 2000 {
		t.Fatalf("only %d packets delivered", bp.srvTUN.written-before)
	}
	// Recovery was on: payloads were retained, and the acks released them.
	if st := bp.cli.server.store; st == nil || st.Len() == 0 || st.Len() > 64 {
		t.Fatalf("retained payloads: store %v", st)
	}
}

// ackBack hands the client the server's last datagram (an ack) if the server wrote
// one since writes, as the client's outside path.
func (bp *benchPair) ackBack(in *inbound, writes int, now time.Time) {
	if bp.srvConn.writes == writes {
		return
	}
	var cs *connState
	for _, c := range bp.cli.conns {
		if c.c.LocalAddr() == bp.srvConn.lastEP.Remote {
			cs = c
		}
	}
	if cs == nil {
		return
	}
	bp.handOne(in, cs, bp.srvConn.last, conn.Endpoint{Remote: srvAddr1}, now)
}

// handOne gives in a copy of datagram d as a read batch of one, arrived on cs.
func (bp *benchPair) handOne(in *inbound, cs *connState, d []byte, ep conn.Endpoint, now time.Time) {
	bp.one.pbs[0] = in.e.pool.get()
	bp.one.sizes[0] = copy(bp.one.pbs[0].b, d)
	bp.one.eps[0] = ep
	in.handleBatch(cs, bp.one.pbs[:], bp.one.sizes[:], bp.one.eps[:], now)
	if pb := bp.one.pbs[0]; pb != nil {
		in.e.pool.put(pb)
	}
}

// With a congestion controller the per-packet path stays allocation-free too:
// schedule with windows, seal, send, the server's acks back to the client, the
// controller's updates and the window-room queue.
func TestSendReceiveAllocsCongestion(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	bp := newBenchPairCC(t, 2, "lia")
	cin := &inbound{e: bp.cli, w: newBatchWriter(bp.cli)}
	now := time.Now()
	step := func() {
		now = now.Add(100 * time.Microsecond)
		w := bp.srvConn.writes
		bp.receive(bp.send(now), now)
		bp.ackBack(cin, w, now)
	}
	for i := 0; i < 4; i++ { // the server learns both paths
		step()
	}
	bp.validateServerPaths()
	for i := 0; i < 2000; i++ {
		step()
	}
	before := bp.srvTUN.written
	allocs := testing.AllocsPerRun(2000, step)
	if allocs != 0 {
		t.Fatalf("%.2f allocations per packet, want 0", allocs)
	}
	if got := bp.srvTUN.written - before; got < 1500 {
		t.Fatalf("only %d of 2000 packets delivered: the acks do not reach the controller", got)
	}
	// The acks reached the controller: both paths have RTT samples, so both are
	// coupled. (One packet per step never fills a window: the windows stay at
	// their initial size, as cwnd-limited gating wants.)
	if n := bp.cli.server.cc.ActivePaths(); n != 2 {
		t.Errorf("%d paths in the coupling set, want 2", n)
	}
}

func BenchmarkSendReceiveCongestion(b *testing.B) {
	bp := newBenchPairCC(b, 2, "lia")
	cin := &inbound{e: bp.cli, w: newBatchWriter(bp.cli)}
	now := time.Now()
	step := func() {
		now = now.Add(100 * time.Microsecond)
		w := bp.srvConn.writes
		bp.receive(bp.send(now), now)
		bp.ackBack(cin, w, now)
	}
	for i := 0; i < 4; i++ {
		step()
	}
	bp.validateServerPaths()
	for i := 0; i < 2000; i++ {
		step()
	}
	b.SetBytes(int64(len(bp.pkt)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		step()
	}
}

// batchPair is a benchPair moving whole batches: the client seals a TUN read's
// worth of packets of one flow under one hold of the peer's lock, the server
// opens and handles them as one socket read, both with workers crypto
// workers (fanout).
type batchPair struct {
	*benchPair
	pbs   []*packetBuf
	sizes []int
	eps   []conn.Endpoint
}

func newBatchPair(tb testing.TB, workers, n int) *batchPair {
	bp := newBenchPair(tb, 1)
	for _, e := range []*Engine{bp.cli, bp.srv} {
		e.crypto.Close()
		e.crypto = fanout.New(workers, DefaultTunables().CryptoMinPart)
	}
	tb.Cleanup(func() { bp.cli.crypto.Close(); bp.srv.crypto.Close() })
	bp.cliConn[0].record = true
	now := time.Now()
	for i := 0; i < 4; i++ { // the server learns the path
		bp.receive(bp.send(now), now)
	}
	bp.validateServerPaths()
	return &batchPair{benchPair: bp, pbs: make([]*packetBuf, n), sizes: make([]int, n), eps: make([]conn.Endpoint, n)}
}

// step moves one batch and returns how many datagrams the client sent.
func (bp *batchPair) step(now time.Time) int {
	e, p, c := bp.cli, bp.cli.server, bp.cliConn[0]
	c.sent = c.sent[:0]
	p.mu.Lock()
	p.refreshInfos(now)
	for range bp.pbs {
		pb := e.pool.get()
		n := copy(pb.b[wire.DataPrefixLen:], bp.pkt)
		pb.start, pb.end = wire.DataPrefixLen, wire.DataPrefixLen+n
		if !p.sendPacket(bp.cliW, pb, now) {
			e.pool.put(pb)
		}
	}
	bp.cliW.seal()
	p.mu.Unlock()
	bp.cliW.flush()
	n := min(len(c.sent), len(bp.pbs))
	for i, d := range c.sent[:n] {
		bp.pbs[i] = bp.srv.pool.get()
		bp.sizes[i] = copy(bp.pbs[i].b, d)
		bp.eps[i] = conn.Endpoint{Remote: c.addr}
	}
	writes := bp.srvConn.writes
	bp.in.handleBatch(bp.serverSock, bp.pbs[:n], bp.sizes[:n], bp.eps[:n], now)
	for i, pb := range bp.pbs[:n] {
		if pb != nil {
			bp.srv.pool.put(pb)
			bp.pbs[i] = nil
		}
	}
	bp.ackBack(bp.cliIn, writes, now) // releases the retained payloads
	return len(c.sent)
}

// Sealing and opening a batch on crypto workers changes nothing on the wire
// or at the far end: every packet arrives, in order, with nothing dropped,
// and the batch path allocates nothing.
func TestBatchCrypto(t *testing.T) {
	for _, workers := range []int{0, 1, 3} {
		bp := newBatchPair(t, workers, 32)
		now := time.Now()
		for range 8 {
			now = now.Add(time.Millisecond)
			bp.step(now)
		}
		before := bp.srvTUN.written
		for range 50 {
			now = now.Add(time.Millisecond)
			if sent := bp.step(now); sent != 32 {
				t.Fatalf("workers %d: the client sent %d datagrams of 32", workers, sent)
			}
			// On the wire in the order of their counters (and so of their
			// path sequence numbers, taken together under the lock).
			for i, d := range bp.cliConn[0].sent[1:] {
				h0, _ := wire.ParseDataHeader(bp.cliConn[0].sent[i])
				h1, _ := wire.ParseDataHeader(d)
				if h1.Counter != h0.Counter+1 {
					t.Fatalf("workers %d: counter %d sent after %d", workers, h1.Counter, h0.Counter)
				}
			}
		}
		if got := bp.srvTUN.written - before; got != 50*32 {
			t.Fatalf("workers %d: %d of %d packets reached the TUN", workers, got, 50*32)
		}
		for name, n := range bp.srv.Drops() {
			if n != 0 {
				t.Fatalf("workers %d: the server dropped %d datagrams as %s", workers, n, name)
			}
		}
		if raceEnabled {
			continue
		}
		if a := testing.AllocsPerRun(200, func() { now = now.Add(time.Millisecond); bp.step(now) }); a != 0 {
			t.Fatalf("workers %d: %.1f allocations per batch", workers, a)
		}
	}
}

func BenchmarkBatchCrypto(b *testing.B) {
	for _, workers := range []int{0, 1} {
		b.Run(fmt.Sprintf("workers%d", workers), func(b *testing.B) {
			bp := newBatchPair(b, workers, 32)
			now := time.Now()
			b.SetBytes(int64(32 * len(bp.pkt)))
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Millisecond)
				bp.step(now)
			}
		})
	}
}

func TestDefaultCryptoWorkers(t *testing.T) {
	for procs, want := range map[int]int{1: 0, 2: 0, 3: 2, 4: 3, 5: 4, 64: 4} {
		if got := DefaultCryptoWorkers(procs); got != want {
			t.Errorf("DefaultCryptoWorkers(%d) = %d, want %d", procs, got, want)
		}
	}
}
