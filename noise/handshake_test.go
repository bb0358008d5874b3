package noise

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"

	fnoise "github.com/flynn/noise"
	"golang.org/x/crypto/blake2s"

	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/wire"
)

func TestTAI64N(t *testing.T) {
	cases := []struct {
		t    time.Time
		want string
	}{
		// 2^62 + 10 s TAI offset, 0 ns.
		{time.Unix(0, 0), "\x40\x00\x00\x00\x00\x00\x00\x0a\x00\x00\x00\x00"},
		// 1 s after the epoch and 999999999 ns = 0x3b9ac9ff.
		{time.Unix(1, 999999999), "\x40\x00\x00\x00\x00\x00\x00\x0b\x3b\x9a\xc9\xff"},
		// 2^32 s: the fifth byte counts.
		{time.Unix(1<<32, 256), "\x40\x00\x00\x01\x00\x00\x00\x0a\x00\x00\x01\x00"},
	}
	for _, c := range cases {
		got := TAI64N(c.t)
		if string(got[:]) != c.want {
			t.Errorf("TAI64N(%v) = %x, want %x", c.t, got, c.want)
		}
	}
	a, b := TAI64N(t0), TAI64N(t0.Add(time.Nanosecond))
	if bytes.Compare(a[:], b[:]) >= 0 {
		t.Error("a later time does not compare greater")
	}
}

func TestHandshakeBothWays(t *testing.T) {
	alice, bob := fixedKey(1), fixedKey(2)
	psk := fixedKey(9)
	for _, dir := range []struct {
		name     string
		cli, srv keys.Key
	}{{"alice→bob", alice, bob}, {"bob→alice", bob, alice}} {
		t.Run(dir.name, func(t *testing.T) {
			params := []byte{wire.ParamScheduler, 3, 'm', 'i', 'n'}
			ikp, rkp, acc := handshake(t, dir.cli, dir.srv, psk, params, t0)
			if acc.PeerPublic != dir.cli.Public() {
				t.Errorf("PeerPublic = %v, want %v", acc.PeerPublic, dir.cli.Public())
			}
			if acc.Timestamp != TAI64N(t0) {
				t.Errorf("Timestamp = %x, want %x", acc.Timestamp, TAI64N(t0))
			}
			if !bytes.Equal(acc.Payload, params) {
				t.Errorf("Payload = %x, want %x", acc.Payload, params)
			}
			if acc.RemoteIndex != idxCli {
				t.Errorf("RemoteIndex = %#x, want %#x", acc.RemoteIndex, idxCli)
			}
			if ikp.LocalIndex != idxCli || ikp.RemoteIndex != idxSrv || !ikp.Initiator {
				t.Errorf("initiator keypair %#x/%#x/%v", ikp.LocalIndex, ikp.RemoteIndex, ikp.Initiator)
			}
			if rkp.LocalIndex != idxSrv || rkp.RemoteIndex != idxCli || rkp.Initiator {
				t.Errorf("responder keypair %#x/%#x/%v", rkp.LocalIndex, rkp.RemoteIndex, rkp.Initiator)
			}
			if !ikp.Created.Equal(t0) || !rkp.Created.Equal(t0) {
				t.Error("Created is not the handshake time")
			}
			mustOpen(t, rkp, sealString(t, ikp, "to responder"), "to responder")
			mustOpen(t, ikp, sealString(t, rkp, "to initiator"), "to initiator")
		})
	}
}

func TestHandshakeZeroPSKAndEmptyPayload(t *testing.T) {
	ikp, rkp, acc := handshake(t, fixedKey(3), fixedKey(4), noPSK, nil, t0)
	if len(acc.Payload) != 0 {
		t.Fatalf("payload %x, want empty", acc.Payload)
	}
	mustOpen(t, rkp, sealString(t, ikp, "x"), "x")
}

// The two directions must use different keys: a datagram sealed by the initiator
// must not open at the initiator itself (which would be the case with one shared
// key and the same counter).
func TestDirectionalKeys(t *testing.T) {
	ikp, rkp, _ := handshake(t, fixedKey(1), fixedKey(2), noPSK, nil, t0)
	d := sealString(t, ikp, "reflected")
	// Make the reflected datagram carry the initiator's own receiver index, so only
	// the key can reject it.
	binary.BigEndian.PutUint32(d[4:], ikp.LocalIndex)
	if _, _, err := ikp.Open(bytes.Clone(d)); !errors.Is(err, ErrAuth) {
		t.Fatalf("reflected datagram: err = %v, want ErrAuth", err)
	}
	d = sealString(t, rkp, "reflected")
	binary.BigEndian.PutUint32(d[4:], rkp.LocalIndex)
	if _, _, err := rkp.Open(d); !errors.Is(err, ErrAuth) {
		t.Fatalf("reflected datagram: err = %v, want ErrAuth", err)
	}
}

