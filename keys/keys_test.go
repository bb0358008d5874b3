package keys

import (
	"encoding/hex"
	"errors"
	"testing"
)

// RFC 7748 §6.1: Alice's private and public key.
func TestPublicRFC7748(t *testing.T) {
	priv, err := Parse("dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=")
	if err != nil {
		t.Fatal(err)
	}
	// 8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a
	want := "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="
	if got := priv.Public().String(); got != want {
		t.Fatalf("public = %s, want %s", got, want)
	}
}

func TestGenerateRoundTrip(t *testing.T) {
	k, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if k[0]&7 != 0 || k[31]&128 != 0 || k[31]&64 == 0 {
		t.Fatalf("key not clamped: %x", k)
	}
	p, err := Parse(k.String())
	if err != nil || p != k {
		t.Fatalf("round trip: %v %v", p, err)
	}
	if k.Public().IsZero() {
		t.Fatal("zero public key")
	}
}

func TestParseErrors(t *testing.T) {
	for _, s := range []string{"", "not base64!", "AAAA"} {
		if _, err := Parse(s); !errors.Is(err, ErrBadKey) {
			t.Errorf("Parse(%q) err = %v, want ErrBadKey", s, err)
		}
	}
}

// lowOrderPoints are the u-coordinates of small order on Curve25519 and its
// twist, as libsodium and others list them (little-endian, as on the wire):
// 0, 1, the two points of order 8, p−1, and the non-canonical p and p+1.
var lowOrderPoints = []string{
	"0000000000000000000000000000000000000000000000000000000000000000", // 0
	"0100000000000000000000000000000000000000000000000000000000000000", // 1
	"e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800", // order 8
	"5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157", // order 8
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // p−1
	"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // p
	"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // p+1
}

func TestIsLowOrder(t *testing.T) {
	for _, h := range lowOrderPoints {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != Len {
			t.Fatalf("bad test vector %s", h)
		}
		var k Key
		copy(k[:], b)
		// X25519 ignores the top bit, so each point has a second encoding.
		hi := k
		hi[31] |= 0x80
		for _, k := range []Key{k, hi} {
			if !k.IsLowOrder() {
				t.Errorf("%x: IsLowOrder = false", k)
			}
			err := k.CheckPublic()
			if !errors.Is(err, ErrBadKey) || !errors.Is(err, ErrLowOrder) {
				t.Errorf("%x: CheckPublic = %v, want ErrBadKey and ErrLowOrder", k, err)
			}
		}
	}

	// Real public keys: RFC 7748's two, fresh ones, and one with the top bit set.
	good := []string{
		"hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=", // RFC 7748 §6.1 Alice
		"3p7bfXt9wbTTW2HC7OQ1Nz+DQ8hbeGdNrfx+FG+IK08=", // RFC 7748 §6.1 Bob
	}
	for range 100 {
		priv, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		good = append(good, priv.Public().String())
	}
	for _, s := range good {
		k, err := Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		k2 := k
		k2[31] |= 0x80
		for _, k := range []Key{k, k2} {
			if k.IsLowOrder() {
				t.Errorf("%s: IsLowOrder = true", k)
			}
			if err := k.CheckPublic(); err != nil {
				t.Errorf("%s: CheckPublic = %v", k, err)
			}
		}
	}
}
