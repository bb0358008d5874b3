package noise

import (
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	mrand "math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/blake2s"
	"golang.org/x/crypto/chacha20poly1305"

	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/wire"
)

// Cookies let a server under load tell genuine initiators from spoofed sources
// before it spends a Diffie-Hellman (WireGuard's mechanism, §5.4.7 of its paper):
//
//   - Under load, an initiation whose mac2 does not verify is answered with a cookie
//     reply instead of being processed. The cookie is a MAC of the source address and
//     port under a secret the server rotates every CookieSecretLifetime, so the server
//     keeps no state per source and only the host at that address can learn it.
//   - The reply is encrypted (XChaCha20-Poly1305) with a key derived from the server's
//     public key and bound to the initiation's mac1, so only the initiator that sent
//     that very initiation can use it, and it is smaller than the initiation: no
//     amplification.
//   - The initiator puts mac2 = MAC(cookie, message up to mac2) on its next
//     initiations from that source.
//
// A spoofed flood therefore costs the server one hash and one small reply per
// datagram once it is under load, and never a Diffie-Hellman.

// Cookie lifetimes.
const (
	// CookieSecretLifetime is how long a server's cookie secret is current. A cookie
	// made under the previous secret is still accepted, so a cookie lives at least
	// this long.
	CookieSecretLifetime = 2 * time.Minute
	// CookieUseFor is how long an initiator uses a cookie it received: a little less
	// than the guaranteed lifetime, against clock drift between the two.
	CookieUseFor = CookieSecretLifetime - 5*time.Second
)

// ErrCookie is returned for a cookie reply that does not decrypt.
var ErrCookie = errors.New("noise: cookie reply failed authentication")

const cookieLabel = "braid cookie"

// cookieKey derives the key that encrypts cookie replies to initiators of the
// responder whose static public key is pub.
func cookieKey(pub keys.Key) [32]byte {
	var b [len(cookieLabel) + keys.Len]byte
	copy(b[:], cookieLabel)
	copy(b[len(cookieLabel):], pub[:])
	return blake2s.Sum256(b[:])
}

// Cookie is what an initiator keeps per source address after a cookie reply.
type Cookie = [wire.CookieLen]byte

// CookieJar is the responder's side: it makes cookie replies and checks mac2. It is
// safe for concurrent use.
type CookieJar struct {
	aead cipher.AEAD // seals replies under cookieKey(our public key)

	// nonces come from a ChaCha8 stream seeded from crypto/rand: reply nonces need
	// to be unique and unpredictable, not a system call each (a flood's replies
	// are the server's hot path under load).
	nmu    sync.Mutex
	nonces *mrand.ChaCha8

	mu      sync.Mutex
	secret  [32]byte
	prev    [32]byte
	rotated time.Time

	// epoch counts rotations; due is when the next one is due (UnixNano, 0
	// before the first), so Epoch needs no lock until then.
	epoch atomic.Uint64
	due   atomic.Int64
}

// NewCookieJar returns the cookie state of the responder whose static public key
// is pub.
func NewCookieJar(pub keys.Key) *CookieJar {
	k := cookieKey(pub)
	aead, err := chacha20poly1305.NewX(k[:])
	if err != nil {
		panic("noise: chacha20poly1305.NewX: " + err.Error()) // only fails on a bad key length
	}
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		panic("noise: crypto/rand: " + err.Error())
	}
	return &CookieJar{aead: aead, nonces: mrand.NewChaCha8(seed)}
}

// secrets returns the current and previous secrets, rotating them when due.
func (j *CookieJar) secrets(now time.Time) (cur, prev [32]byte) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.rotated.IsZero() || now.Sub(j.rotated) >= CookieSecretLifetime {
		if j.rotated.IsZero() || now.Sub(j.rotated) >= 2*CookieSecretLifetime {
			rand.Read(j.prev[:]) // nothing made under the old secret is still valid
		} else {
			j.prev = j.secret
		}
		rand.Read(j.secret[:])
		j.rotated = now
		j.epoch.Add(1)
		j.due.Store(now.Add(CookieSecretLifetime).UnixNano())
	}
	return j.secret, j.prev
}

// Epoch returns the number of the current secret, rotating it when due: a server
// gives its clients fresh cookies inside their sessions (tunnel's COOKIE frame)
// whenever it changes. It takes a lock only when a rotation is due.
func (j *CookieJar) Epoch(now time.Time) uint64 {
	if d := j.due.Load(); d == 0 || now.UnixNano() >= d {
		j.secrets(now)
	}
	return j.epoch.Load()
}

// Current returns the cookie of src under the current secret: what a cookie
// reply to src would carry now.
func (j *CookieJar) Current(src netip.AddrPort, now time.Time) Cookie {
	cur, _ := j.secrets(now)
	return cookieFor(&cur, src)
}

