package console

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-vpn/braid/control"
)

// fakeEngine is a server with n clients of two paths each, whose counters the
// test moves, and which records what the console asked of it.
type fakeEngine struct {
	mu       sync.Mutex
	st       control.Status
	statuses int        // whole snapshots taken
	asked    [][]string // keys of each Peers call
}

func newFakeEngine(n int) *fakeEngine {
	e := &fakeEngine{st: control.Status{Role: "server", Interface: "braid0", PublicKey: "SERVER=", Uptime: time.Minute}}
	for i := range n {
		key := string(rune('A'+i%26)) + strings.Repeat("x", i/26) + "="
		e.st.Peers = append(e.st.Peers, control.PeerStatus{Name: "client-" + key[:1], PublicKey: key, Established: true,
			AllowedIPs: []string{"100.64.0.2/32"},
			Paths: []control.PathStatus{
				{ID: 0, State: "active", Device: "eth0", SRTTMs: 20, MTU: 1452},
				{ID: 1, State: "active", Device: "wwan0", SRTTMs: 45, Budget: "10GiB/month", BudgetUsed: 1 << 30, BudgetBytes: 10 << 30},
			}})
	}
	return e
}

func (e *fakeEngine) status() control.Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.statuses++
	s := e.st
	s.Peers = slices.Clone(e.st.Peers)
	for i := range s.Peers {
		s.Peers[i].Paths = slices.Clone(s.Peers[i].Paths)
	}
	return s
}

func (e *fakeEngine) peers(keys []string) []control.PeerStatus {
	e.mu.Lock()
	e.asked = append(e.asked, slices.Clone(keys))
	e.mu.Unlock()
	var out []control.PeerStatus
	for _, p := range e.status().Peers {
		if slices.Contains(keys, p.PublicKey) {
			out = append(out, p)
		}
	}
	e.mu.Lock()
	e.statuses-- // not a whole snapshot
	e.mu.Unlock()
	return out
}

// move adds bytes to every path's counters: rx on path 0, tx on path 1.
func (e *fakeEngine) move(rx, tx uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range e.st.Peers {
		e.st.Peers[i].Paths[0].RxBytes += rx
		e.st.Peers[i].Paths[1].TxBytes += tx
	}
}

func (e *fakeEngine) console(o Options) *Console {
	o.Source = Source{Status: e.status, Peers: e.peers}
	return New(o)
}

func get(t *testing.T, h http.Handler, target string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest("GET", target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestStaticAssets(t *testing.T) {
	h := newFakeEngine(1).console(Options{}).Handler()
	for _, tc := range []struct{ path, ctype, has string }{
		{"/", "text/html; charset=utf-8", `<script src="app.js">`},
		{"/app.js", "text/javascript; charset=utf-8", "api/live"},
		{"/uPlot.iife.min.js", "text/javascript; charset=utf-8", "uPlot"},
		{"/uPlot.min.css", "text/css; charset=utf-8", ".uplot"},
		{"/style.css", "text/css; charset=utf-8", "body"},
		{"/uPlot.LICENSE.txt", "text/plain; charset=utf-8", "MIT"},
	} {
		w := get(t, h, tc.path)
		if w.Code != 200 || w.Header().Get("Content-Type") != tc.ctype || !strings.Contains(w.Body.String(), tc.has) {
			t.Errorf("%s: %d %q, body has %q: %v", tc.path, w.Code, w.Header().Get("Content-Type"), tc.has, strings.Contains(w.Body.String(), tc.has))
		}
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("%s: CSP %q", tc.path, csp)
		}
	}
	for _, p := range []string{"/index.html/x", "/nope.js", "/assets/app.js", "/api/"} {
		if w := get(t, h, p); w.Code != 404 {
			t.Errorf("%s: %d, want 404", p, w.Code)
		}
	}
	r := httptest.NewRequest("POST", "/api/live", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /api/live: %d, want 405", w.Code)
	}
}

// The target: the page with its charting library within 300 KB.
func TestPageWeight(t *testing.T) {
	total := 0
	fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".txt") {
			b, _ := fs.ReadFile(assets, p)
			total += len(b)
		}
		return nil
	})
	t.Logf("page weight: %d bytes", total)
	if total > 300<<10 || total < 50<<10 {
		t.Fatalf("page weight %d bytes; want ≤ 300 KiB (and the library in it)", total)
	}
}

func TestOverview(t *testing.T) {
	e := newFakeEngine(3)
	h := e.console(Options{}).Handler()
	w := get(t, h, "/api/overview")
	var o overview
	if err := json.Unmarshal(w.Body.Bytes(), &o); err != nil || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%v %q: %s", err, w.Header().Get("Content-Type"), w.Body)
	}
	if o.Role != "server" || len(o.Peers) != 3 || o.Peers[1].Name != "client-B" || o.Peers[1].Up != 2 || o.Peers[1].Paths != 2 {
		t.Fatalf("overview %+v", o)
	}
	// Served again within the second without another snapshot.
	get(t, h, "/api/overview")
	if e.statuses != 1 {
		t.Fatalf("%d snapshots for two requests within a second", e.statuses)
	}
}

