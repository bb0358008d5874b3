// Package console serves braid's status page: a live view of each peer's
// paths (state, tier, RTT, loss, rates, share, MTU, budget) with charts of
// each path's rate and RTT over the last ten minutes, and on a server a
// searchable list of the clients. See docs/console.md.
//
// The page is static (embedded, no build step); it polls two JSON endpoints:
//
//   - /api/overview: the instance and a one-line summary of every peer, built
//     from one status snapshot at most once a second (control.CachedPage);
//   - /api/live?peer=KEY&since=SEC: the full status of the peers the page
//     watches and their history after second SEC.
//
// History is recorded only for the peers that a page has asked for in the
// last watchTTL (or, with Options.WatchAll, for every peer: a client has
// one), by a sampler that asks the engine for those peers alone once a second
// and does nothing while no page is open. So a server with a thousand clients
// pays for the few that someone looks at.
package console

import (
	"bytes"
	"context"
	"crypto/tls"
	"embed"
	"encoding/json"
	"io/fs"
	"net"
	"net/http"
	"path"
	"slices"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/braid-vpn/braid/control"
)

//go:embed assets
var assets embed.FS

const (
	// watchTTL is how long a peer stays watched after a page last asked for
	// it: a page polls every second, so this outlives a slow poll or two.
	watchTTL = 15 * time.Second
	// maxWatchPerRequest bounds the peers one request may name, and
	// maxWatched those watched at once (100 peers of a few paths stay near
	// the 1 MB the history may take for 100 paths; see ring).
	maxWatchPerRequest = 16
	maxWatched         = 100
	// sampleEvery is the history's resolution.
	sampleEvery = time.Second
)

// Source is what the console reads of the daemon.
type Source struct {
	// Status is a whole snapshot, for the overview and the client list.
	Status func() control.Status
	// Peers is the status of the peers with these public keys only (their
	// order does not matter). Nil: filtered from Status, at its cost.
	Peers func(keys []string) []control.PeerStatus
}

// Options configure a console.
type Options struct {
	Source Source
	// Token, when set, is required of every request (see auth.go).
	Token string
	// WatchAll records every peer's history, watched or not: for a client,
	// whose one peer is worth ten minutes of history when a page opens.
	WatchAll bool
}

// Console is the status page and the history behind it.
type Console struct {
	src      Source
	token    string
	watchAll bool
	handler  http.Handler

	mu    sync.Mutex
	peers map[string]*peerHist // by public key
}

// peerHist is the history of one watched peer.
type peerHist struct {
	until time.Time // watched until then
	paths map[int]*pathHist
}

// pathHist is a path's ring and the counters of its previous sample, from
// which the next one's rates are computed.
type pathHist struct {
	ring
	at     time.Time
	tx, rx uint64
}

// New returns a console over o.Source; Run must run for it to record history.
func New(o Options) *Console {
	c := &Console{src: o.Source, token: o.Token, watchAll: o.WatchAll, peers: make(map[string]*peerHist)}
	if c.src.Peers == nil {
		status := c.src.Status
		c.src.Peers = func(keys []string) []control.PeerStatus {
			var out []control.PeerStatus
			for _, p := range status().Peers {
				if slices.Contains(keys, p.PublicKey) {
					out = append(out, p)
				}
			}
			return out
		}
	}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", staticFile(static, "index.html"))
	for _, name := range []string{"app.js", "style.css", "uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE.txt"} {
		mux.Handle("GET /"+name, staticFile(static, name))
	}
	mux.Handle("GET /api/overview", control.CachedPage("/api/overview", "application/json", c.writeOverview))
	mux.HandleFunc("GET /api/live", c.serveLive)
	c.handler = securityHeaders(c.auth(mux))
	return c
}

// Handler is the console's HTTP handler (tests use it with httptest).
func (c *Console) Handler() http.Handler { return c.handler }

// Serve runs the console on ln until ctx is done: the sampler, and the
// handler through control.ServeHTTP's limits, over TLS when tlsConf is set.
func Serve(ctx context.Context, ln net.Listener, o Options, tlsConf *tls.Config) error {
	c := New(o)
	go c.Run(ctx)
	if tlsConf != nil {
		ln = tls.NewListener(ln, tlsConf)
	}
	return control.ServeHTTP(ctx, ln, c.Handler())
}

