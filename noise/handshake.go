package noise

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	fnoise "github.com/flynn/noise"
	"golang.org/x/crypto/blake2s"

	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/wire"
)

// Handshake errors. A server counts them per kind; none is fatal to the server.
var (
	ErrMalformed          = errors.New("noise: malformed handshake message")
	ErrMAC                = errors.New("noise: handshake mac1 mismatch (sender does not know our public key)")
	ErrRateLimited        = errors.New("noise: handshake initiation rate-limited")
	ErrDecrypt            = errors.New("noise: handshake message failed authentication")
	ErrUnknownPeer        = errors.New("noise: handshake from an unknown static key")
	ErrReplayedInitiation = errors.New("noise: handshake timestamp not newer than the last accepted")
	ErrInitiationUsed     = errors.New("noise: initiation already completed")
	ErrPayloadTooLong     = errors.New("noise: handshake payload too long")
	ErrNoIndex            = errors.New("noise: no free session index")
)

var (
	suite    = fnoise.NewCipherSuite(fnoise.DH25519, fnoise.CipherChaChaPoly, fnoise.HashBLAKE2s)
	prologue = []byte("braid v1")
)

const (
	mac1Label = "braid mac1"
	// pskPlacement 2 puts the psk at the end of message 2, so the responder can
	// read message 1 (and learn who is calling) before it knows which psk to use.
	pskPlacement = 2
)

// mac1Key derives the mac1 key of the receiver whose static public key is pub.
func mac1Key(pub keys.Key) [32]byte {
	var b [len(mac1Label) + keys.Len]byte
	copy(b[:], mac1Label)
	copy(b[len(mac1Label):], pub[:])
	return blake2s.Sum256(b[:])
}

// MAC1Key is the key of the mac1 of initiations to one server. A client gets its
// mac1 from CreateInitiation; MAC1Key is for tools that must pass a server's first
// check without being a client (lab/flood forges initiations with it), since mac1
// needs only the server's public key.
type MAC1Key [32]byte

// NewMAC1Key returns the mac1 key of initiations to the server whose static public
// key is serverPub.
func NewMAC1Key(serverPub keys.Key) MAC1Key { return mac1Key(serverPub) }

// PutInitiationMAC1 writes the mac1 of the initiation msg (whose last
// 2×wire.MACLen bytes are mac1 and mac2) in place.
func (k *MAC1Key) PutInitiationMAC1(msg []byte) {
	n := len(msg) - 2*wire.MACLen
	m := mac(k[:], msg[:n])
	copy(msg[n:], m[:])
}

// mac computes the keyed BLAKE2s-128 of body (mac1, mac2 and cookies).
func mac(key, body []byte) [wire.MACLen]byte {
	var out [wire.MACLen]byte
	h, err := blake2s.New128(key)
	if err != nil {
		panic("noise: blake2s.New128: " + err.Error()) // only fails on a bad key length
	}
	h.Write(body)
	h.Sum(out[:0])
	return out
}

// checkMAC reports whether got is the MAC of body under key, in constant time.
func checkMAC(key, body, got []byte) bool {
	want := mac(key, body)
	return subtle.ConstantTimeCompare(want[:], got) == 1
}

// checkRespMAC1 verifies the trailing mac1 of a response.
func checkRespMAC1(key *[32]byte, msg []byte) bool {
	return checkMAC(key[:], msg[:len(msg)-wire.MACLen], msg[len(msg)-wire.MACLen:])
}

// checkInitMAC1 verifies the mac1 of an initiation, which mac2 follows.
func checkInitMAC1(key *[32]byte, msg []byte) bool {
	n := len(msg) - 2*wire.MACLen
	return checkMAC(key[:], msg[:n], msg[n:n+wire.MACLen])
}

// appendMAC1 appends the mac1 of msg to msg.
func appendMAC1(key *[32]byte, msg []byte) []byte {
	m := mac(key[:], msg)
	return append(msg, m[:]...)
}

func dhKey(priv keys.Key) fnoise.DHKey {
	pub := priv.Public()
	return fnoise.DHKey{Private: bytes.Clone(priv[:]), Public: pub[:]}
}