func TestMessageLayout(t *testing.T) {
	cli, srv := fixedKey(1), fixedKey(2)
	params := []byte("0123456789")
	msg1, st, err := CreateInitiation(cli, srv.Public(), noPSK, idxCli, params, t0)
	if err != nil {
		t.Fatal(err)
	}
	if want := wire.MinInitLen + wire.TimestampLen + len(params); len(msg1) != want {
		t.Fatalf("len(msg1) = %d, want %d", len(msg1), want)
	}
	if msg1[0] != wire.TypeHandshakeInit || msg1[1]|msg1[2]|msg1[3] != 0 || binary.BigEndian.Uint32(msg1[4:]) != idxCli {
		t.Fatalf("msg1 header % x", msg1[:8])
	}
	// mac1 computed independently: BLAKE2s-128 keyed with BLAKE2s-256("braid mac1" || pub).
	// The initiation ends in mac1 then mac2, zero without a cookie.
	checkMAC := func(msg []byte, pub keys.Key) {
		t.Helper()
		key := blake2s.Sum256(append([]byte("braid mac1"), pub[:]...))
		h, _ := blake2s.New128(key[:])
		h.Write(msg[:len(msg)-16])
		if !bytes.Equal(h.Sum(nil), msg[len(msg)-16:]) {
			t.Fatal("mac1 does not match its definition")
		}
	}
	checkMAC(msg1[:len(msg1)-16], srv.Public())
	if !bytes.Equal(msg1[len(msg1)-16:], make([]byte, 16)) {
		t.Fatal("mac2 is not zero without a cookie")
	}

	// A plain flynn/noise responder configured per the protocol text must read the
	// Noise part at offset 8 and find the timestamp and payload.
	hs, err := fnoise.NewHandshakeState(fnoise.Config{
		CipherSuite:           fnoise.NewCipherSuite(fnoise.DH25519, fnoise.CipherChaChaPoly, fnoise.HashBLAKE2s),
		Pattern:               fnoise.HandshakeIK,
		Prologue:              []byte("braid v1"),
		PresharedKeyPlacement: 2,
		StaticKeypair:         fnoise.DHKey{Private: bytes.Clone(srv[:]), Public: func() []byte { p := srv.Public(); return p[:] }()},
	})
	if err != nil {
		t.Fatal(err)
	}
	pl, _, _, err := hs.ReadMessage(nil, msg1[8:len(msg1)-32])
	if err != nil {
		t.Fatalf("reference responder: %v", err)
	}
	ts := TAI64N(t0)
	if !bytes.Equal(pl, append(ts[:], params...)) {
		t.Fatalf("reference responder payload %x", pl)
	}
	if pub := cli.Public(); !bytes.Equal(hs.PeerStatic(), pub[:]) {
		t.Fatal("reference responder sees another static key")
	}

	r := NewResponder(srv, ResponderConfig{})
	ps := newPeers()
	ps.add(cli.Public(), noPSK)
	acc, err := r.ConsumeInitiation(msg1, srcA, ps.lookup, fixedIndex(idxSrv), t0)
	if err != nil {
		t.Fatal(err)
	}
	msg2 := acc.Response
	if len(msg2) != wire.MinRespLen {
		t.Fatalf("len(msg2) = %d, want %d", len(msg2), wire.MinRespLen)
	}
	if msg2[0] != wire.TypeHandshakeResp || msg2[1]|msg2[2]|msg2[3] != 0 ||
		binary.BigEndian.Uint32(msg2[4:]) != idxSrv || binary.BigEndian.Uint32(msg2[8:]) != idxCli {
		t.Fatalf("msg2 header % x", msg2[:12])
	}
	checkMAC(msg2, cli.Public())
	if _, _, err := st.ConsumeResponse(msg2, t0); err != nil {
		t.Fatal(err)
	}
}

