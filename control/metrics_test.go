package control

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// scrape returns one page of c's metrics as WriteTo writes it.
func scrape(c *Collector) string {
	var b strings.Builder
	if _, err := c.WriteTo(&b); err != nil {
		panic(err)
	}
	return b.String()
}

// families splits an exposition into its families, by name: each is the
// family's HELP and TYPE lines and its samples. Blank lines are skipped, so
// a test's expected text may start with one.
func families(text string) map[string]string {
	out := map[string]string{}
	var name string
	for line := range strings.Lines(text) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, _, _ = strings.Cut(rest, " ")
		}
		out[name] += line
	}
	return out
}

// compareMetrics compares the named families of one scrape of c with those
// of want, as client_golang's testutil.CollectAndCompare did.
func compareMetrics(c *Collector, want string, names ...string) error {
	got, exp := families(scrape(c)), families(want)
	var errs []error
	for _, n := range names {
		if got[n] != exp[n] {
			errs = append(errs, fmt.Errorf("%s:\ngot:\n%swant:\n%s", n, got[n], exp[n]))
		}
	}
	return errors.Join(errs...)
}

// countSamples is the number of series in one scrape of c.
func countSamples(c *Collector) int {
	n := 0
	for line := range strings.Lines(scrape(c)) {
		if !strings.HasPrefix(line, "#") {
			n++
		}
	}
	return n
}

type parsedSample struct {
	name   string
	labels [][2]string // name, unescaped value, in page order
	value  float64
}

var (
	metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// parseSample parses one sample line of the text format strictly.
func parseSample(line string) (parsedSample, error) {
	var s parsedSample
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("no value: %q", line)
	}
	s.name, line = line[:i], line[i:]
	if line[0] == '{' {
		line = line[1:]
		for {
			eq := strings.Index(line, `="`)
			if eq < 0 {
				return s, fmt.Errorf("bad label in %q", line)
			}
			lname := line[:eq]
			line = line[eq+2:]
			var v strings.Builder
			for {
				if line == "" {
					return s, errors.New("unterminated label value")
				}
				ch := line[0]
				line = line[1:]
				if ch == '"' {
					break
				}
				if ch == '\n' {
					return s, errors.New("raw newline in a label value")
				}
				if ch == '\\' {
					if line == "" {
						return s, errors.New("dangling backslash")
					}
					switch line[0] {
					case '\\', '"':
						v.WriteByte(line[0])
					case 'n':
						v.WriteByte('\n')
					default:
						return s, fmt.Errorf("bad escape \\%c", line[0])
					}
					line = line[1:]
					continue
				}
				v.WriteByte(ch)
			}
			s.labels = append(s.labels, [2]string{lname, v.String()})
			if strings.HasPrefix(line, ",") {
				line = line[1:]
				continue
			}
			if !strings.HasPrefix(line, "}") {
				return s, fmt.Errorf("bad label list at %q", line)
			}
			line = line[1:]
			break
		}
	}
	val, ok := strings.CutPrefix(line, " ")
	if !ok || strings.Contains(val, " ") {
		return s, fmt.Errorf("bad value %q", line)
	}
	f, err := strconv.ParseFloat(val, 64)
	if err != nil {
		return s, err
	}
	s.value = f
	return s, nil
}

