// Package keys holds braid's Curve25519 key type and its text form.
//
// Keys are written as standard base64 of their 32 bytes, the same form `wg genkey`
// uses, so operators can move keys between tools they already know.
package keys

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/crypto/curve25519"
)

// Len is the size of a private, public or preshared key in bytes.
const Len = 32

// Key is a Curve25519 private or public key, or a 32-byte preshared key.
type Key [Len]byte

// Generate returns a new clamped Curve25519 private key.
func Generate() (Key, error) {
	var k Key
	if _, err := rand.Read(k[:]); err != nil {
		return k, fmt.Errorf("reading random bytes: %w", err)
	}
	k.clamp()
	return k, nil
}

// GeneratePreshared returns 32 random bytes for use as a Noise preshared key.
func GeneratePreshared() (Key, error) {
	var k Key
	_, err := rand.Read(k[:])
	return k, err
}

// clamp applies the X25519 scalar clamping so the stored key is the one actually used.
func (k *Key) clamp() {
	k[0] &= 248
	k[31] = (k[31] & 127) | 64
}

// Public derives the public key of private key k.
func (k Key) Public() Key {
	var pub Key
	p, err := curve25519.X25519(k[:], curve25519.Basepoint)
	if err != nil {
		// X25519 with the base point fails only for an all-zero result, which a
		// clamped scalar cannot produce; leave pub zero so IsZero catches misuse.
		return pub
	}
	copy(pub[:], p)
	return pub
}

// IsZero reports whether k is all zeros (unset).
func (k Key) IsZero() bool { return k == Key{} }

// lowOrderProbe is the scalar IsLowOrder multiplies by. Any scalar will do:
// X25519 clamps it to 8·n with 2^251 ≤ n < 2^252, a multiple of the cofactor
// (8 on the curve, 4 on its twist) whose n is nonzero modulo both large prime
// orders (about 2^252 and 2^253), so the product is the identity, encoded as
// the all-zero u-coordinate, exactly when the point's order divides the
// cofactor.
var lowOrderProbe = Key{0: 9}

// IsLowOrder reports whether k, taken as an X25519 public key, is a point of
// small order on Curve25519 or its twist: 0, 1, the two points of order 8,
// p−1, the non-canonical encodings p and p+1 (of 0 and 1), and each of these
// with the ignored top bit set. Diffie-Hellman with such a point yields the all-zero
// shared secret whatever the private key, so it is nobody's public key: a
// handshake with it can never complete, and the point contributes nothing
// secret. The all-zero key is one of them.
//
// The test is computed rather than looked up in a list: k is multiplied by a
// fixed scalar, and curve25519.X25519 refuses an all-zero result.
func (k Key) IsLowOrder() bool {
	_, err := curve25519.X25519(lowOrderProbe[:], k[:])
	return err != nil
}

// ErrLowOrder is wrapped, together with ErrBadKey, by CheckPublic's error.
var ErrLowOrder = errors.New("low-order point")

// CheckPublic returns nil when k can be a peer's public key, else an error
// wrapping ErrBadKey and ErrLowOrder (see IsLowOrder). The config package
// checks every public key in the file with it; anything else that accepts a
// peer's public key from outside should too.
func (k Key) CheckPublic() error {
	if k.IsLowOrder() {
		return fmt.Errorf("%w: %w (X25519 with it gives the all-zero secret for any private key, so it is no one's public key)", ErrBadKey, ErrLowOrder)
	}
	return nil
}

// String returns the base64 form.
func (k Key) String() string { return base64.StdEncoding.EncodeToString(k[:]) }

// MarshalText implements encoding.TextMarshaler.
func (k Key) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *Key) UnmarshalText(b []byte) error {
	p, err := Parse(string(b))
	if err != nil {
		return err
	}
	*k = p
	return nil
}

// ErrBadKey is wrapped by every parse failure.
var ErrBadKey = errors.New("bad key")

// Parse decodes a base64 key, ignoring surrounding white space.
func Parse(s string) (Key, error) {
	var k Key
	s = strings.TrimSpace(s)
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return k, fmt.Errorf("%w: not base64", ErrBadKey)
	}
	if len(b) != Len {
		return k, fmt.Errorf("%w: %d bytes, want %d", ErrBadKey, len(b), Len)
	}
	copy(k[:], b)
	return k, nil
}

// maxKeyFile bounds what ReadFile reads: a key is 44 base64 characters, and a
// file such as /dev/zero must not make the daemon read forever.
const maxKeyFile = 4096

// ReadFile reads a key file holding one base64 key.
func ReadFile(name string) (Key, error) {
	f, err := os.Open(name)
	if err != nil {
		return Key{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return Key{}, err
	}
	if len(b) > maxKeyFile {
		return Key{}, fmt.Errorf("%s: %w: larger than %d bytes", name, ErrBadKey, maxKeyFile)
	}
	k, err := Parse(string(b))
	if err != nil {
		return Key{}, fmt.Errorf("%s: %w", name, err)
	}
	return k, nil
}