func TestWrongPSK(t *testing.T) {
	cli, srv := fixedKey(1), fixedKey(2)
	for _, c := range []struct{ ini, resp keys.Key }{
		{fixedKey(7), fixedKey(8)},
		{noPSK, fixedKey(8)},
		{fixedKey(7), noPSK},
	} {
		msg1, st, err := CreateInitiation(cli, srv.Public(), c.ini, idxCli, nil, t0)
		if err != nil {
			t.Fatal(err)
		}
		ps := newPeers()
		ps.add(cli.Public(), c.resp)
		// psk2 mixes the psk into message 2 only, so the responder cannot notice.
		acc, err := NewResponder(srv, ResponderConfig{}).ConsumeInitiation(msg1, srcA, ps.lookup, fixedIndex(idxSrv), t0)
		if err != nil {
			t.Fatalf("ConsumeInitiation: %v", err)
		}
		if _, _, err := st.ConsumeResponse(acc.Response, t0); !errors.Is(err, ErrDecrypt) {
			t.Fatalf("psk %x vs %x: err = %v, want ErrDecrypt", c.ini[:2], c.resp[:2], err)
		}
		if acc.Keypair.Confirmed() {
			t.Fatal("responder keypair confirmed without a transport message")
		}
	}
}

func TestWrongServerKeyFailsMAC1(t *testing.T) {
	cli, srv, other := fixedKey(1), fixedKey(2), fixedKey(3)
	msg1, _, err := CreateInitiation(cli, other.Public(), noPSK, idxCli, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	ps := newPeers()
	ps.add(cli.Public(), noPSK)
	called := false
	lookup := func(pub keys.Key) (keys.Key, [12]byte, bool) { called = true; return ps.lookup(pub) }
	if _, err := NewResponder(srv, ResponderConfig{}).ConsumeInitiation(msg1, srcA, lookup, fixedIndex(idxSrv), t0); !errors.Is(err, ErrMAC) {
		t.Fatalf("err = %v, want ErrMAC", err)
	}
	if called {
		t.Fatal("lookup called before mac1 passed")
	}
}

func TestMAC1CoversWholeMessage(t *testing.T) {
	cli, srv := fixedKey(1), fixedKey(2)
	msg1, _, _ := CreateInitiation(cli, srv.Public(), noPSK, idxCli, nil, t0)
	r := NewResponder(srv, ResponderConfig{})
	ps := newPeers()
	ps.add(cli.Public(), noPSK)
	// Bytes 1-3 are reserved and checked first; mac2 (the last 16) is the caller's.
	for i := 4; i < len(msg1)-wire.MACLen; i++ {
		m := bytes.Clone(msg1)
		m[i] ^= 0x01
		if _, err := r.ConsumeInitiation(m, srcA, ps.lookup, fixedIndex(idxSrv), t0); !errors.Is(err, ErrMAC) {
			t.Fatalf("flipping byte %d: err = %v, want ErrMAC", i, err)
		}
	}
}

func TestUnknownPeer(t *testing.T) {
	cli, srv := fixedKey(1), fixedKey(2)
	msg1, _, _ := CreateInitiation(cli, srv.Public(), noPSK, idxCli, nil, t0)
	ps := newPeers()
	ps.add(fixedKey(5).Public(), noPSK) // someone else
	var asked keys.Key
	lookup := func(pub keys.Key) (keys.Key, [12]byte, bool) { asked = pub; return ps.lookup(pub) }
	if _, err := NewResponder(srv, ResponderConfig{}).ConsumeInitiation(msg1, srcA, lookup, fixedIndex(idxSrv), t0); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("err = %v, want ErrUnknownPeer", err)
	}
	if asked != cli.Public() {
		t.Fatal("lookup was not asked about the initiator's static key")
	}
}

func TestReplayedInitiation(t *testing.T) {
	cli, srv := fixedKey(1), fixedKey(2)
	r := NewResponder(srv, ResponderConfig{})
	ps := newPeers()
	ps.add(cli.Public(), noPSK)

	msg1, _, _ := CreateInitiation(cli, srv.Public(), noPSK, idxCli, nil, t0)
	acc, err := r.ConsumeInitiation(msg1, srcA, ps.lookup, fixedIndex(idxSrv), t0)
	if err != nil {
		t.Fatal(err)
	}
	ps.accept(acc)
	// The very same datagram again, even much later.
	if _, err := r.ConsumeInitiation(msg1, srcA, ps.lookup, fixedIndex(idxSrv), t0.Add(time.Minute)); !errors.Is(err, ErrReplayedInitiation) {
		t.Fatalf("replay: err = %v, want ErrReplayedInitiation", err)
	}
	// An initiation created earlier but delivered later (recorded by an attacker).
	old, _, _ := CreateInitiation(cli, srv.Public(), noPSK, idxCli, nil, t0.Add(-time.Second))
	if _, err := r.ConsumeInitiation(old, srcA, ps.lookup, fixedIndex(idxSrv), t0); !errors.Is(err, ErrReplayedInitiation) {
		t.Fatalf("older timestamp: err = %v, want ErrReplayedInitiation", err)
	}
	// A fresh one, one nanosecond newer, is fine.
	next, _, _ := CreateInitiation(cli, srv.Public(), noPSK, idxCli, nil, t0.Add(time.Nanosecond))
	if _, err := r.ConsumeInitiation(next, srcA, ps.lookup, fixedIndex(idxSrv), t0); err != nil {
		t.Fatalf("newer initiation: %v", err)
	}
}