// Run samples the watched peers once a second, on the second, until ctx is
// done.
func (c *Console) Run(ctx context.Context) {
	for {
		now := time.Now()
		next := now.Truncate(sampleEvery).Add(sampleEvery)
		t := time.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case at := <-t.C:
			c.sample(at)
		}
	}
}

// sample records one second of history for the watched peers (every peer
// with WatchAll) and forgets the peers no page watches any more.
func (c *Console) sample(now time.Time) {
	var peers []control.PeerStatus
	if c.watchAll {
		peers = c.src.Status().Peers
	} else {
		keys := c.watched(now)
		if len(keys) == 0 {
			return
		}
		peers = c.src.Peers(keys)
	}
	sec := now.Unix()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watchAll {
		for k := range c.peers {
			if !slices.ContainsFunc(peers, func(p control.PeerStatus) bool { return p.PublicKey == k }) {
				delete(c.peers, k) // removed by a reload
			}
		}
	}
	for i := range peers {
		p := &peers[i]
		h := c.peers[p.PublicKey]
		if h == nil {
			if !c.watchAll {
				continue // unwatched since the keys were read
			}
			h = &peerHist{paths: make(map[int]*pathHist)}
			c.peers[p.PublicKey] = h
		}
		seen := make(map[int]bool, len(p.Paths))
		for j := range p.Paths {
			ps := &p.Paths[j]
			if ps.ID < 0 {
				continue // a client's path waiting for its interface: no socket yet
			}
			seen[ps.ID] = true
			ph := h.paths[ps.ID]
			if ph == nil {
				ph = &pathHist{}
				h.paths[ps.ID] = ph
			}
			ph.record(sec, now, ps)
		}
		for id := range h.paths {
			if !seen[id] {
				delete(h.paths, id) // the path was removed (a reload)
			}
		}
	}
}

// record puts the rates since the previous sample and the RTT into the ring.
func (ph *pathHist) record(sec int64, now time.Time, ps *control.PathStatus) {
	rx, tx := nan, nan
	if dt := now.Sub(ph.at).Seconds(); !ph.at.IsZero() && dt > 0 && ps.RxBytes >= ph.rx && ps.TxBytes >= ph.tx {
		rx = float32(float64(ps.RxBytes-ph.rx) * 8 / dt)
		tx = float32(float64(ps.TxBytes-ph.tx) * 8 / dt)
	}
	rtt := nan
	if ps.SRTTMs > 0 {
		rtt = float32(ps.SRTTMs)
	}
	ph.put(sec, rx, tx, rtt)
	ph.at, ph.rx, ph.tx = now, ps.RxBytes, ps.TxBytes
}

// watched returns the keys of the watched peers, forgetting the history of
// those no page has asked for within watchTTL.
func (c *Console) watched(now time.Time) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.peers))
	for k, h := range c.peers {
		if now.After(h.until) {
			delete(c.peers, k)
			continue
		}
		keys = append(keys, k)
	}
	return keys
}

// watch marks the peers watched until now+watchTTL, starting the history of
// those not watched yet while fewer than maxWatched are. Only keys of real
// peers (in current) are taken, so that requests cannot fill the map.
func (c *Console) watch(now time.Time, current []control.PeerStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range current {
		k := current[i].PublicKey
		h := c.peers[k]
		if h == nil {
			if len(c.peers) >= maxWatched {
				continue
			}
			h = &peerHist{paths: make(map[int]*pathHist)}
			c.peers[k] = h
		}
		h.until = now.Add(watchTTL)
	}
}

// overview is /api/overview: the instance and one line per peer.
type overview struct {
	Role          string            `json:"role"`
	Interface     string            `json:"interface"`
	PublicKey     string            `json:"public_key"`
	Transport     string            `json:"transport,omitempty"`
	Listen        []string          `json:"listen,omitempty"`
	UptimeSeconds float64           `json:"uptime_seconds"`
	Time          time.Time         `json:"time"`
	Counters      map[string]uint64 `json:"counters,omitempty"`
	Peers         []peerLine        `json:"peers"`
}

