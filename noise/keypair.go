package noise

import (
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/braid-vpn/braid/replay"
	"github.com/braid-vpn/braid/wire"
)

// Transport errors. Open's errors are distinct so the receive path can count them
// separately: ErrReplay is normal under heavy reordering or duplication, ErrAuth
// means corruption or forgery.
var (
	ErrShort            = errors.New("noise: transport message too short or not a transport message")
	ErrAuth             = errors.New("noise: transport message failed authentication")
	ErrReplay           = errors.New("noise: transport message replayed or too old")
	ErrCounterExhausted = errors.New("noise: send counter exhausted, a new handshake is needed")
	ErrBuffer           = errors.New("noise: buffer too small for header, plaintext and tag")
)

// Keypair holds the session keys of one completed handshake: one key per
// direction, the send counter and the receive replay window. All methods are safe
// for concurrent use, so every path socket can seal and open with the same
// Keypair.
type Keypair struct {
	LocalIndex  uint32 // the index the peer puts in messages it sends us
	RemoteIndex uint32 // the index we put in messages we send the peer
	Created     time.Time
	Initiator   bool // we sent the initiation

	send, recv cipher.AEAD
	sendNext   atomic.Uint64 // counter of the next message to seal
	window     *replay.Window
	confirmed  atomic.Bool // a message from the peer authenticated under this key
}

func newKeypair(sendKey, recvKey [32]byte, local, remote uint32, initiator bool, window int, now time.Time) *Keypair {
	s, err := chacha20poly1305.New(sendKey[:])
	if err != nil {
		panic("noise: chacha20poly1305.New: " + err.Error()) // only fails on a bad key length
	}
	r, err := chacha20poly1305.New(recvKey[:])
	if err != nil {
		panic("noise: chacha20poly1305.New: " + err.Error())
	}
	k := &Keypair{
		LocalIndex:  local,
		RemoteIndex: remote,
		Created:     now,
		Initiator:   initiator,
		send:        s,
		recv:        r,
		window:      replay.New(window),
	}
	// The initiator learned from the response that the responder holds the key.
	// The responder has seen only an initiation, which could be replayed from
	// before the peer's last restart, until the first transport message opens.
	k.confirmed.Store(initiator)
	return k
}

// nonces holds 12-byte nonce buffers. cipher.AEAD is an interface, so a nonce on
// the stack would escape to the heap on every call; pooling keeps Seal and Open
// free of allocations while staying safe for concurrent callers.
var nonces = sync.Pool{New: func() any { return new([chacha20poly1305.NonceSize]byte) }}

// nonceFor fills the Noise ChaChaPoly nonce: 4 zero bytes, counter little-endian.
func nonceFor(counter uint64) *[chacha20poly1305.NonceSize]byte {
	n := nonces.Get().(*[chacha20poly1305.NonceSize]byte)
	n[0], n[1], n[2], n[3] = 0, 0, 0, 0
	binary.LittleEndian.PutUint64(n[4:], counter)
	return n
}

// Seal encrypts in place. buf[wire.DataHeaderLen : wire.DataHeaderLen+n] holds the
// plaintext and cap(buf) must be at least wire.DataOverhead+n. Seal writes the
// header (receiver = RemoteIndex, the next counter) and the tag and returns the
// datagram buf[:wire.DataOverhead+n]. Every call takes a fresh counter, even when
// called concurrently, so a nonce is never reused; once RejectAfterMessages
// counters are used up it returns ErrCounterExhausted.
func (k *Keypair) Seal(buf []byte, n int) ([]byte, error) {
	dgram, counter, err := k.SealHeader(buf, n)
	if err != nil {
		return nil, err
	}
	k.SealBody(dgram, counter)
	return dgram, nil
}

