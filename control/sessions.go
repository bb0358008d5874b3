package control

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"
)

// Paths that ServeMetricsOn serves beside /metrics, for load balancers
// (package balance, cloud health checks); docs/control.md describes them.
const (
	// HealthPath answers 200 "ok" while the daemon serves: a process that
	// was killed or stopped, or a host that is gone, stops answering, which
	// is what a balancer must notice. It does not probe the engine.
	HealthPath = "/healthz"
	// SessionsPath lists the established sessions as a JSON array of
	// Session, so a balancer can route each client's inner prefixes to the
	// server that holds its session.
	SessionsPath = "/sessions"
)

// sessionsTTL is how long a built SessionsPath page is served again: short,
// since a balancer moves a client's routes when it sees the client's new
// session there, yet enough to build it once for balancers polling together.
const sessionsTTL = 100 * time.Millisecond

// Session is one established session in the SessionsPath document.
type Session struct {
	PublicKey  string   `json:"public_key"`
	AllowedIPs []string `json:"allowed_ips"`
	// LastHandshake tells the newer of two sessions of one client (on two
	// servers, after a failover) apart.
	LastHandshake time.Time `json:"last_handshake"`
	SessionIndex  uint32    `json:"session_index"`
}

// Sessions returns the established sessions in s.
func (s *Status) Sessions() []Session {
	out := []Session{}
	for _, p := range s.Peers {
		if p.Established {
			out = append(out, Session{PublicKey: p.PublicKey, AllowedIPs: p.AllowedIPs, LastHandshake: p.LastHandshake, SessionIndex: p.SessionIndex})
		}
	}
	return out
}

func serveHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte("ok\n"))
}

func (c *Collector) appendSessions(b *bytes.Buffer) {
	s := c.provider()
	json.NewEncoder(b).Encode(s.Sessions())
}