// cookieFor computes the cookie of src under secret.
func cookieFor(secret *[32]byte, src netip.AddrPort) Cookie {
	var b [18]byte
	a := src.Addr().Unmap().As16()
	copy(b[:], a[:])
	binary.BigEndian.PutUint16(b[16:], src.Port())
	return mac(secret[:], b[:])
}

// CheckMAC2 reports whether the initiation msg (whose length the caller checked)
// carries a mac2 made with the cookie of src.
func (j *CookieJar) CheckMAC2(msg []byte, src netip.AddrPort, now time.Time) bool {
	if len(msg) < wire.MinInitLen {
		return false
	}
	body, got := msg[:len(msg)-wire.MACLen], msg[len(msg)-wire.MACLen:]
	if [wire.MACLen]byte(got) == ([wire.MACLen]byte{}) {
		return false // no cookie: most of a flood, rejected without hashing
	}
	cur, prev := j.secrets(now)
	for _, s := range []*[32]byte{&cur, &prev} {
		c := cookieFor(s, src)
		want := mac(c[:], body)
		if subtle.ConstantTimeCompare(want[:], got) == 1 {
			return true
		}
	}
	return false
}

// AppendReply appends to out the cookie reply to the initiation msg received from
// src: the initiator's sender index, a random nonce and the sealed cookie, with the
// initiation's mac1 as associated data.
func (j *CookieJar) AppendReply(out, msg []byte, src netip.AddrPort, now time.Time) ([]byte, error) {
	if len(msg) < wire.MinInitLen {
		return out, ErrMalformed
	}
	cur, _ := j.secrets(now)
	c := cookieFor(&cur, src)
	start := len(out)
	out = append(out, make([]byte, wire.CookieReplyLen)...)
	r := out[start:]
	r[0] = wire.TypeCookieReply
	copy(r[4:8], msg[4:8]) // the initiator's sender index
	nonce := r[8 : 8+chacha20poly1305.NonceSizeX]
	j.nmu.Lock()
	j.nonces.Read(nonce)
	j.nmu.Unlock()
	j.aead.Seal(r[8+len(nonce):8+len(nonce)], nonce, c[:], initMAC1(msg))
	return out, nil
}

// ConsumeCookieReply opens a cookie reply from the responder whose public key is
// serverPub, sent in answer to an initiation whose mac1 was mac1.
func ConsumeCookieReply(reply []byte, serverPub keys.Key, mac1 [wire.MACLen]byte) (Cookie, error) {
	if len(reply) != wire.CookieReplyLen || reply[0] != wire.TypeCookieReply || reply[1]|reply[2]|reply[3] != 0 {
		return Cookie{}, ErrMalformed
	}
	k := cookieKey(serverPub)
	aead, err := chacha20poly1305.NewX(k[:])
	if err != nil {
		return Cookie{}, err
	}
	nonce := reply[8 : 8+chacha20poly1305.NonceSizeX]
	var c Cookie
	if _, err := aead.Open(c[:0], nonce, reply[8+len(nonce):], mac1[:]); err != nil {
		return Cookie{}, ErrCookie
	}
	return c, nil
}

// PeekCookieReceiver returns the receiver index of a plausible cookie reply (the
// initiator's sender index), without any cryptography.
func PeekCookieReceiver(reply []byte) (uint32, bool) {
	if len(reply) != wire.CookieReplyLen || reply[0] != wire.TypeCookieReply {
		return 0, false
	}
	return binary.BigEndian.Uint32(reply[4:]), true
}

// SetMAC2 writes the mac2 of an initiation made with cookie c into its last
// wire.MACLen bytes; a zero cookie writes zeros (no cookie).
func SetMAC2(msg []byte, c Cookie) {
	m := msg[len(msg)-wire.MACLen:]
	if c == (Cookie{}) {
		clear(m)
		return
	}
	v := mac(c[:], msg[:len(msg)-wire.MACLen])
	copy(m, v[:])
}

// InitiationMAC1 returns the mac1 of a plausible initiation: a copy of one
// initiation (the client sends it on every path) has the same mac1 whatever its
// mac2, so a server can recognise copies without any Diffie-Hellman.
func InitiationMAC1(msg []byte) ([wire.MACLen]byte, bool) {
	if len(msg) < wire.MinInitLen || len(msg) > wire.MaxInitLen || msg[0] != wire.TypeHandshakeInit {
		return [wire.MACLen]byte{}, false
	}
	var m [wire.MACLen]byte
	copy(m[:], initMAC1(msg))
	return m, true
}

// initMAC1 returns the mac1 field of an initiation.
func initMAC1(msg []byte) []byte {
	return msg[len(msg)-2*wire.MACLen : len(msg)-wire.MACLen]
}