func liveOf(t *testing.T, h http.Handler, target string) live {
	t.Helper()
	w := get(t, h, target)
	if w.Code != 200 {
		t.Fatalf("%s: %d %s", target, w.Code, w.Body)
	}
	var l live
	if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// A server records the history of the watched clients only, asks the engine
// for those alone, and forgets them once no page asks.
func TestWatchedHistoryOnly(t *testing.T) {
	e := newFakeEngine(1000)
	c := e.console(Options{})
	h := c.Handler()
	// Now, not a fixed time: a watch lasts watchTTL from the request.
	t0 := time.Now().Truncate(time.Second)
	// Nobody watches: nothing asked, nothing kept.
	c.sample(t0)
	if len(e.asked) != 0 || e.statuses != 0 || c.historyBytes() != 0 {
		t.Fatalf("unwatched: asked %v, %d snapshots, %d bytes of history", e.asked, e.statuses, c.historyBytes())
	}

	l := liveOf(t, h, "/api/live?peer=B=&peer=NOPE=")
	if len(l.Peers) != 1 || l.Peers[0].Status.PublicKey != "B=" || len(l.Peers[0].Status.Paths) != 2 {
		t.Fatalf("live: %+v", l)
	}
	e.asked = nil
	for s := range 5 {
		e.move(125_000, 250_000) // 1 and 2 Mbit/s
		c.sample(t0.Add(time.Duration(s) * time.Second))
	}
	for _, keys := range e.asked {
		if !slices.Equal(keys, []string{"B="}) {
			t.Fatalf("the sampler asked for %v, want B= alone", keys)
		}
	}
	if e.statuses != 0 {
		t.Fatalf("the sampler took %d whole snapshots", e.statuses)
	}
	if n := c.historyBytes(); n == 0 || n > 2*20<<10 {
		t.Fatalf("history of one client's two paths: %d bytes", n)
	}

	l = liveOf(t, h, "/api/live?peer=B=")
	hist := l.Peers[0].Paths
	p0, p1 := hist["0"], hist["1"]
	if len(p0.Rx) != 5 || p0.From != t0.Unix() || l.Now != t0.Unix()+4 {
		t.Fatalf("history %+v, now %d", hist, l.Now)
	}
	// The first sample has no rate yet (no previous counters): null, which
	// reads back as 0; the raw body says null.
	if w := get(t, h, "/api/live?peer=B="); !strings.Contains(w.Body.String(), `"rx_bps":[null,1e+06,`) {
		t.Errorf("the first second is not a gap: %s", w.Body)
	}
	if p0.Rx[0] != 0 || p0.Rx[1] != 1e6 || p0.Tx[1] != 0 || p1.Tx[4] != 2e6 || p1.RTT[4] != 45 {
		t.Fatalf("path 0 %+v, path 1 %+v", p0, p1)
	}
	// since: only the newer samples.
	e.move(125_000, 0)
	c.sample(t0.Add(5 * time.Second))
	l = liveOf(t, h, "/api/live?peer=B=&since="+itoa(l.Now))
	if got := l.Peers[0].Paths["0"]; got.From != t0.Unix()+5 || len(got.Rx) != 1 {
		t.Fatalf("since: %+v", got)
	}

	// No page for watchTTL: the history goes, and the sampler asks nothing.
	c.sample(t0.Add(watchTTL + 2*time.Second))
	e.asked = nil
	c.sample(t0.Add(watchTTL + 3*time.Second))
	if c.historyBytes() != 0 || len(e.asked) != 0 {
		t.Fatalf("after the page left: %d bytes, asked %v", c.historyBytes(), e.asked)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestWatchLimits(t *testing.T) {
	e := newFakeEngine(maxWatched + 20)
	c := e.console(Options{})
	h := c.Handler()
	keys := make([]string, 0, len(e.st.Peers))
	for _, p := range e.st.Peers {
		keys = append(keys, p.PublicKey)
	}
	q := "/api/live?peer=" + strings.Join(keys[:maxWatchPerRequest+1], "&peer=")
	if w := get(t, h, q); w.Code != http.StatusBadRequest {
		t.Fatalf("%d peers in a request: %d, want 400", maxWatchPerRequest+1, w.Code)
	}
	if w := get(t, h, "/api/live?peer=A=&since=x"); w.Code != http.StatusBadRequest {
		t.Fatalf("since=x: %d, want 400", w.Code)
	}
	for i := 0; i < len(keys); i += maxWatchPerRequest {
		get(t, h, "/api/live?peer="+strings.Join(keys[i:min(i+maxWatchPerRequest, len(keys))], "&peer="))
	}
	if n := len(c.watched(time.Now())); n != maxWatched {
		t.Fatalf("%d peers watched, want the cap %d", n, maxWatched)
	}
}

// A client keeps its peer's history without a page (and none for its paths
// waiting for an interface, which have no socket and share the ID -1).
func TestWatchAll(t *testing.T) {
	e := newFakeEngine(1)
	waiting := control.PathStatus{ID: -1, Local: "wwan1", Device: "wwan1", State: "waiting"}
	e.st.Peers[0].Paths = append(e.st.Peers[0].Paths, waiting, waiting)
	c := e.console(Options{WatchAll: true})
	t0 := time.Unix(1_800_000_000, 0)
	for s := range 3 {
		e.move(1000, 1000)
		c.sample(t0.Add(time.Duration(s) * time.Second))
	}
	l := liveOf(t, c.Handler(), "/api/live?peer=A=")
	if got := l.Peers[0].Paths["1"]; len(got.Tx) != 3 || got.Tx[2] != 8000 || len(l.Peers[0].Paths) != 2 {
		t.Fatalf("history %+v", l.Peers[0].Paths)
	}
}

func TestToken(t *testing.T) {
	const token = "0123456789abcdef0123"
	h := newFakeEngine(1).console(Options{Token: token}).Handler()
	for _, p := range []string{"/", "/app.js", "/api/overview", "/api/live?peer=A=", "/?token=wrong-token-wrong-token"} {
		if w := get(t, h, p); w.Code != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d, want 401", p, w.Code)
		}
	}
	if w := get(t, h, "/api/overview", "Authorization", "Bearer "+token); w.Code != 200 {
		t.Errorf("with a bearer token: %d", w.Code)
	}
	if w := get(t, h, "/api/overview", "Authorization", "Bearer "+token+"x"); w.Code != 401 {
		t.Errorf("with a longer token: %d", w.Code)
	}
	// Opening /?token= sets the session cookie and sends the browser to /.
	w := get(t, h, "/?token="+token)
	ck := w.Result().Cookies()
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/" || len(ck) != 1 || !ck[0].HttpOnly || ck[0].Value == token {
		t.Fatalf("/?token=: %d %q %+v", w.Code, w.Header().Get("Location"), ck)
	}
	if w := get(t, h, "/api/live?peer=A=", "Cookie", cookieName+"="+ck[0].Value); w.Code != 200 {
		t.Errorf("with the cookie: %d", w.Code)
	}
	if w := get(t, h, "/api/live?peer=A=", "Cookie", cookieName+"="+sessionValue("another-token-here")); w.Code != 401 {
		t.Errorf("with another token's cookie: %d", w.Code)
	}
}

// Served through control.ServeHTTP: on loopback a foreign Host is refused
// (DNS rebinding), and with a certificate it speaks TLS.
func TestServe(t *testing.T) {
	e := newFakeEngine(1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, Options{Source: Source{Status: e.status}}, nil) }()
	url := "http://" + ln.Addr().String()
	if code := fetch(t, http.DefaultClient, url+"/api/live?peer=A=", ""); code != 200 {
		t.Errorf("loopback: %d", code)
	}
	if code := fetch(t, http.DefaultClient, url+"/", "rebound.example"); code != http.StatusMisdirectedRequest {
		t.Errorf("Host rebound.example: %d, want 421", code)
	}

	ts := httptest.NewTLSServer(http.NotFoundHandler()) // for its certificate and a client that trusts it
	defer ts.Close()
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go Serve(ctx, tln, Options{Source: Source{Status: e.status}, Token: "0123456789abcdef"}, &tls.Config{Certificates: ts.TLS.Certificates})
	turl := "https://" + tln.Addr().String()
	if code := fetch(t, ts.Client(), turl+"/api/overview", ""); code != 401 {
		t.Errorf("TLS without the token: %d, want 401", code)
	}
	req, _ := http.NewRequest("GET", turl+"/api/overview", nil)
	req.Header.Set("Authorization", "Bearer 0123456789abcdef")
	resp, err := ts.Client().Do(req)
	if err != nil || resp.StatusCode != 200 || resp.TLS == nil {
		t.Fatalf("TLS with the token: %v %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func fetch(t *testing.T, c *http.Client, url, host string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// The console's cost a second with a page open: one sample of the watched
// peer and one poll that takes the newest second of its history.
func BenchmarkPollAndSample(b *testing.B) {
	e := newFakeEngine(1)
	c := e.console(Options{})
	h := c.Handler()
	t0 := time.Now().Truncate(time.Second)
	get := func(target string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", target, nil))
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
	get("/api/live?peer=A=")
	for s := range historyLen { // a full history
		e.move(1000, 1000)
		c.sample(t0.Add(time.Duration(s-historyLen) * time.Second))
	}
	b.Run("first-load", func(b *testing.B) {
		for range b.N {
			get("/api/live?peer=A=")
		}
	})
	b.Run("second", func(b *testing.B) {
		for i := range b.N {
			c.sample(t0.Add(time.Duration(i) * time.Second))
			get("/api/live?peer=A=&since=" + itoa(t0.Unix()+int64(i)-1))
		}
	})
}