// TAI64N returns the 12-byte TAI64N label of t: 8 bytes of seconds since 1970
// TAI offset by 2^62, then 4 bytes of nanoseconds, both big-endian, so later
// times compare greater bytewise. Like WireGuard it uses a fixed TAI-UTC offset
// of 10 s: only monotonicity per client matters, not the exact leap seconds.
func TAI64N(t time.Time) [wire.TimestampLen]byte {
	var b [wire.TimestampLen]byte
	binary.BigEndian.PutUint64(b[0:], uint64(1)<<62+10+uint64(t.Unix()))
	binary.BigEndian.PutUint32(b[8:], uint32(t.Nanosecond()))
	return b
}

// Initiation is the initiator's state between sending message 1 and receiving
// message 2. It is safe for concurrent use (responses may arrive on several
// paths).
type Initiation struct {
	// ReplayWindow sets the replay window of the resulting Keypair; 0 means
	// DefaultReplayWindow. Set it before ConsumeResponse.
	ReplayWindow int

	mu         sync.Mutex
	localIndex uint32
	static     fnoise.DHKey
	remotePub  keys.Key
	psk        keys.Key
	eseed      [32]byte          // the ephemeral private key, kept to rebuild hs
	payload    []byte            // timestamp || caller's payload, kept to rebuild hs
	macKey     [32]byte          // mac1 key for responses to us
	mac1       [wire.MACLen]byte // of message 1: binds cookie replies to it
	hs         *fnoise.HandshakeState
	done       bool
}

// CreateInitiation starts a handshake with the peer whose static public key is
// remotePub and returns message 1 to send. payload (at most
// wire.MaxHandshakePayload-wire.TimestampLen bytes, typically wire.AppendParams
// output) travels encrypted after a TAI64N timestamp of now. psk is the zero key
// when none is configured.
func CreateInitiation(localPriv, remotePub, psk keys.Key, localIndex uint32, payload []byte, now time.Time) (msg []byte, st *Initiation, err error) {
	var eseed [32]byte
	if _, err := rand.Read(eseed[:]); err != nil {
		return nil, nil, fmt.Errorf("noise: ephemeral key: %w", err)
	}
	return createInitiation(localPriv, remotePub, psk, localIndex, payload, now, eseed)
}

func createInitiation(localPriv, remotePub, psk keys.Key, localIndex uint32, payload []byte, now time.Time, eseed [32]byte) ([]byte, *Initiation, error) {
	if len(payload) > wire.MaxHandshakePayload-wire.TimestampLen {
		return nil, nil, ErrPayloadTooLong
	}
	ts := TAI64N(now)
	st := &Initiation{
		localIndex: localIndex,
		static:     dhKey(localPriv),
		remotePub:  remotePub,
		psk:        psk,
		eseed:      eseed,
		payload:    append(ts[:], payload...),
		macKey:     mac1Key(localPriv.Public()),
	}
	msg := make([]byte, wire.InitHeaderLen, wire.MinInitLen+len(st.payload))
	msg[0] = wire.TypeHandshakeInit
	binary.BigEndian.PutUint32(msg[4:], localIndex)
	hs, msg, err := st.start(msg)
	if err != nil {
		return nil, nil, err
	}
	st.hs = hs
	rk := mac1Key(remotePub)
	msg = appendMAC1(&rk, msg)
	copy(st.mac1[:], msg[len(msg)-wire.MACLen:])
	// mac2 stays zero until the responder hands out a cookie (see SetMAC2).
	return append(msg, make([]byte, wire.MACLen)...), st, nil
}