// SealHeader is the first half of Seal: it takes the next counter and writes
// the header, and returns the datagram's bytes (not yet encrypted) and its
// counter. SealBody finishes it. Split, the counter is taken in the order the
// caller needs (a path's datagrams in the order of their path sequence
// numbers) and the cipher work of a batch can run on several cores; the
// datagram must not leave before SealBody.
func (k *Keypair) SealHeader(buf []byte, n int) (dgram []byte, counter uint64, err error) {
	if n < 0 || n > wire.MaxDatagram-wire.DataOverhead || cap(buf) < wire.DataOverhead+n {
		return nil, 0, ErrBuffer
	}
	counter = k.sendNext.Add(1) - 1
	if counter >= RejectAfterMessages {
		k.sendNext.Store(RejectAfterMessages) // keep Add far from wrapping around
		return nil, 0, ErrCounterExhausted
	}
	buf = buf[:wire.DataOverhead+n]
	wire.PutDataHeader(buf, wire.DataHeader{Receiver: k.RemoteIndex, Counter: counter})
	return buf, counter, nil
}

// SealBody encrypts in place a datagram that SealHeader returned, with its
// counter, and writes the tag.
func (k *Keypair) SealBody(dgram []byte, counter uint64) {
	nonce := nonceFor(counter)
	n := len(dgram) - wire.DataOverhead
	k.send.Seal(dgram[wire.DataHeaderLen:wire.DataHeaderLen], nonce[:], dgram[wire.DataHeaderLen:wire.DataHeaderLen+n], dgram[:wire.DataHeaderLen])
	nonces.Put(nonce)
}

// Open authenticates and decrypts a transport datagram in place and returns the
// plaintext (aliasing dgram) and the message counter. The replay window is
// checked before the AEAD and updated only after the tag verified. Errors:
// ErrShort for a datagram too short or of another type, ErrReplay for a counter
// already seen, too old or beyond RejectAfterMessages, ErrAuth for a wrong
// receiver index or a failed tag (a failed tag leaves dgram's payload zeroed).
func (k *Keypair) Open(dgram []byte) (plain []byte, counter uint64, err error) {
	plain, counter, err = k.Decrypt(dgram)
	if err != nil {
		return nil, counter, err
	}
	if !k.Commit(counter) {
		return nil, counter, ErrReplay
	}
	return plain, counter, nil
}

// Decrypt is Open without the replay window's update: the caller must Commit the
// counter before acting on the plaintext. It lets a receiver check what the
// plaintext cannot tell (the source endpoint, say) before a datagram takes its
// counter's slot, so a copy raced from a wrong source cannot shadow the genuine one.
func (k *Keypair) Decrypt(dgram []byte) (plain []byte, counter uint64, err error) {
	if len(dgram) < wire.DataOverhead || dgram[0] != wire.TypeData {
		return nil, 0, ErrShort
	}
	h, _ := wire.ParseDataHeader(dgram)
	if h.Receiver != k.LocalIndex {
		return nil, h.Counter, ErrAuth
	}
	if h.Counter >= RejectAfterMessages || !k.window.Check(h.Counter) {
		return nil, h.Counter, ErrReplay
	}
	nonce := nonceFor(h.Counter)
	plain, err = k.recv.Open(dgram[wire.DataHeaderLen:wire.DataHeaderLen], nonce[:], dgram[wire.DataHeaderLen:], dgram[:wire.DataHeaderLen])
	nonces.Put(nonce)
	if err != nil {
		return nil, h.Counter, ErrAuth
	}
	return plain, h.Counter, nil
}

// Commit records a counter that Decrypt authenticated in the replay window; false
// means another datagram with that counter was accepted meanwhile (a replay).
func (k *Keypair) Commit(counter uint64) bool {
	if !k.window.Update(counter) {
		return false
	}
	if !k.confirmed.Load() {
		k.confirmed.Store(true)
	}
	return true
}

// SendCounter returns the counter the next Seal will use, which is also the
// number of messages sealed so far.
func (k *Keypair) SendCounter() uint64 { return min(k.sendNext.Load(), RejectAfterMessages) }

// MaxRecvCounter returns the highest counter opened so far (0 if none was).
func (k *Keypair) MaxRecvCounter() uint64 {
	c, ok := k.window.Highest()
	if !ok {
		// Nothing opened yet: Highest's counter is then 2^64-1, which would read as
		// "rekey now" to every caller comparing it with a limit.
		return 0
	}
	return c
}

// Confirmed reports whether the peer has proven it holds this key. It is true for
// the initiator at once and for the responder after its first successful Open.
// A responder must not send with an unconfirmed key: the initiation it answered
// may have been a replay (WireGuard has the same rule).
func (k *Keypair) Confirmed() bool { return k.confirmed.Load() }
