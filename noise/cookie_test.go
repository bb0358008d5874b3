package noise

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/braid-vpn/braid/wire"
)

// The cookie round trip: a reply to one source lets that source's next initiation
// pass mac2, and no other source's; the reply is smaller than the initiation.
func TestCookieRoundTrip(t *testing.T) {
	cli, srv := fixedKey(1), fixedKey(2)
	msg, st, err := CreateInitiation(cli, srv.Public(), noPSK, idxCli, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	src := netip.AddrPortFrom(srcA, 4000)
	jar := NewCookieJar(srv.Public())
	if jar.CheckMAC2(msg, src, t0) {
		t.Fatal("an initiation without a cookie passes mac2")
	}
	reply, err := jar.AppendReply(nil, msg, src, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(reply) != wire.CookieReplyLen || len(reply) >= len(msg) {
		t.Fatalf("reply is %d bytes for a %d-byte initiation: no amplification allowed", len(reply), len(msg))
	}
	if idx, ok := PeekCookieReceiver(reply); !ok || idx != idxCli {
		t.Fatalf("reply receiver %#x %v, want %#x", idx, ok, idxCli)
	}
	c, err := ConsumeCookieReply(reply, srv.Public(), st.MAC1())
	if err != nil {
		t.Fatal(err)
	}
	next, st2, _ := CreateInitiation(cli, srv.Public(), noPSK, idxCli, nil, t0.Add(time.Second))
	SetMAC2(next, c)
	if !jar.CheckMAC2(next, src, t0.Add(time.Second)) {
		t.Fatal("the cookie's source fails mac2")
	}
	for _, other := range []netip.AddrPort{netip.AddrPortFrom(srcA, 4001), netip.AddrPortFrom(srcB, 4000)} {
		if jar.CheckMAC2(next, other, t0.Add(time.Second)) {
			t.Fatalf("another source %v passes with the cookie of %v", other, src)
		}
	}
	// mac2 covers the whole message before it.
	bad := bytes.Clone(next)
	bad[wire.InitHeaderLen] ^= 1
	if jar.CheckMAC2(bad, src, t0.Add(time.Second)) {
		t.Fatal("mac2 does not cover the message")
	}
	// The cookie does not change mac1: copies stay recognisable.
	m1, _ := InitiationMAC1(next)
	if m1 != st2.MAC1() {
		t.Fatal("SetMAC2 changed mac1")
	}
	if err := NewResponder(srv, ResponderConfig{}).CheckInitiation(next); err != nil {
		t.Fatalf("mac1 after SetMAC2: %v", err)
	}
	// A zero cookie clears mac2.
	SetMAC2(next, Cookie{})
	if !bytes.Equal(next[len(next)-wire.MACLen:], make([]byte, wire.MACLen)) {
		t.Fatal("SetMAC2 with no cookie left bytes")
	}
}

// A cookie reply opens only for the initiation it answers and only with the
// server's public key; tampering fails.
func TestCookieReplyBinding(t *testing.T) {
	cli, srv := fixedKey(1), fixedKey(2)
	msg, st, _ := CreateInitiation(cli, srv.Public(), noPSK, idxCli, nil, t0)
	_, other, _ := CreateInitiation(cli, srv.Public(), noPSK, idxCli, nil, t0.Add(time.Second))
	jar := NewCookieJar(srv.Public())
	reply, _ := jar.AppendReply(nil, msg, netip.AddrPortFrom(srcA, 1), t0)
	if _, err := ConsumeCookieReply(reply, srv.Public(), other.MAC1()); !errors.Is(err, ErrCookie) {
		t.Fatalf("reply for another initiation: %v, want ErrCookie", err)
	}
	if _, err := ConsumeCookieReply(reply, fixedKey(3).Public(), st.MAC1()); !errors.Is(err, ErrCookie) {
		t.Fatalf("reply under another server key: %v, want ErrCookie", err)
	}
	for i := 8; i < len(reply); i++ {
		r := bytes.Clone(reply)
		r[i] ^= 1
		if _, err := ConsumeCookieReply(r, srv.Public(), st.MAC1()); err == nil {
			t.Fatalf("flipping byte %d still opens", i)
		}
	}
	if _, err := ConsumeCookieReply(reply[:len(reply)-1], srv.Public(), st.MAC1()); !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated reply: %v", err)
	}
}

// Cookies outlive one rotation of the secret and no more.
func TestCookieRotation(t *testing.T) {
	cli, srv := fixedKey(1), fixedKey(2)
	src := netip.AddrPortFrom(srcA, 4000)
	jar := NewCookieJar(srv.Public())
	msg, st, _ := CreateInitiation(cli, srv.Public(), noPSK, idxCli, nil, t0)
	reply, _ := jar.AppendReply(nil, msg, src, t0)
	c, err := ConsumeCookieReply(reply, srv.Public(), st.MAC1())
	if err != nil {
		t.Fatal(err)
	}
	SetMAC2(msg, c)
	for _, tc := range []struct {
		after time.Duration
		ok    bool
	}{
		{CookieUseFor, true},
		{CookieSecretLifetime + time.Second, true}, // previous secret
		{2*CookieSecretLifetime + 2*time.Second, false},
	} {
		if got := jar.CheckMAC2(msg, src, t0.Add(tc.after)); got != tc.ok {
			t.Errorf("after %v: CheckMAC2 = %v, want %v", tc.after, got, tc.ok)
		}
	}
	// The receiver index in the reply is the initiation's sender index.
	if binary.BigEndian.Uint32(reply[4:]) != idxCli {
		t.Fatal("reply index")
	}
}

// Reply nonces never repeat (they come from a seeded stream, not a syscall each).
func TestCookieReplyNonces(t *testing.T) {
	cli, srv := fixedKey(1), fixedKey(2)
	msg, _, _ := CreateInitiation(cli, srv.Public(), noPSK, idxCli, nil, t0)
	jar := NewCookieJar(srv.Public())
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		r, err := jar.AppendReply(nil, msg, netip.AddrPortFrom(srcA, 1), t0)
		if err != nil {
			t.Fatal(err)
		}
		n := string(r[8:32])
		if seen[n] {
			t.Fatalf("nonce repeated after %d replies", i)
		}
		seen[n] = true
	}
}