// start runs the initiator's side of message 1 from the stored ephemeral seed,
// appending the Noise message to out. Running it again yields the same state,
// which lets ConsumeResponse start over after a forged response: flynn/noise does
// not roll its state back on every failure path.
func (st *Initiation) start(out []byte) (*fnoise.HandshakeState, []byte, error) {
	hs, err := fnoise.NewHandshakeState(fnoise.Config{
		CipherSuite:           suite,
		Random:                bytes.NewReader(st.eseed[:]),
		Pattern:               fnoise.HandshakeIK,
		Initiator:             true,
		Prologue:              prologue,
		PresharedKey:          st.psk[:],
		PresharedKeyPlacement: pskPlacement,
		StaticKeypair:         st.static,
		PeerStatic:            bytes.Clone(st.remotePub[:]),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("noise: %w", err)
	}
	out, _, _, err = hs.WriteMessage(out, st.payload)
	if err != nil {
		// Only a low-order remote public key makes a Diffie-Hellman fail here.
		return nil, nil, fmt.Errorf("noise: writing initiation: %w", err)
	}
	return hs, out, nil
}

// ConsumeResponse completes the handshake with message 2 and returns the session
// keys and the responder's payload. A response that fails leaves the Initiation
// usable, so a forged response cannot stop the genuine one from completing; after
// success further calls return ErrInitiationUsed.
func (st *Initiation) ConsumeResponse(msg []byte, now time.Time) (*Keypair, []byte, error) {
	if len(msg) < wire.MinRespLen || len(msg) > wire.MaxRespLen ||
		msg[0] != wire.TypeHandshakeResp || msg[1]|msg[2]|msg[3] != 0 {
		return nil, nil, ErrMalformed
	}
	sender := binary.BigEndian.Uint32(msg[4:])
	receiver := binary.BigEndian.Uint32(msg[8:])
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.done {
		return nil, nil, ErrInitiationUsed
	}
	if receiver != st.localIndex {
		return nil, nil, fmt.Errorf("%w: response for index %#x, ours is %#x", ErrMalformed, receiver, st.localIndex)
	}
	if !checkRespMAC1(&st.macKey, msg) {
		return nil, nil, ErrMAC
	}
	if st.hs == nil {
		hs, _, err := st.start(nil)
		if err != nil {
			return nil, nil, err
		}
		st.hs = hs
	}
	payload, toResp, toInit, err := st.hs.ReadMessage(nil, msg[wire.RespHeaderLen:len(msg)-wire.MACLen])
	if err != nil || toResp == nil || toInit == nil {
		st.hs = nil // possibly half-updated; rebuilt on the next attempt
		return nil, nil, ErrDecrypt
	}
	st.done, st.hs = true, nil
	clear(st.eseed[:])
	clear(st.static.Private)
	kp := newKeypair(toResp.UnsafeKey(), toInit.UnsafeKey(), st.localIndex, sender, true, st.ReplayWindow, now)
	return kp, payload, nil
}

// MAC1 returns the mac1 of message 1, the associated data of a cookie reply to it.
func (st *Initiation) MAC1() [wire.MACLen]byte { return st.mac1 }

// LocalIndex returns the sender index carried in message 1.
func (st *Initiation) LocalIndex() uint32 { return st.localIndex }

// ResponderConfig tunes a Responder. Zero fields take the defaults except
// RatePerSecond, whose zero disables rate limiting (the config file's
// "handshake_rate = 0").
type ResponderConfig struct {
	// RatePerSecond is how many initiations per second one source may make the
	// server process (Diffie-Hellman work) in the long run; DefaultRatePerSecond
	// is a sensible value. 0 disables the limit.
	RatePerSecond int
	// Burst is how many initiations a source may send back to back
	// (DefaultBurst). A client retrying on several paths needs a few.
	Burst int
	// LimiterEntries bounds the number of buckets the limiter remembers
	// (DefaultLimiterEntries; about 100 bytes each), half for unproven sources
	// and half for proven ones. A proven IPv6 source takes up to four (its
	// address and port, its /64, /56 and /48), an unproven one three.
	LimiterEntries int
	// Budget is the server's global budget of initiations a second, if it has
	// one (tunnel.Tunables.HandshakeBudget): any IPv6 /48 is held to
	// Prefix48Share of it.
	Budget int
	// ReplayWindow sets the replay window of each Keypair (DefaultReplayWindow).
	ReplayWindow int
	// ResponsePayload, if set, is called once an initiation has authenticated
	// (known peer, fresh timestamp) with the initiator's payload after the
	// timestamp; what it returns (at most wire.MaxHandshakePayload bytes) is sent
	// encrypted in message 2.
	ResponsePayload func(peer keys.Key, initPayload []byte) []byte
}

// Responder answers handshake initiations with one static key. It keeps no state
// per initiation, only the rate limiter, and is safe for concurrent use.
type Responder struct {
	static      fnoise.DHKey
	pub         keys.Key
	macKey      [32]byte
	lim         *limiter // nil: unlimited
	window      int
	random      io.Reader // ephemeral keys; nil = crypto/rand (tests make it deterministic)
	respPayload func(peer keys.Key, initPayload []byte) []byte
	dhCount     atomic.Uint64
}

// NewResponder returns a Responder for the static private key localPriv.
func NewResponder(localPriv keys.Key, cfg ResponderConfig) *Responder {
	r := &Responder{
		static:      dhKey(localPriv),
		pub:         localPriv.Public(),
		window:      cfg.ReplayWindow,
		respPayload: cfg.ResponsePayload,
	}
	r.macKey = mac1Key(r.pub)
	if cfg.RatePerSecond > 0 {
		burst := cfg.Burst
		if burst <= 0 {
			burst = DefaultBurst
		}
		n := cfg.LimiterEntries
		if n <= 0 {
			n = DefaultLimiterEntries
		}
		r.lim = newLimiter(cfg.RatePerSecond, burst, n, cfg.Budget)
	}
	return r
}

// PublicKey returns the responder's static public key.
func (r *Responder) PublicKey() keys.Key { return r.pub }

// PeerLookup maps a static public key to the peer's preshared key (zero if none)
// and the last initiation timestamp accepted from it (zero if none); ok is false
// for a key that is not a configured peer.
type PeerLookup func(pub keys.Key) (psk keys.Key, lastTimestamp [12]byte, ok bool)

// Accepted is the outcome of a successful initiation. The caller must record
// Timestamp as the peer's last accepted timestamp before accepting the next
// initiation from it, send Response to src, and wait until Keypair.Confirmed
// before sending with Keypair.
type Accepted struct {
	PeerPublic  keys.Key
	Timestamp   [wire.TimestampLen]byte
	Payload     []byte // the initiator's payload after the timestamp
	Response    []byte // message 2
	Keypair     *Keypair
	RemoteIndex uint32 // the initiator's sender index
}

// CheckInitiation runs the checks of an initiation that cost no Diffie-Hellman:
// length, type, reserved bits and mac1. It returns ErrMalformed or ErrMAC.
func (r *Responder) CheckInitiation(msg []byte) error {
	if len(msg) < wire.MinInitLen+wire.TimestampLen || len(msg) > wire.MaxInitLen ||
		msg[0] != wire.TypeHandshakeInit || msg[1]|msg[2]|msg[3] != 0 {
		return ErrMalformed
	}
	if !checkInitMAC1(&r.macKey, msg) {
		return ErrMAC
	}
	return nil
}

// DHCount returns how many initiations have reached the Diffie-Hellman stage since
// the Responder was made (for tests and status).
func (r *Responder) DHCount() uint64 { return r.dhCount.Load() }

// ConsumeInitiation is ConsumeInitiationFrom for an initiation whose source
// address src is unproven (its port then does not matter).
func (r *Responder) ConsumeInitiation(msg []byte, src netip.Addr, lookup PeerLookup, newIndex func() (uint32, bool), now time.Time) (Accepted, error) {
	return r.ConsumeInitiationFrom(msg, netip.AddrPortFrom(src, 0), Unproven, lookup, newIndex, now)
}

// ConsumeInitiationFrom processes message 1 received from src and, if it is a
// fresh initiation by a known peer, returns the response and the session keys.
// proof says what the caller knows of src (it checked mac2, or src is a validated
// endpoint); the rate limiter keeps separate buckets for each kind (see limiter).
// The checks run cheapest first (see the package documentation); errors are
// ErrMalformed, ErrMAC, ErrRateLimited, ErrDecrypt, ErrUnknownPeer and
// ErrReplayedInitiation. newIndex is called only once the initiation has
// authenticated, for the session index the response announces; when it finds none
// free the initiation fails with ErrNoIndex.
func (r *Responder) ConsumeInitiationFrom(msg []byte, src netip.AddrPort, proof Proof, lookup PeerLookup, newIndex func() (uint32, bool), now time.Time) (Accepted, error) {
	if err := r.CheckInitiation(msg); err != nil {
		return Accepted{}, err
	}
	if r.lim != nil && !r.lim.allow(src, proof, now) {
		return Accepted{}, ErrRateLimited
	}
	r.dhCount.Add(1)
	hs, err := fnoise.NewHandshakeState(fnoise.Config{
		CipherSuite:           suite,
		Pattern:               fnoise.HandshakeIK,
		Random:                r.random,
		Initiator:             false,
		Prologue:              prologue,
		PresharedKeyPlacement: pskPlacement,
		StaticKeypair:         r.static,
	})
	if err != nil {
		return Accepted{}, fmt.Errorf("noise: %w", err)
	}
	payload, _, _, err := hs.ReadMessage(nil, msg[wire.InitHeaderLen:len(msg)-2*wire.MACLen])
	if err != nil {
		return Accepted{}, ErrDecrypt
	}
	var a Accepted
	if copy(a.PeerPublic[:], hs.PeerStatic()) != keys.Len || len(payload) < wire.TimestampLen {
		return Accepted{}, ErrMalformed // unreachable given the length checks above
	}
	psk, last, ok := lookup(a.PeerPublic)
	if !ok {
		return Accepted{}, ErrUnknownPeer
	}
	copy(a.Timestamp[:], payload)
	if bytes.Compare(a.Timestamp[:], last[:]) <= 0 {
		return Accepted{}, ErrReplayedInitiation
	}
	if err := hs.SetPresharedKey(psk[:]); err != nil {
		return Accepted{}, fmt.Errorf("noise: %w", err)
	}
	a.RemoteIndex = binary.BigEndian.Uint32(msg[4:])
	var rp []byte
	if r.respPayload != nil {
		rp = r.respPayload(a.PeerPublic, payload[wire.TimestampLen:])
		if len(rp) > wire.MaxHandshakePayload {
			return Accepted{}, ErrPayloadTooLong
		}
	}
	localIndex, ok := newIndex()
	if !ok {
		return Accepted{}, ErrNoIndex
	}
	resp := make([]byte, wire.RespHeaderLen, wire.MinRespLen+len(rp))
	resp[0] = wire.TypeHandshakeResp
	binary.BigEndian.PutUint32(resp[4:], localIndex)
	binary.BigEndian.PutUint32(resp[8:], a.RemoteIndex)
	resp, toResp, toInit, err := hs.WriteMessage(resp, rp)
	if err != nil || toResp == nil || toInit == nil {
		// A low-order initiator ephemeral fails the ee Diffie-Hellman.
		return Accepted{}, ErrDecrypt
	}
	peerMAC := mac1Key(a.PeerPublic)
	a.Response = appendMAC1(&peerMAC, resp)
	a.Payload = payload[wire.TimestampLen:]
	a.Keypair = newKeypair(toInit.UnsafeKey(), toResp.UnsafeKey(), localIndex, a.RemoteIndex, false, r.window, now)
	return a, nil
}

// PeekInitiationSender returns the sender index of a plausible message 1 without
// any cryptography (e.g. to route it or to log it).
func PeekInitiationSender(msg []byte) (uint32, bool) {
	if len(msg) < wire.MinInitLen || len(msg) > wire.MaxInitLen || msg[0] != wire.TypeHandshakeInit {
		return 0, false
	}
	return binary.BigEndian.Uint32(msg[4:]), true
}

// PeekResponseIndices returns the indices of a plausible message 2 without any
// cryptography, so the initiator can find the Initiation it answers.
func PeekResponseIndices(msg []byte) (sender, receiver uint32, ok bool) {
	if len(msg) < wire.MinRespLen || len(msg) > wire.MaxRespLen || msg[0] != wire.TypeHandshakeResp {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(msg[4:]), binary.BigEndian.Uint32(msg[8:]), true
}