type peerLine struct {
	Name          string    `json:"name,omitempty"`
	PublicKey     string    `json:"public_key"`
	AllowedIPs    []string  `json:"allowed_ips,omitempty"`
	Established   bool      `json:"established"`
	LastHandshake time.Time `json:"last_handshake,omitzero"`
	Paths         int       `json:"paths"`
	Up            int       `json:"up"` // paths neither down nor probing/validating
	TxBytes       uint64    `json:"tx_bytes"`
	RxBytes       uint64    `json:"rx_bytes"`
}

func (c *Console) writeOverview(b *bytes.Buffer) {
	s := c.src.Status()
	if s.Time.IsZero() {
		s.Time = time.Now()
	}
	o := overview{Role: s.Role, Interface: s.Interface, PublicKey: s.PublicKey, Transport: s.Transport, Listen: s.Listen,
		UptimeSeconds: s.Uptime.Seconds(), Time: s.Time, Counters: s.Counters, Peers: make([]peerLine, 0, len(s.Peers))}
	for i := range s.Peers {
		p := &s.Peers[i]
		l := peerLine{Name: p.Name, PublicKey: p.PublicKey, AllowedIPs: p.AllowedIPs, Established: p.Established,
			LastHandshake: p.LastHandshake, Paths: len(p.Paths), TxBytes: p.TxBytes, RxBytes: p.RxBytes}
		for _, pa := range p.Paths {
			if pathUp(pa.State) {
				l.Up++
			}
		}
		o.Peers = append(o.Peers, l)
	}
	json.NewEncoder(b).Encode(o)
}

// pathUp reports whether a path in this state carries traffic.
func pathUp(state string) bool { return state == "active" || state == "degraded" }

// live is /api/live: the watched peers now, and their history.
type live struct {
	// Now is the Unix second of the newest sample a later request may ask
	// after (since=Now).
	Now   int64      `json:"now"`
	Peers []livePeer `json:"peers"`
}

type livePeer struct {
	Status control.PeerStatus `json:"status"`
	// From is the Unix second of the first sample in each path's series.
	From  int64              `json:"from"`
	Paths map[string]history `json:"history"` // by path id
}

type history struct {
	From int64  `json:"from"`
	Rx   series `json:"rx_bps"`
	Tx   series `json:"tx_bps"`
	RTT  series `json:"rtt_ms"`
}

func (c *Console) serveLive(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	keys := q["peer"]
	if len(keys) > maxWatchPerRequest {
		http.Error(w, "400 at most "+strconv.Itoa(maxWatchPerRequest)+" peers a request", http.StatusBadRequest)
		return
	}
	var since int64
	if s := q.Get("since"); s != "" {
		var err error
		if since, err = strconv.ParseInt(s, 10, 64); err != nil {
			http.Error(w, "400 since: want a Unix second", http.StatusBadRequest)
			return
		}
	}
	now := time.Now()
	// A fresh status of the watched peers: the table shows a path's state
	// as it is, not as it was at the last sample.
	var current []control.PeerStatus
	if len(keys) > 0 {
		current = c.src.Peers(keys)
	}
	c.watch(now, current)
	out := live{Now: now.Unix() - 1, Peers: make([]livePeer, 0, len(current))}
	c.mu.Lock()
	for i := range current {
		p := livePeer{Status: current[i], Paths: make(map[string]history)}
		if h := c.peers[current[i].PublicKey]; h != nil {
			for id, ph := range h.paths {
				from, rx, tx, rtt := ph.since(since)
				if len(rx) > 0 {
					p.Paths[strconv.Itoa(id)] = history{From: from, Rx: rx, Tx: tx, RTT: rtt}
				}
				out.Now = max(out.Now, ph.last)
			}
		}
		out.Peers = append(out.Peers, p)
	}
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(out)
}

// historyBytes is the memory the recorded history takes (tests hold it to
// the 1 MB per 100 paths).
func (c *Console) historyBytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, h := range c.peers {
		n += len(h.paths) * int(unsafe.Sizeof(pathHist{}))
	}
	return n
}

// staticFile serves one embedded file; the page is small and changes only
// with the binary, so it is sent whole each time (no build step, no ETag).
func staticFile(fsys fs.FS, name string) http.Handler {
	body, err := fs.ReadFile(fsys, name)
	if err != nil {
		panic(err)
	}
	ctype := map[string]string{".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
		".css": "text/css; charset=utf-8", ".txt": "text/plain; charset=utf-8"}[path.Ext(name)]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(body)
	})
}

// securityHeaders keeps the page to its own scripts and out of frames.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}