func BenchmarkCookieReply(b *testing.B) {
	cli, srv := fixedKey(1), fixedKey(2)
	msg, _, _ := CreateInitiation(cli, srv.Public(), noPSK, idxCli, nil, t0)
	jar := NewCookieJar(srv.Public())
	src := netip.AddrPortFrom(srcA, 1)
	buf := make([]byte, 0, wire.CookieReplyLen)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if !jar.CheckMAC2(msg, src, t0) {
			buf, _ = jar.AppendReply(buf[:0], msg, src, t0)
		}
	}
}

// The cookie a server hands out inside a session (Current) is the one a reply
// would carry, passes mac2, and changes with the secret, whose epoch Epoch
// reports: that change is when the server sends a new one.
func TestCookieCurrentAndEpoch(t *testing.T) {
	cli, srv := fixedKey(1), fixedKey(2)
	src := netip.AddrPortFrom(srcA, 4000)
	jar := NewCookieJar(srv.Public())
	e0 := jar.Epoch(t0)
	c := jar.Current(src, t0)
	msg, _, err := CreateInitiation(cli, srv.Public(), noPSK, idxCli, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	SetMAC2(msg, c)
	if !jar.CheckMAC2(msg, src, t0.Add(time.Minute)) {
		t.Fatal("an initiation with the session cookie fails mac2")
	}
	if jar.CheckMAC2(msg, netip.AddrPortFrom(srcA, 4001), t0) {
		t.Fatal("the cookie of one port passes for another")
	}
	if e := jar.Epoch(t0.Add(CookieSecretLifetime - time.Second)); e != e0 {
		t.Fatalf("epoch moved from %d to %d before the secret was due", e0, e)
	}
	later := t0.Add(CookieSecretLifetime)
	if e := jar.Epoch(later); e != e0+1 {
		t.Fatalf("epoch %d after the secret's lifetime, want %d", e, e0+1)
	}
	if jar.Current(src, later) == c {
		t.Fatal("the cookie did not change with the secret")
	}
	// Made under the previous secret, it still passes for one more lifetime.
	if !jar.CheckMAC2(msg, src, later.Add(time.Minute)) {
		t.Fatal("a cookie of the previous secret fails mac2")
	}
}