// checkExposition parses one scrape of c and checks what a pedantic
// registry did: each family is one of allDescs, with its help, type and
// label names, and no series repeats. It also checks the page's order:
// families sorted by name, labels by name, samples by label values.
func checkExposition(c *Collector) error {
	descs := map[string]*metricDesc{}
	for _, d := range allDescs {
		if descs[d.name] != nil {
			return fmt.Errorf("two descs named %s", d.name)
		}
		descs[d.name] = d
	}
	var (
		cur      *metricDesc
		seen     = map[string]bool{}
		series   = map[string]bool{}
		prevName string
		prevVals []string
		lines    = strings.Split(scrape(c), "\n")
	)
	if lines[len(lines)-1] != "" {
		return errors.New("page does not end in a newline")
	}
	lines = lines[:len(lines)-1]
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, help, _ := strings.Cut(rest, " ")
			d := descs[name]
			if d == nil {
				return fmt.Errorf("unknown family %s", name)
			}
			if seen[name] {
				return fmt.Errorf("family %s twice", name)
			}
			if name < prevName {
				return fmt.Errorf("family %s after %s", name, prevName)
			}
			seen[name], prevName, prevVals = true, name, nil
			if help != helpEscaper.Replace(d.help) {
				return fmt.Errorf("%s: help %q", name, help)
			}
			if i+1 >= len(lines) || lines[i+1] != "# TYPE "+name+" "+d.typ {
				return fmt.Errorf("%s: HELP not followed by its TYPE", name)
			}
			if i+2 >= len(lines) || strings.HasPrefix(lines[i+2], "#") {
				return fmt.Errorf("%s: family without samples", name)
			}
			cur = d
			i++
			continue
		}
		if strings.HasPrefix(line, "#") {
			return fmt.Errorf("stray comment %q", line)
		}
		s, err := parseSample(line)
		if err != nil {
			return err
		}
		if cur == nil || s.name != cur.name {
			return fmt.Errorf("sample %s outside its family", s.name)
		}
		var names, vals []string
		for _, l := range s.labels {
			names, vals = append(names, l[0]), append(vals, l[1])
		}
		want := slices.Sorted(slices.Values(cur.labels))
		if !slices.Equal(names, want) {
			return fmt.Errorf("%s: labels %v, want %v", s.name, names, want)
		}
		if prevVals != nil && slices.Compare(vals, prevVals) <= 0 {
			return fmt.Errorf("%s: series %q not after %q", s.name, vals, prevVals)
		}
		prevVals = vals
		key := s.name + "\x00" + strings.Join(vals, "\x00")
		if series[key] {
			return fmt.Errorf("%s: series %q twice", s.name, vals)
		}
		series[key] = true
	}
	return nil
}

type lintProblem struct{ Metric, Text string }

// lintMetrics checks the families of one scrape of c against the naming
// rules client_golang's promlint checked: counters, and only counters, end
// in _total; names use base units, unabbreviated; every family has help.
func lintMetrics(c *Collector) []lintProblem {
	var out []lintProblem
	nonBase := map[string]string{
		"milliseconds": "seconds", "microseconds": "seconds", "nanoseconds": "seconds",
		"minutes": "seconds", "hours": "seconds", "days": "seconds",
		"bits": "bytes", "kilobytes": "bytes", "megabytes": "bytes", "gigabytes": "bytes",
		"percent": "ratio",
	}
	abbrev := []string{"s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h", "d"}
	for name, block := range families(scrape(c)) {
		problem := func(text string) { out = append(out, lintProblem{name, text}) }
		if !metricNameRE.MatchString(name) {
			problem("invalid metric name")
		}
		typ := ""
		for line := range strings.Lines(block) {
			if rest, ok := strings.CutPrefix(line, "# TYPE "+name+" "); ok {
				typ = strings.TrimSpace(rest)
			}
			if rest, ok := strings.CutPrefix(line, "# HELP "+name); ok && strings.TrimSpace(rest) == "" {
				problem("no help text")
			}
		}
		if total := strings.HasSuffix(name, "_total"); total != (typ == "counter") {
			problem("counter metrics should have \"_total\" suffix, and only counters")
		}
		for _, tok := range strings.Split(name, "_") {
			if base, ok := nonBase[tok]; ok {
				problem(fmt.Sprintf("use base unit %q instead of %q", base, tok))
			}
			if slices.Contains(abbrev, tok) {
				problem("metric names should not contain abbreviated units")
			}
		}
	}
	return out
}

// edgeSample is recoverySample with what the page must escape or spell
// specially: quotes, backslashes and newlines in labels, NaN, infinities,
// negative zero, the largest counter, and two paths with one ID plus an
// exact duplicate path (a repeated series is written once, the first).
func edgeSample() Status {
	s := recoverySample()
	s.Interface = `br\0`
	s.Counters["drop_we\"ird\nreason"] = 1<<64 - 1
	p := &s.Peers[0]
	p.Name = "a\"b\\c\nd"
	p.Paths[0].OWDTrend = math.NaN()
	p.Paths[0].Share = math.Inf(1)
	p.Paths[1].OWDTrend = math.Inf(-1)
	p.Paths[1].Share = math.Copysign(0, -1)
	p.Paths[0].DeliveryRateBps = 1e21
	p.Paths[1].DeliveryRateBps = 1.5e-7
	p.Paths[1].LossRate = -1
	p.Paths[0].QueueDelayMs = 123456789.125
	dup := p.Paths[0]
	dup.CC, dup.Recovery, dup.Local = nil, nil, "10.0.0.1:1"
	p.Paths = append(p.Paths, dup, p.Paths[1])
	return s
}

