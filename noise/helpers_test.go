package noise

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/wire"
)

var (
	t0     = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	srcA   = netip.MustParseAddr("198.18.1.1")
	srcB   = netip.MustParseAddr("198.18.2.1")
	noPSK  keys.Key
	idxCli = uint32(0x11223344)
	idxSrv = uint32(0xa0b0c0d0)
)

// fixedKey returns a deterministic private key (tests must not depend on luck).
func fixedKey(seed byte) keys.Key {
	var k keys.Key
	for i := range k {
		k[i] = seed + byte(i)*7
	}
	return k
}

// peers answers lookups for a fixed set of clients, recording accepted
// timestamps the way a server must.
type peers struct {
	psk  map[keys.Key]keys.Key
	last map[keys.Key][12]byte
}

func newPeers() *peers {
	return &peers{psk: map[keys.Key]keys.Key{}, last: map[keys.Key][12]byte{}}
}

func (p *peers) add(pub, psk keys.Key) { p.psk[pub] = psk }

func (p *peers) lookup(pub keys.Key) (keys.Key, [12]byte, bool) {
	psk, ok := p.psk[pub]
	return psk, p.last[pub], ok
}

func (p *peers) accept(a Accepted) { p.last[a.PeerPublic] = a.Timestamp }

// handshake runs a full handshake and returns the initiator's and responder's
// keypairs and the responder's view.
func handshake(t testing.TB, cli, srv, psk keys.Key, payload []byte, now time.Time) (*Keypair, *Keypair, Accepted) {
	t.Helper()
	msg1, st, err := CreateInitiation(cli, srv.Public(), psk, idxCli, payload, now)
	if err != nil {
		t.Fatalf("CreateInitiation: %v", err)
	}
	r := NewResponder(srv, ResponderConfig{})
	ps := newPeers()
	ps.add(cli.Public(), psk)
	acc, err := r.ConsumeInitiation(msg1, srcA, ps.lookup, fixedIndex(idxSrv), now)
	if err != nil {
		t.Fatalf("ConsumeInitiation: %v", err)
	}
	ikp, rpayload, err := st.ConsumeResponse(acc.Response, now)
	if err != nil {
		t.Fatalf("ConsumeResponse: %v", err)
	}
	if len(rpayload) != 0 {
		t.Fatalf("response payload %x, want empty", rpayload)
	}
	return ikp, acc.Keypair, acc
}

// sealString seals s with k into a fresh buffer.
func sealString(t testing.TB, k *Keypair, s string) []byte {
	t.Helper()
	buf := make([]byte, wire.DataHeaderLen+len(s), wire.DataOverhead+len(s))
	copy(buf[wire.DataHeaderLen:], s)
	d, err := k.Seal(buf, len(s))
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	return d
}

// mustOpen opens a copy of d and checks the plaintext.
func mustOpen(t testing.TB, k *Keypair, d []byte, want string) uint64 {
	t.Helper()
	p, c, err := k.Open(bytes.Clone(d))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if string(p) != want {
		t.Fatalf("Open = %q, want %q", p, want)
	}
	return c
}

// fixedIndex is a session index allocator that always returns idx.
func fixedIndex(idx uint32) func() (uint32, bool) { return func() (uint32, bool) { return idx, true } }