func TestForgedResponseThenGenuine(t *testing.T) {
	cli, srv := fixedKey(1), fixedKey(2)
	msg1, st, _ := CreateInitiation(cli, srv.Public(), noPSK, idxCli, nil, t0)
	ps := newPeers()
	ps.add(cli.Public(), noPSK)
	acc, err := NewResponder(srv, ResponderConfig{}).ConsumeInitiation(msg1, srcA, ps.lookup, fixedIndex(idxSrv), t0)
	if err != nil {
		t.Fatal(err)
	}
	macKey := mac1Key(cli.Public())
	forge := func(e []byte) []byte {
		m := make([]byte, wire.RespHeaderLen, wire.MinRespLen)
		m[0] = wire.TypeHandshakeResp
		binary.BigEndian.PutUint32(m[4:], 99)
		binary.BigEndian.PutUint32(m[8:], idxCli)
		m = append(m, e...)
		m = append(m, make([]byte, 16)...) // bogus AEAD tag
		return appendMAC1(&macKey, m)
	}
	// An all-zero ephemeral is a low-order point: flynn/noise fails inside the
	// Diffie-Hellman without rolling its state back.
	if _, _, err := st.ConsumeResponse(forge(make([]byte, 32)), t0); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("low-order forged response: err = %v, want ErrDecrypt", err)
	}
	// A forged response with a valid point fails at the AEAD.
	e := fixedKey(6).Public()
	if _, _, err := st.ConsumeResponse(forge(e[:]), t0); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("forged response: err = %v, want ErrDecrypt", err)
	}
	ikp, _, err := st.ConsumeResponse(acc.Response, t0)
	if err != nil {
		t.Fatalf("genuine response after forgeries: %v", err)
	}
	mustOpen(t, acc.Keypair, sealString(t, ikp, "ok"), "ok")
	if _, _, err := st.ConsumeResponse(acc.Response, t0); !errors.Is(err, ErrInitiationUsed) {
		t.Fatalf("second response: err = %v, want ErrInitiationUsed", err)
	}
}

func TestResponseChecks(t *testing.T) {
	cli, srv := fixedKey(1), fixedKey(2)
	msg1, st, _ := CreateInitiation(cli, srv.Public(), noPSK, idxCli, nil, t0)
	ps := newPeers()
	ps.add(cli.Public(), noPSK)
	acc, _ := NewResponder(srv, ResponderConfig{}).ConsumeInitiation(msg1, srcA, ps.lookup, fixedIndex(idxSrv), t0)
	resp := acc.Response

	wrongIdx := bytes.Clone(resp)
	binary.BigEndian.PutUint32(wrongIdx[8:], idxCli+1)
	if _, _, err := st.ConsumeResponse(wrongIdx, t0); !errors.Is(err, ErrMalformed) {
		t.Errorf("wrong receiver index: err = %v, want ErrMalformed", err)
	}
	rsvd := bytes.Clone(resp)
	rsvd[2] = 1
	if _, _, err := st.ConsumeResponse(rsvd, t0); !errors.Is(err, ErrMalformed) {
		t.Errorf("reserved bits: err = %v, want ErrMalformed", err)
	}
	badMAC := bytes.Clone(resp)
	badMAC[len(badMAC)-1] ^= 0x80
	if _, _, err := st.ConsumeResponse(badMAC, t0); !errors.Is(err, ErrMAC) {
		t.Errorf("bad mac1: err = %v, want ErrMAC", err)
	}
	for n := 0; n < len(resp); n++ {
		if _, _, err := st.ConsumeResponse(resp[:n], t0); err == nil {
			t.Fatalf("response truncated to %d accepted", n)
		}
	}
	if _, _, err := st.ConsumeResponse(resp, t0); err != nil {
		t.Fatalf("genuine response after rejects: %v", err)
	}
}

