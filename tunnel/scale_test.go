package tunnel

import (
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/braid-vpn/braid/conn"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/noise"
	"github.com/braid-vpn/braid/path"
	"github.com/braid-vpn/braid/wire"
)

// scaleRig is a server with many clients in session, driven synchronously as
// benchPair is: no goroutines, the test moves every datagram itself. Each client
// is a real client engine with two paths from addresses of its own, so the
// server's per-packet path (index, endpoint and inner-address lookups, open,
// reorder, TUN; route, schedule, seal, socket) is the real one.
type scaleRig struct {
	srv     *Engine
	srvKey  keys.Key
	srvConn *capConn
	srvTUN  *nullTUN
	in      *inbound // the server's outside path
	w       *writer  // the server's inside path
	route   lastLookup
	clients []*scaleClient
	now     time.Time
}

// scaleClient is one client engine of a scaleRig, with the server's peer for it.
type scaleClient struct {
	e     *Engine
	conns []*capConn
	w     *writer
	in    *inbound
	tun   *nullTUN
	srvP  *peer
	up    []byte // an inner packet to the server
	down  []byte // an inner packet from the server to it
	inner netip.Addr
}

// scaleAddr is client i's address on its path k (0 or 1): one /16 of the lab
// range per path, clear of the rig's server address.
func scaleAddr(i, k int) netip.Addr {
	n := 1024 + i
	return netip.AddrFrom4([4]byte{198, byte(18 + k), byte(n >> 8), byte(n)})
}

// scaleInner is client i's tunnel address.
func scaleInner(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{100, 65, byte(i >> 8), byte(i)})
}

// newScaleRig makes a server with n configured clients; none is in session yet
// (connect does that).
func newScaleRig(tb testing.TB, n int) (*scaleRig, []keys.Key) {
	tb.Helper()
	r := &scaleRig{srvKey: mustKey(tb), srvConn: newCapConn(srvAddr1), srvTUN: newNullTUN(), now: time.Now()}
	cks := make([]keys.Key, n)
	cps := make([]ClientPeer, n)
	for i := range cks {
		cks[i] = mustKey(tb)
		cps[i] = ClientPeer{Name: fmt.Sprintf("c%d", i), PublicKey: cks[i].Public(), AllowedIPs: []netip.Prefix{netip.PrefixFrom(scaleInner(i), 32)}}
	}
	var err error
	r.srv, err = New(Config{
		Role: Server, PrivateKey: r.srvKey, TUN: r.srvTUN, Logger: testLogger(nil),
		Listen:      func(conn.Options) (conn.Conn, error) { return r.srvConn, nil },
		ListenAddrs: []netip.AddrPort{srvAddr1},
		Clients:     cps,
		Tunables:    DefaultTunables(),
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.srv.Close() })
	r.in = &inbound{e: r.srv, w: newBatchWriter(r.srv)}
	r.w = newBatchWriter(r.srv)
	return r, cks
}

// connect brings client i (key k) into session with two paths the server has
// learnt and validated, and returns it. The keys come from a real handshake
// made with the noise package directly (the engines' handshake path, with its
// rate limits and cookies, is not what this rig measures).
func (r *scaleRig) connect(tb testing.TB, i int, k keys.Key) *scaleClient {
	tb.Helper()
	c := &scaleClient{tun: newNullTUN(), srvP: r.srv.peers[i], inner: scaleInner(i)}
	var err error
	c.e, err = New(Config{
		Role: Client, PrivateKey: k, TUN: c.tun, Logger: testLogger(nil),
		Listen: func(o conn.Options) (conn.Conn, error) {
			cc := newCapConn(netip.AddrPortFrom(o.Addr.Addr(), 40000))
			c.conns = append(c.conns, cc)
			return cc, nil
		},
		ServerPublicKey: r.srvKey.Public(), Servers: []netip.AddrPort{srvAddr1},
		LocalPaths: []LocalPath{{Addr: scaleAddr(i, 0)}, {Addr: scaleAddr(i, 1)}},
		Tunables:   DefaultTunables(),
	})
	if err != nil {
		tb.Fatal(err)
	}
	now := r.now
	msg, st, err := noise.CreateInitiation(k, r.srvKey.Public(), keys.Key{}, 1, nil, now)
	if err != nil {
		tb.Fatal(err)
	}
	idx := uint32(i + 2)
	resp := noise.NewResponder(r.srvKey, noise.ResponderConfig{})
	acc, err := resp.ConsumeInitiation(msg, scaleAddr(i, 0), func(keys.Key) (keys.Key, [12]byte, bool) { return keys.Key{}, [12]byte{}, true }, func() (uint32, bool) { return idx, true }, now)
	if err != nil {
		tb.Fatal(err)
	}
	ikp, _, err := st.ConsumeResponse(acc.Response, now)
	if err != nil {
		tb.Fatal(err)
	}
	cp := c.e.server
	cp.cur = ikp
	c.e.setIndex(ikp.LocalIndex, indexEntry{peer: cp, kp: ikp})
	sp := c.srvP
	sp.mu.Lock()
	sp.cur = acc.Keypair
	sp.estab, sp.everEstab = now, true
	sp.mu.Unlock()
	r.srv.idxMu.Lock()
	r.srv.setIndex(idx, indexEntry{peer: sp, kp: acc.Keypair})
	r.srv.idxMu.Unlock()
	c.w = newBatchWriter(c.e)
	c.in = &inbound{e: c.e, w: c.w}
	c.up = udp4(c.inner, inSrv, 4000, 5000, make([]byte, 1300))
	c.down = udp4(inSrv, c.inner, 5000, 4000, make([]byte, 1300))
	// Both paths measured on the client, so its scheduler uses them.
	for _, ps := range cp.paths {
		for k := 0; k < 3; k++ {
			seq := ps.sender.NextSeq()
			ps.sender.OnSent(seq, 1400, true, now)
			ps.sender.OnAck(path.Ack{Largest: seq, RxBytes: uint64(1400 * (k + 1)), OWDRaw: 1000}, now.Add(2*time.Millisecond))
		}
	}
	for range 8 { // the server learns both paths (and challenges them)
		r.up(c)
	}
	sp.mu.Lock()
	for _, ps := range sp.paths {
		if ps != nil {
			ps.validated = true
		}
	}
	sp.mu.Unlock()
	return c
}

