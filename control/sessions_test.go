package control

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
)

// The endpoints a balancer reads: /healthz answers "ok", /sessions lists the
// established sessions with their allowed IPs and handshake times, and not
// the peers without keys.
func TestServeHealthAndSessions(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st := sample()
	idle := st.Peers[0]
	idle.PublicKey, idle.Established = "IDLEKEY=", false
	st.Peers = append(st.Peers, idle)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ServeMetricsOn(ctx, ln, NewCollector(func() Status { return st }))
	get := func(path string) []byte {
		t.Helper()
		resp, err := http.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
		}
		return body
	}
	if body := string(get(HealthPath)); body != "ok\n" {
		t.Errorf("%s: %q", HealthPath, body)
	}
	var got []Session
	if err := json.Unmarshal(get(SessionsPath), &got); err != nil {
		t.Fatal(err)
	}
	p := sample().Peers[0]
	if len(got) != 1 || got[0].PublicKey != p.PublicKey || !slices.Equal(got[0].AllowedIPs, p.AllowedIPs) ||
		!got[0].LastHandshake.Equal(p.LastHandshake) || got[0].SessionIndex != p.SessionIndex {
		t.Errorf("%s: %+v, want the one established peer %s", SessionsPath, got, p.PublicKey)
	}
}
