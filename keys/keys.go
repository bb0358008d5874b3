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

// ReadFile reads a key file holding one base64 key.
func ReadFile(name string) (Key, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return Key{}, err
	}
	k, err := Parse(string(b))
	if err != nil {
		return Key{}, fmt.Errorf("%s: %w", name, err)
	}
	return k, nil
}
