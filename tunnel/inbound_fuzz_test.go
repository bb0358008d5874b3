package tunnel

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/braid-vpn/braid/wire"
)

// FuzzEngineInbound feeds whole datagrams to a running server engine over the
// in-memory network: as they come (any type, any length), or, with seal set, as the
// plaintext of a transport message sealed under client A's current keys, so that the
// fuzzer reaches the inner header and every frame parser behind the AEAD, as a
// malicious client could. The engine must neither crash nor let client A's inputs
// harm another client: every 256 inputs a packet from client B must still cross the
// tunnel. (Client A can harm its own session with what it seals — lie about its
// sequence numbers, acks or flows, or CLOSE it — and that is not checked.)
func FuzzEngineInbound(f *testing.F) {
	var frames []byte
	frames = wire.AppendPing(frames)
	frames = wire.AppendChallenge(frames, [wire.ChallengeLen]byte{1}, false)
	frames = wire.AppendGiveUp(frames, 3, 9)
	frames = wire.AppendData(frames, 1, 2, udp4(inCliA, inSrv, 1, 2, []byte("x")))
	inner := make([]byte, wire.InnerHeaderLen)
	wire.PutInnerHeader(inner, wire.InnerHeader{Seq: 7, Path: 0, Flags: wire.FlagAckEliciting})
	f.Add(append(inner, frames...), true)
	f.Add(append(inner, wire.FrameAck, 0, 0), true)
	f.Add(append(inner, wire.FrameRepair, 0xff, 0xff, 0xff), true)
	f.Add([]byte{wire.TypeHandshakeInit, 0, 0, 0, 1, 2, 3, 4}, false)
	f.Add(make([]byte, wire.MinInitLen), false)
	f.Add([]byte{wire.TypeCookieReply}, false)
	f.Add([]byte{wire.TypeData, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, false)

	var once sync.Once
	var r *rig
	var n int
	from := netip.AddrPortFrom(cliAddr1, 40000)
	f.Fuzz(func(t *testing.T, b []byte, seal bool) {
		once.Do(func() {
			// One rig for the whole run: a rig per input would test start-up.
			r = newRig(&testing.T{}, rigOpts{clientB: true})
			waitUsable(t, r.srv, "a", 2)
			waitUsable(t, r.srv, "b", 1)
		})
		d := b
		if seal && len(b) >= wire.InnerHeaderLen && len(b) < 1400 {
			p := r.cliA.server
			p.mu.Lock()
			kp := p.cur
			p.mu.Unlock()
			if kp == nil {
				return
			}
			buf := make([]byte, wire.DataHeaderLen, wire.DataOverhead+len(b))
			buf = append(buf, b...)
			var err error
			if d, err = kp.Seal(buf, len(b)); err != nil {
				return
			}
		}
		r.net.Inject(from, srvAddr1, d)
		if n++; n%256 == 0 {
			r.cliBTun.Inject(udp4(inCliB, inSrv, 4000, 5000, []byte("alive")))
			deadline := time.After(5 * time.Second)
			for {
				select {
				case pkt := <-r.srvTun.Outbound():
					if len(pkt) > 28 && string(pkt[28:]) == "alive" {
						return
					}
				case <-deadline:
					t.Fatalf("the tunnel stopped carrying packets\nserver %+v\ndrops %v\nclient %+v\ndrops %v", r.srv.Status().Peers, r.srv.Drops(), r.cliA.Status().Peers, r.cliA.Drops())
				}
			}
		}
	})
}
