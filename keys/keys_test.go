package keys

import (
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
