package runner

import (
	"context"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/braid-vpn/braid/netns"
)

// Every driver's proof that a download took the way under test is the
// Dialer's Via check: a connection from outside Via must be refused, one
// from inside it kept, and From must be the connection's local address.
func TestDialerVia(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace")
	}
	ns, err := netns.New("braid-rdial")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if err := ns.SetUp("lo"); err != nil {
		t.Fatal(err)
	}
	web, err := StartWeb(ns, netip.MustParseAddr("127.0.0.1"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	addr := netip.AddrPortFrom(web.Addr, WebPort).String()
	ctx := context.Background()

	from := netip.MustParseAddr("127.0.0.2")
	c, err := Dialer{NS: ns, From: from, Via: netip.MustParsePrefix("127.0.0.0/8")}.Dial(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("from inside Via: %v", err)
	}
	if got := netip.MustParseAddrPort(c.LocalAddr().String()).Addr(); got != from {
		t.Errorf("local address %v, want %v", got, from)
	}
	c.Close()

	_, err = Dialer{NS: ns, Via: netip.MustParsePrefix("100.64.0.0/24")}.Dial(ctx, "tcp", addr)
	if err == nil || !strings.Contains(err.Error(), "not from 100.64.0.0/24") {
		t.Errorf("from outside Via: %v, want a refusal", err)
	}
	// UDP is checked the same way (the latency probes through a tunnel).
	_, err = Dialer{NS: ns, Via: netip.MustParsePrefix("100.64.0.0/24")}.Dial(ctx, "udp", addr)
	if err == nil || !strings.Contains(err.Error(), "udp4 connection left from") {
		t.Errorf("UDP from outside Via: %v, want a refusal", err)
	}
}