func TestInitiationTruncatedAndOversized(t *testing.T) {
	cli, srv := fixedKey(1), fixedKey(2)
	msg1, _, _ := CreateInitiation(cli, srv.Public(), noPSK, idxCli, []byte("abc"), t0)
	r := NewResponder(srv, ResponderConfig{})
	ps := newPeers()
	ps.add(cli.Public(), noPSK)
	for n := 0; n < len(msg1); n++ {
		if _, err := r.ConsumeInitiation(msg1[:n], srcA, ps.lookup, fixedIndex(idxSrv), t0); err == nil {
			t.Fatalf("initiation truncated to %d accepted", n)
		}
	}
	big := append(bytes.Clone(msg1), make([]byte, wire.MaxInitLen)...)
	if _, err := r.ConsumeInitiation(big, srcA, ps.lookup, fixedIndex(idxSrv), t0); !errors.Is(err, ErrMalformed) {
		t.Fatalf("oversized: err = %v, want ErrMalformed", err)
	}
	if _, err := r.ConsumeInitiation(msg1, srcA, ps.lookup, fixedIndex(idxSrv), t0); err != nil {
		t.Fatalf("genuine initiation: %v", err)
	}
}

func TestPayloadLimit(t *testing.T) {
	cli, srv := fixedKey(1), fixedKey(2)
	max := wire.MaxHandshakePayload - wire.TimestampLen
	msg1, _, err := CreateInitiation(cli, srv.Public(), noPSK, idxCli, make([]byte, max), t0)
	if err != nil {
		t.Fatalf("payload of %d: %v", max, err)
	}
	if len(msg1) != wire.MaxInitLen {
		t.Fatalf("largest initiation is %d bytes, want wire.MaxInitLen = %d", len(msg1), wire.MaxInitLen)
	}
	if _, _, err := CreateInitiation(cli, srv.Public(), noPSK, idxCli, make([]byte, max+1), t0); !errors.Is(err, ErrPayloadTooLong) {
		t.Fatalf("payload of %d: err = %v, want ErrPayloadTooLong", max+1, err)
	}
}

func TestPeek(t *testing.T) {
	cli, srv := fixedKey(1), fixedKey(2)
	msg1, _, _ := CreateInitiation(cli, srv.Public(), noPSK, idxCli, nil, t0)
	if s, ok := PeekInitiationSender(msg1); !ok || s != idxCli {
		t.Fatalf("PeekInitiationSender = %#x,%v", s, ok)
	}
	if _, ok := PeekInitiationSender(msg1[:wire.MinInitLen-1]); ok {
		t.Fatal("PeekInitiationSender accepts a short message")
	}
	ps := newPeers()
	ps.add(cli.Public(), noPSK)
	acc, _ := NewResponder(srv, ResponderConfig{}).ConsumeInitiation(msg1, srcA, ps.lookup, fixedIndex(idxSrv), t0)
	if s, r, ok := PeekResponseIndices(acc.Response); !ok || s != idxSrv || r != idxCli {
		t.Fatalf("PeekResponseIndices = %#x,%#x,%v", s, r, ok)
	}
	if _, _, ok := PeekResponseIndices(msg1); ok {
		t.Fatal("PeekResponseIndices accepts an initiation")
	}
	if _, ok := PeekInitiationSender(acc.Response); ok {
		t.Fatal("PeekInitiationSender accepts a response")
	}
}

// garbageInit is a message 1 with a valid mac1 and a Noise body that fails: it
// reaches the rate limiter but costs the test no real handshake.
func garbageInit(srvPub keys.Key) []byte {
	m := make([]byte, wire.MinInitLen+wire.TimestampLen-2*wire.MACLen)
	m[0] = wire.TypeHandshakeInit
	e := fixedKey(42).Public()
	copy(m[wire.InitHeaderLen:], e[:])
	k := mac1Key(srvPub)
	return append(appendMAC1(&k, m), make([]byte, wire.MACLen)...)
}