// TestMetricsGolden compares whole pages with what client_golang v1.25.0
// (registry and promhttp) wrote for the same snapshots before braid dropped
// it: the hand-written exporter must be byte-for-byte the same. The families
// added since (braid_path_mtu_bytes, _priority, _budget_used_bytes, _cc_mode,
// _bandwidth_estimate_bps, _budget_allowance_bytes) were added to the files from the exporter's own
// output; checkExposition and the lint below cover them as the others.
func TestMetricsGolden(t *testing.T) {
	for _, tc := range []struct {
		file     string
		provider func() Status
	}{{"testdata/metrics_recovery.prom", recoverySample}, {"testdata/metrics_edge.prom", edgeSample}} {
		want, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		if got := scrape(NewCollector(tc.provider)); got != string(want) {
			t.Errorf("%s differs:\n%s", tc.file, got)
		}
	}
	// Every family appears in the recovery sample, so the check covers all.
	c := NewCollector(recoverySample)
	if n := len(families(scrape(c))); n != len(allDescs) {
		t.Errorf("recovery sample has %d families, want all %d", n, len(allDescs))
	}
	if err := checkExposition(c); err != nil {
		t.Error(err)
	}
	for _, p := range lintMetrics(c) {
		if p.Metric == "braid_path_delivery_rate_bits" && strings.Contains(p.Text, `"bits"`) {
			continue
		}
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestMetricsEscapingAndUTF8(t *testing.T) {
	s := sample()
	s.Peers[0].Paths[0].Device = "eth\xff1"
	page := scrape(NewCollector(func() Status { return s }))
	if !strings.Contains(page, `device="eth`+"\uFFFD"+`1"`) {
		t.Errorf("invalid UTF-8 not replaced:\n%s", page)
	}
	// The parser reads back what the writer escaped.
	smp, err := parseSample(`m{a="x\"y\\z\nw",b=""} -Inf`)
	if err != nil || smp.labels[0][1] != "x\"y\\z\nw" || smp.labels[1][1] != "" || !math.IsInf(smp.value, -1) {
		t.Errorf("parseSample = %+v, %v", smp, err)
	}
}

func TestAppendFloat(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "0"}, {1, "1"}, {-1, "-1"}, {0.1, "0.1"}, {3723.4, "3723.4"},
		{2097152, "2.097152e+06"}, {1e21, "1e+21"}, {1.5e-7, "1.5e-07"}, {float64(1<<64 - 1), "1.8446744073709552e+19"},
		{math.Inf(1), "+Inf"}, {math.Inf(-1), "-Inf"}, {math.NaN(), "NaN"},
	} {
		if got := string(appendFloat(nil, tc.v)); got != tc.want {
			t.Errorf("appendFloat(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// startMetrics serves c on a loopback port; stop cancels and checks that
// ServeMetricsOn returns nil.
func startMetrics(t *testing.T, c *Collector) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- ServeMetricsOn(ctx, ln, c) }()
	return ln.Addr().String(), func() {
		t.Helper()
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("ServeMetricsOn = %v after cancel", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("ServeMetricsOn still running 5 s after cancel")
		}
	}
}

func TestServeMetricsHTTP(t *testing.T) {
	c := NewCollector(recoverySample)
	addr, stop := startMetrics(t, c)
	defer stop()
	want := scrape(c)

	// net/http's client: keep-alive, and gzip offered (the server answers
	// uncompressed, which the client accepts).
	for i := range 3 {
		resp, err := http.Get("http://" + addr + "/metrics?x=1")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics #%d: %d %v", i, resp.StatusCode, err)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
			t.Errorf("Content-Type %q", ct)
		}
		if resp.Header.Get("Date") == "" {
			t.Errorf("no Date header")
		}
		if string(b) != want {
			t.Errorf("body differs from WriteTo:\n%s", b)
		}
	}
	resp, err := http.Post("http://"+addr+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /metrics = %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	resp, err = http.Head("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(want)) {
		t.Errorf("HEAD /metrics = %d, length %d", resp.StatusCode, resp.ContentLength)
	}
}

// raw sends one request on a fresh connection and returns all the server
// wrote before closing it.
func raw(t *testing.T, addr, req string) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(conn)
	// A server that refuses a request it did not read to the end closes
	// with unread bytes, which the kernel answers with a reset.
	if errors.Is(err, syscall.ECONNRESET) && len(b) > 0 {
		err = nil
	}
	if err != nil {
		t.Fatalf("%.60q: %v after %.300q", req, err, b)
	}
	return string(b)
}

func TestServeMetricsRaw(t *testing.T) {
	c := NewCollector(sample)
	addr, stop := startMetrics(t, c)
	defer stop()
	body := scrape(c)

	// Two requests on one connection, the second asking to close.
	got := raw(t, addr, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\nGET http://localhost/metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
	if n := strings.Count(got, "HTTP/1.1 200 OK\r\n"); n != 2 || strings.Count(got, body) != 2 || !strings.HasSuffix(got, body) {
		t.Errorf("pipelined requests: %d responses:\n%.300s", n, got)
	}
	if !strings.Contains(got, "\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n") {
		t.Errorf("no Content-Length %d:\n%.300s", len(body), got)
	}
	for _, tc := range []struct{ req, status string }{
		{"GET /metrics HTTP/1.0\r\n\r\n", "200 OK"}, // HTTP/1.0: closed after one; no Host, which no browser omits
		{"HEAD /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", "200 OK"},
		{"GET /metrics HTTP/1.0\r\nHost: [::1]:9273\r\n\r\n", "200 OK"},
		{"GET / HTTP/1.0\r\n\r\n", "404 Not Found"},
		{"GET /metrics/ HTTP/1.0\r\n\r\n", "404 Not Found"},
		{"DELETE /metrics HTTP/1.0\r\n\r\n", "405 Method Not Allowed"},
		{"POST /metrics HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc", "405 Method Not Allowed"},
		{"hello\r\n\r\n", "400 Bad Request"},
		{"GET /metrics HTTP/1.1\r\nno colon\r\n\r\n", "400 Bad Request"},
		{"GET /metrics HTTP/1.1\r\n\r\n", "400 Bad Request"}, // HTTP/1.1 needs a Host
		{"GET /metrics HTTP/2.0\r\n\r\n", "505 HTTP Version Not Supported"},
		{"GET /metrics HTTP/1.1\r\nHost: localhost\r\nX: " + strings.Repeat("a", 20000) + "\r\n\r\n", "431 Request Header Fields Too Large"},
		// DNS rebinding: a page of evil.example, whose name now resolves
		// to 127.0.0.1, asks for the metrics.
		{"GET /metrics HTTP/1.1\r\nHost: evil.example:9273\r\nConnection: close\r\n\r\n", "421 Misdirected Request"},
		{"GET /metrics HTTP/1.1\r\nHost: 10.0.0.1\r\nConnection: close\r\n\r\n", "421 Misdirected Request"},
	} {
		got := raw(t, addr, tc.req)
		// net/http answers in the request's minor version and may add a
		// reason after the status text.
		if !regexp.MustCompile(`^HTTP/1\.[01] `+regexp.QuoteMeta(tc.status)+`[\r:]`).MatchString(got) || len(regexp.MustCompile(`HTTP/1\.[01] \d{3}`).FindAllString(got, -1)) != 1 {
			t.Errorf("%.40q: got\n%.200s", tc.req, got)
		}
		if tc.status == "200 OK" && strings.HasPrefix(tc.req, "HEAD") != !strings.HasSuffix(got, "\r\n\r\n"+body) {
			t.Errorf("%.40q: body presence wrong:\n%.200s", tc.req, got)
		}
		if tc.status != "200 OK" && strings.Contains(got, "braid_") {
			t.Errorf("%.40q: an error response carries metrics", tc.req)
		}
	}
}

// On an address other than loopback any Host is served: the operator chose
// to expose the endpoint, and a scraper names the host as it likes.
func TestServeMetricsAnyHostOffLoopback(t *testing.T) {
	h := newPage("/metrics", contentType, func(b *bytes.Buffer) { b.WriteString("x 1\n") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The same listener, seen as bound to a public address.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go serveHTTP(ctx, publicAddrListener{ln}, h)
	got := raw(t, ln.Addr().String(), "GET /metrics HTTP/1.1\r\nHost: metrics.example\r\nConnection: close\r\n\r\n")
	if !strings.HasPrefix(got, "HTTP/1.1 200 OK\r\n") {
		t.Errorf("got\n%.200s", got)
	}
}

type publicAddrListener struct{ net.Listener }

func (publicAddrListener) Addr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(198, 18, 0, 1), Port: 9273}
}

// Parallel scrapes within a second share one snapshot of the engine.
func TestMetricsPageCached(t *testing.T) {
	var snapshots atomic.Int32
	c := NewCollector(func() Status { snapshots.Add(1); return sample() })
	addr, stop := startMetrics(t, c)
	defer stop()
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("status %d", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	// The 50 may straddle a second boundary once.
	if n := snapshots.Load(); n < 1 || n > 2 {
		t.Errorf("%d snapshots for 50 parallel scrapes, want 1 (2 across a second boundary)", n)
	}
	time.Sleep(pageTTL + 50*time.Millisecond)
	before := snapshots.Load()
	scrapeOnce(t, addr)
	if snapshots.Load() != before+1 {
		t.Errorf("a scrape after %v reused a stale page", pageTTL)
	}
}

func scrapeOnce(t *testing.T, addr string) time.Duration {
	t.Helper()
	start := time.Now()
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v after %v", err, time.Since(start))
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("scrape: status %d", resp.StatusCode)
	}
	return time.Since(start)
}

// TestServeMetricsIdleFlood: 10 000 connections that send nothing, then one
// scrape, which must be answered within 6 s (the silent ones are evicted at
// the connection cap, oldest first, or time out after readHeaderTimeout).
func TestServeMetricsIdleFlood(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 1000
	}
	addr, stop := startMetrics(t, NewCollector(sample))
	defer stop()
	var (
		mu    sync.Mutex
		idle  []net.Conn
		wg    sync.WaitGroup
		slots = make(chan struct{}, 256)
	)
	for range n {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				return // the backlog was full: the kernel dropped the SYN
			}
			mu.Lock()
			idle = append(idle, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	t.Logf("%d of %d silent connections open", len(idle), n)
	if len(idle) < maxConns {
		t.Fatalf("only %d connections opened: the test did not fill the cap", len(idle))
	}
	d := scrapeOnce(t, addr)
	t.Logf("scrape answered in %v", d)
	if d > 6*time.Second {
		t.Errorf("scrape took %v behind %d silent connections, want ≤ 6 s", d, len(idle))
	}
	// And the server holds none of them for long: past readHeaderTimeout
	// every silent connection has been closed by the server (EOF here).
	time.Sleep(readHeaderTimeout + time.Second)
	open := 0
	buf := make([]byte, 1)
	for _, c := range idle {
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(buf); errors.Is(err, os.ErrDeadlineExceeded) {
			open++
		}
	}
	if open > 0 {
		t.Errorf("%d silent connections still open %v after they opened", open, readHeaderTimeout+time.Second)
	}
}

// An idle kept-alive connection does not hold up the shutdown.
func TestServeMetricsShutdownIdle(t *testing.T) {
	addr, stop := startMetrics(t, NewCollector(sample))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /metrics HTTP/1.1\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	// A second, half-sent request: the server waits for the rest until the
	// grace period ends.
	io.WriteString(conn, "GET /met")
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	stop()
	if d := time.Since(start); d > shutdownGrace+time.Second {
		t.Errorf("shutdown took %v", d)
	}
	conn.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := br.ReadByte(); err == nil {
		t.Errorf("connection still open after shutdown")
	}
}

// Pages are sent at most pagesPerSecond (after a burst): a client that asks
// more often waits its turn, and one that cannot wait gets 429.
func TestPageSendsLimited(t *testing.T) {
	p := newPage("/metrics", contentType, func(b *bytes.Buffer) { b.WriteString("x 1\n") })
	p.sends = rate.NewLimiter(rate.Every(time.Hour), 1)
	get := func() *httptest.ResponseRecorder {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		w := httptest.NewRecorder()
		p.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil).WithContext(ctx))
		return w
	}
	if w := get(); w.Code != http.StatusOK || w.Body.String() != "x 1\n" {
		t.Fatalf("first: %d %q", w.Code, w.Body.String())
	}
	if w := get(); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("second within the hour: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
}
