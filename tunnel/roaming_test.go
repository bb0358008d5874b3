package tunnel

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// natRebind makes the network between client address cli and the server look like
// a NAT that has just given the client's flow a new public port: the server sees
// the client's datagrams from port pub, and what it sends to pub reaches the
// client's real socket. The old mapping is gone: what the server still sends to
// the client's old endpoint is lost (the server challenges that endpoint when the
// new one appears, and would keep the path there if it answered).
func (r *rig) natRebind(cli, srv netip.Addr, pub uint16) {
	var real atomic.Value // the client's real source port, learnt from its traffic
	r.net.SetFilter(func(from, to netip.AddrPort, b []byte) bool {
		switch {
		case from.Addr() == cli && to.Addr() == srv:
			real.Store(from)
			r.net.Inject(netip.AddrPortFrom(cli, pub), to, append([]byte(nil), b...))
			return false
		case from.Addr() == srv && to == netip.AddrPortFrom(cli, pub):
			if rp, ok := real.Load().(netip.AddrPort); ok {
				r.net.Inject(from, rp, append([]byte(nil), b...))
			}
			return false
		case from.Addr() == srv && to.Addr() == cli:
			return false
		}
		return true
	})
}

// A client behind a NAT whose mapping changes (new source port) keeps its session:
// no new handshake, the download goes on with a short gap at most, and the server
// moves the path to the new endpoint with its state instead of starting a new one.
func TestEngineNATRebinding(t *testing.T) {
	r := newRig(t, rigOpts{})
	waitUsable(t, r.cliA, "server", 2)
	waitUsable(t, r.srv, "a", 2)
	p := r.srv.byKey[r.cfgA.PrivateKey.Public()]
	p.mu.Lock()
	kp := p.cur
	oldID := -1
	for _, ps := range p.paths {
		if ps != nil && ps.ep.Remote.Addr() == cliAddr1 {
			oldID = int(ps.id)
		}
	}
	p.mu.Unlock()

	// Server → client stream, one packet per ms; record the longest gap.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			r.srvTun.Inject(udp4(inSrv, inCliA, 5000, 4000, fmt.Appendf(nil, "%d", i)))
		}
	}()
	var last atomic.Int64
	var worst atomic.Int64
	go func() {
		for range r.cliATun.Outbound() {
			now := time.Now().UnixNano()
			if l := last.Swap(now); l != 0 && now-l > worst.Load() {
				worst.Store(now - l)
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	worst.Store(0)
	r.natRebind(cliAddr1, srvAddr1.Addr(), 61000)
	time.Sleep(1500 * time.Millisecond)

	p.mu.Lock()
	sameKeys := p.cur == kp
	newID, n := -1, 0
	for _, ps := range p.paths {
		if ps == nil {
			continue
		}
		n++
		if ps.validated && ps.ep.Remote.Port() == 61000 {
			newID = int(ps.id)
		}
	}
	p.mu.Unlock()
	gap := time.Duration(worst.Load())
	t.Logf("after the rebinding: longest gap %v; the path to the new endpoint is id %d (was %d); the server has %d paths; same keys %v", gap.Round(time.Millisecond), newID, oldID, n, sameKeys)
	if !sameKeys {
		t.Error("the rebinding caused a new handshake")
	}
	if newID < 0 {
		t.Fatal("no validated path to the new endpoint")
	}
	if newID != oldID || n != 2 {
		t.Errorf("the path did not move: new id %d (old %d), %d paths", newID, oldID, n)
	}
	for _, pp := range r.srv.Status().Peers {
		for _, pa := range pp.Paths {
			if pa.ID == newID && pa.State != "active" && pa.State != "degraded" {
				t.Errorf("the moved path is %s", pa.State)
			}
		}
	}
}