func TestRateLimiter(t *testing.T) {
	srv := fixedKey(2)
	r := NewResponder(srv, ResponderConfig{RatePerSecond: 20, Burst: 5})
	g := garbageInit(srv.Public())
	none := func(keys.Key) (keys.Key, [12]byte, bool) { return keys.Key{}, [12]byte{}, false }
	try := func(src netip.Addr, now time.Time) error {
		_, err := r.ConsumeInitiation(g, src, none, fixedIndex(idxSrv), now)
		return err
	}
	for i := 0; i < 5; i++ {
		if err := try(srcA, t0); !errors.Is(err, ErrDecrypt) {
			t.Fatalf("initiation %d of the burst: err = %v, want ErrDecrypt", i, err)
		}
	}
	if err := try(srcA, t0); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("6th initiation: err = %v, want ErrRateLimited", err)
	}
	if err := try(srcB, t0); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("other source: err = %v, want ErrDecrypt", err)
	}
	// 20/s refills one token every 50 ms.
	if err := try(srcA, t0.Add(49*time.Millisecond)); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("after 49 ms: err = %v, want ErrRateLimited", err)
	}
	if err := try(srcA, t0.Add(50*time.Millisecond)); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("after 50 ms: err = %v, want ErrDecrypt", err)
	}
	if err := try(srcA, t0.Add(50*time.Millisecond)); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("second after 50 ms: err = %v, want ErrRateLimited", err)
	}
	// Junk without a valid mac1 neither consumes tokens nor creates entries.
	before := r.lim.len()
	junk := bytes.Clone(g)
	junk[len(junk)-wire.MACLen-1] ^= 1 // in mac1
	for i := 0; i < 100; i++ {
		if _, err := r.ConsumeInitiation(junk, netip.AddrFrom4([4]byte{198, 18, 9, byte(i)}), none, fixedIndex(idxSrv), t0); !errors.Is(err, ErrMAC) {
			t.Fatalf("junk: err = %v, want ErrMAC", err)
		}
	}
	if r.lim.len() != before {
		t.Fatalf("junk created limiter entries: %d → %d", before, r.lim.len())
	}
}

func TestRateLimitUnlimited(t *testing.T) {
	srv := fixedKey(2)
	r := NewResponder(srv, ResponderConfig{}) // RatePerSecond 0: no limit
	g := garbageInit(srv.Public())
	none := func(keys.Key) (keys.Key, [12]byte, bool) { return keys.Key{}, [12]byte{}, false }
	for i := 0; i < 50; i++ {
		if _, err := r.ConsumeInitiation(g, srcA, none, fixedIndex(idxSrv), t0); !errors.Is(err, ErrDecrypt) {
			t.Fatalf("initiation %d: err = %v, want ErrDecrypt", i, err)
		}
	}
}

// The responder's payload hook sees the authenticated initiator and its payload, and
// what it returns reaches the initiator encrypted.
func TestResponsePayload(t *testing.T) {
	cli, srv := fixedKey(1), fixedKey(2)
	var sawPeer keys.Key
	var sawInit []byte
	r := NewResponder(srv, ResponderConfig{ResponsePayload: func(peer keys.Key, init []byte) []byte {
		sawPeer, sawInit = peer, bytes.Clone(init)
		return []byte("fresh")
	}})
	msg, st, err := CreateInitiation(cli, srv.Public(), keys.Key{}, 7, []byte("hello"), t0)
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(keys.Key) (keys.Key, [12]byte, bool) { return keys.Key{}, [12]byte{}, true }
	acc, err := r.ConsumeInitiation(msg, netip.MustParseAddr("198.18.0.1"), lookup, fixedIndex(9), t0)
	if err != nil {
		t.Fatal(err)
	}
	if sawPeer != cli.Public() || string(sawInit) != "hello" {
		t.Fatalf("hook saw %v %q", sawPeer, sawInit)
	}
	_, payload, err := st.ConsumeResponse(acc.Response, t0)
	if err != nil {
		t.Fatal(err)
	}
	if string(payload) != "fresh" {
		t.Fatalf("response payload %q", payload)
	}
	// Too long a payload is refused rather than sent.
	r = NewResponder(srv, ResponderConfig{ResponsePayload: func(keys.Key, []byte) []byte { return make([]byte, wire.MaxHandshakePayload+1) }})
	msg, _, _ = CreateInitiation(cli, srv.Public(), keys.Key{}, 7, nil, t0.Add(time.Second))
	if _, err := r.ConsumeInitiation(msg, netip.MustParseAddr("198.18.0.1"), lookup, fixedIndex(9), t0); !errors.Is(err, ErrPayloadTooLong) {
		t.Fatalf("err = %v, want ErrPayloadTooLong", err)
	}
}
