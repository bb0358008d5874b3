package control

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"golang.org/x/time/rate"
)

// The daemon's HTTP endpoints (the metrics page, the console) are served
// by net/http, with limits that keep a hostile client from holding the
// endpoint or the data path: a daemon should not own an HTTP parser.
const (
	// maxHeaderBytes bounds a request's head (a scraper sends a few hundred
	// bytes).
	maxHeaderBytes = 8 << 10
	// readHeaderTimeout closes a connection that has not sent a whole
	// request head this long after it opened or its last response.
	readHeaderTimeout = 5 * time.Second
	// writeTimeout bounds the time from the end of a request's head to the
	// end of its response.
	writeTimeout = 10 * time.Second
	// idleTimeout closes a kept-alive connection that sends no further
	// request (Prometheus scrapes every minute at most by default).
	idleTimeout = 2 * time.Minute
	// maxConns caps the open connections; at the cap the oldest that is
	// not being served is closed for each new one.
	maxConns = 64
	// pageTTL is how long a built page is served again: parallel scrapes
	// snapshot the engine once, not once each.
	pageTTL = time.Second
	// pagesPerSecond and pageBurst bound how often a cached page is sent:
	// a request past them waits its turn (up to pageWait, then 429), so
	// clients that fetch back to back cannot take the data path's CPU
	// (a scraper fetches once every 15–60 s).
	pagesPerSecond = 50
	pageBurst      = 50
	pageWait       = 5 * time.Second
	// shutdownGrace is how long requests in progress may finish once ctx
	// is done.
	shutdownGrace = 2 * time.Second
)

// contentType is the text format's media type, as Prometheus expects it.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// ServeMetrics serves c at http://addr/metrics (and HealthPath and
// SessionsPath for load balancers) until ctx is done. On a
// loopback address it answers only requests for a loopback host (a web page
// cannot read it by DNS rebinding); elsewhere it serves anyone who can reach
// addr.
func ServeMetrics(ctx context.Context, addr string, c *Collector) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return ServeMetricsOn(ctx, ln, c)
}

// ServeMetricsOn is ServeMetrics on a listener the caller opened (tests use
// 127.0.0.1:0 and need to know the port). It closes ln, and returns nil once
// ctx is done and the connections are closed.
//
// The page holds c's metrics alone, without the Go runtime and process
// metrics that client_golang's default registry would add, so the endpoint
// shows braid's metrics and two instances in one process (as in tests)
// cannot collide.
func ServeMetricsOn(ctx context.Context, ln net.Listener, c *Collector) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", newPage("/metrics", contentType, c.appendText))
	mux.HandleFunc("GET "+HealthPath, serveHealth)
	sessions := newPage(SessionsPath, "application/json", c.appendSessions)
	sessions.ttl = sessionsTTL
	mux.Handle(SessionsPath, sessions)
	return serveHTTP(ctx, ln, mux)
}

// ServeHTTP serves h on ln with the limits of the metrics endpoint (timeouts,
// head size, connection cap, the Host check on loopback) until ctx is done;
// the console (package console) is served through it. ln may be a TLS
// listener: the checks look at the address under it.
func ServeHTTP(ctx context.Context, ln net.Listener, h http.Handler) error {
	return serveHTTP(ctx, ln, h)
}

// CachedPage returns a handler of GET and HEAD of path that serves what build
// writes, built at most once per second however many clients ask (see page).
func CachedPage(path, ctype string, build func(*bytes.Buffer)) http.Handler {
	return newPage(path, ctype, build)
}

func newPage(path, ctype string, build func(*bytes.Buffer)) *page {
	return &page{path: path, build: build, ctype: ctype, ttl: pageTTL, sends: rate.NewLimiter(pagesPerSecond, pageBurst)}
}

// serveHTTP serves h on ln with the limits above until ctx is done.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler) error {
	if isLoopback(ln.Addr()) {
		h = loopbackHostOnly(h)
	}
	conns := newConnTracker(maxConns)
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         conns.track,
		// Malformed requests are the client's problem, not the daemon's log's.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}()
	err := srv.Serve(netutil.LimitListener(ln, maxConns))
	if errors.Is(err, http.ErrServerClosed) {
		<-done
		return nil
	}
	return err
}

// isLoopback reports whether a listener's address is a loopback one.
func isLoopback(a net.Addr) bool {
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && ap.Addr().IsLoopback()
}

// loopbackHostOnly answers 421 to a request whose Host is not a loopback
// address or "localhost": a browser that a web page pointed at the port
// through a rebound DNS name sends that name, and learns nothing. (An
// HTTP/1.0 request without Host passes: browsers always send one.)
func loopbackHostOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if hp, _, err := net.SplitHostPort(host); err == nil {
			host = hp
		}
		ip, err := netip.ParseAddr(host)
		if host != "" && host != "localhost" && (err != nil || !ip.IsLoopback()) {
			http.Error(w, "421 this endpoint answers only for localhost or a loopback address", http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// page serves a document that is expensive to build (it snapshots every
// peer): built at most once per pageTTL, outside any lock the data path
// takes, and shared by the requests of that second.
type page struct {
	path  string
	build func(*bytes.Buffer)
	ctype string
	ttl   time.Duration
	sends *rate.Limiter // pages sent, all clients together

	mu   sync.Mutex
	at   time.Time
	body []byte
}

func (p *page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != p.path {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), pageWait)
	err := p.sends.Wait(ctx)
	cancel()
	if err != nil {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "429 too many requests for this page", http.StatusTooManyRequests)
		return
	}
	body := p.get(time.Now())
	w.Header().Set("Content-Type", p.ctype)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
}

func (p *page) get(now time.Time) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.body == nil || now.Sub(p.at) >= p.ttl || now.Before(p.at) {
		var b bytes.Buffer
		p.build(&b)
		p.body, p.at = b.Bytes(), now
	}
	return p.body
}

// connTracker closes the oldest connection not being served whenever the
// connection cap is reached, so that idle or silent connections cannot keep
// a scraper out (netutil.LimitListener alone would make it wait for them).
type connTracker struct {
	max   int
	mu    sync.Mutex
	conns map[net.Conn]connInfo
}

type connInfo struct {
	since  time.Time
	active bool
}

func newConnTracker(max int) *connTracker {
	return &connTracker{max: max, conns: make(map[net.Conn]connInfo)}
}

func (t *connTracker) track(c net.Conn, state http.ConnState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch state {
	case http.StateNew:
		t.conns[c] = connInfo{since: time.Now()}
		if len(t.conns) >= t.max {
			t.evictOldest(c)
		}
	case http.StateActive:
		t.conns[c] = connInfo{since: t.conns[c].since, active: true}
	case http.StateIdle:
		t.conns[c] = connInfo{since: time.Now()}
	case http.StateHijacked, http.StateClosed:
		delete(t.conns, c)
	}
}

// evictOldest closes the connection other than keep that has waited longest
// without a request in progress. Its slot returns to the listener when
// net/http sees the close.
func (t *connTracker) evictOldest(keep net.Conn) {
	var oldest net.Conn
	var at time.Time
	for c, info := range t.conns {
		if c != keep && !info.active && (oldest == nil || info.since.Before(at)) {
			oldest, at = c, info.since
		}
	}
	if oldest != nil {
		oldest.Close()
		delete(t.conns, oldest)
	}
}