// up sends c's inner packet through the client engine and the server's outside
// path to the server's TUN, and the server's answers (acks) back to the client.
func (r *scaleRig) up(c *scaleClient) {
	e := c.e
	p := e.server
	pb := e.pool.get()
	n := copy(pb.b[wire.DataPrefixLen:], c.up)
	pb.start, pb.end = wire.DataPrefixLen, wire.DataPrefixLen+n
	p.mu.Lock()
	p.refreshInfos(r.now)
	if !p.sendPacket(c.w, pb, r.now) {
		e.pool.put(pb)
	}
	c.w.seal()
	picked := len(p.picks) > 0
	var cs *capConn
	if picked {
		cs = c.conns[p.infoP[p.picks[0]].cs.idx]
	}
	p.mu.Unlock()
	c.w.flush()
	if cs == nil {
		return
	}
	writes := r.srvConn.writes
	r.hand(r.in, r.srv.conns[0], cs.last, conn.Endpoint{Remote: cs.addr})
	r.back(c, writes)
}

// down sends an inner packet for c through the server's inside path (route by
// inner address, schedule, seal, socket) to the client engine's outside path.
func (r *scaleRig) down(c *scaleClient) {
	e := r.srv
	pb := e.pool.get()
	n := copy(pb.b[wire.DataPrefixLen:], c.down)
	pb.start, pb.end = wire.DataPrefixLen, wire.DataPrefixLen+n
	writes := r.srvConn.writes
	p := e.routeOut(pb.b[pb.start:pb.end], &r.route)
	if p == nil {
		e.pool.put(pb)
		return
	}
	p.mu.Lock()
	p.refreshInfos(r.now)
	if !p.sendPacket(r.w, pb, r.now) {
		e.pool.put(pb)
	}
	r.w.seal()
	p.mu.Unlock()
	r.w.flush()
	r.back(c, writes)
}

// back hands c the server's last datagram if the server wrote since writes.
func (r *scaleRig) back(c *scaleClient, writes int) {
	if r.srvConn.writes == writes {
		return
	}
	for k, cs := range c.conns {
		if cs.addr == r.srvConn.lastEP.Remote {
			r.hand(c.in, c.e.conns[k], r.srvConn.last, conn.Endpoint{Remote: srvAddr1})
			return
		}
	}
}

// hand gives in a copy of datagram d as a read batch of one, arrived on cs.
func (r *scaleRig) hand(in *inbound, cs *connState, d []byte, ep conn.Endpoint) {
	pbs := [1]*packetBuf{in.e.pool.get()}
	sizes := [1]int{copy(pbs[0].b, d)}
	eps := [1]conn.Endpoint{ep}
	in.handleBatch(cs, pbs[:], sizes[:], eps[:], r.now)
	in.e.pool.put(pbs[0])
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// idleClientBytes builds a server with n clients, brings them into session
// with traffic both ways, lets them go idle (timer ticks past idleRelease),
// drops the client engines, and returns the server's heap per client: with
// the configured peers alone, and after the sessions.
func idleClientBytes(tb testing.TB, n int) (configured, idle float64) {
	base := heapInUse()
	r, cks := newScaleRig(tb, n)
	afterCfg := heapInUse()
	for i := range n {
		c := r.connect(tb, i, cks[i])
		for range 16 {
			r.up(c)
			r.down(c)
		}
	}
	r.now = r.now.Add(2 * idleRelease)
	r.tickAll()
	r.now = r.now.Add(2 * idleRelease)
	r.tickAll()
	afterIdle := heapInUse()
	if f := os.Getenv("BRAID_HEAPPROFILE"); f != "" {
		writeHeapProfile(tb, f)
	}
	runtime.KeepAlive(r)
	return float64(afterCfg-base) / float64(n), float64(afterIdle-base) / float64(n)
}

// tickAll runs one timer step for every server peer.
func (r *scaleRig) tickAll() {
	w := &writer{e: r.srv}
	var toTUN []*packetBuf
	for _, p := range r.srv.peers {
		p.mu.Lock()
		toTUN = p.tick(r.now, w, toTUN[:0])
		p.writeLocked(toTUN)
		p.mu.Unlock()
		w.flush()
	}
}

// TestIdleClientMemory reports (-v) the server's heap per configured client and
// per idle client in session.
func TestIdleClientMemory(t *testing.T) {
	cfg, idle := idleClientBytes(t, 200)
	t.Logf("server heap per client: configured %.1f KiB, idle in session %.1f KiB", cfg/1024, idle/1024)
}

// writeHeapProfile writes the live heap to file f (BRAID_HEAPPROFILE: where an
// idle client's bytes go).
func writeHeapProfile(tb testing.TB, f string) {
	out, err := os.Create(f)
	if err != nil {
		tb.Fatal(err)
	}
	defer out.Close()
	if err := pprof.Lookup("heap").WriteTo(out, 0); err != nil {
		tb.Fatal(err)
	}
}
