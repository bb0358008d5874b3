package control

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The metrics endpoint speaks just enough HTTP/1.1 for a scraper (RFC 9112):
// GET or HEAD of /metrics, keep-alive, no request bodies, no compression,
// no TLS. This file was the daemon's only user of net/http, which brings
// crypto/tls, crypto/x509 and an HTTP/2 stack: 3.6 MB of the stripped binary
// (14.1 MB against 10.5 MB), for a page a scraper fetches once a minute.

const (
	// maxRequestHead bounds a request line plus headers (a scraper sends a
	// few hundred bytes).
	maxRequestHead = 8 << 10
	// headTimeout bounds the wait for a request's head once its first
	// byte arrived, and the time a response may take to be written.
	headTimeout = 10 * time.Second
	// idleTimeout closes a kept-alive connection that sends no further
	// request (Prometheus scrapes every minute at most by default).
	idleTimeout = 2 * time.Minute
	// shutdownGrace is how long requests in progress may finish once ctx
	// is done.
	shutdownGrace = 2 * time.Second
)

// contentType is the text format's media type, as Prometheus expects it.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// httpDate is the IMF-fixdate layout of the Date header (net/http.TimeFormat).
const httpDate = "Mon, 02 Jan 2006 15:04:05 GMT"

// ServeMetrics serves c at http://addr/metrics until ctx is done. It serves
// anyone who can reach addr; bind it to loopback unless a firewall guards it.
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
	s := &metricsServer{c: c, conns: map[net.Conn]bool{}}
	stop := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-stop:
		}
		ln.Close()
	}()
	err := s.accept(ln)
	close(stop)
	// Idle connections close now, busy ones after their response or the
	// grace period, whichever is first.
	s.shutdown()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

type metricsServer struct {
	c        *Collector
	mu       sync.Mutex
	conns    map[net.Conn]bool // true while a request is being served
	closing  bool
	handlers sync.WaitGroup
}

func (s *metricsServer) accept(ln net.Listener) error {
	var backoff time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			// As net/http: back off on EMFILE and the like rather than
			// stop serving.
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() && !errors.Is(err, net.ErrClosed) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			conn.Close()
			continue
		}
		s.conns[conn] = false
		s.handlers.Add(1)
		s.mu.Unlock()
		go s.serveConn(conn)
	}
}

// busy marks conn as serving a request (or idle again) and reports whether
// the server is still running.
func (s *metricsServer) busy(conn net.Conn, b bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns[conn] = b
	return !s.closing
}

func (s *metricsServer) shutdown() {
	s.mu.Lock()
	s.closing = true
	for conn, busy := range s.conns {
		if !busy {
			conn.Close()
		}
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.handlers.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(shutdownGrace):
	}
	s.mu.Lock()
	for conn := range s.conns {
		conn.Close()
	}
	s.mu.Unlock()
	<-done
}

func (s *metricsServer) serveConn(conn net.Conn) {
	defer s.handlers.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		conn.Close()
	}()
	br := bufio.NewReaderSize(conn, maxRequestHead)
	var out bytes.Buffer
	for {
		conn.SetReadDeadline(time.Now().Add(idleTimeout))
		if _, err := br.Peek(1); err != nil {
			return
		}
		if !s.busy(conn, true) {
			return
		}
		conn.SetReadDeadline(time.Now().Add(headTimeout))
		req, status := readRequest(br)
		out.Reset()
		// After a bad request, or one that asks for it, the connection
		// ends; unread bytes are not parsed.
		keep := status == 0 && req.keepAlive
		writeResponse(&out, s.c, req, status, keep)
		conn.SetWriteDeadline(time.Now().Add(headTimeout))
		if _, err := out.WriteTo(conn); err != nil {
			return
		}
		if !keep {
			lingeringClose(conn)
			return
		}
		if !s.busy(conn, false) {
			return
		}
	}
}

// lingeringClose ends the connection without losing the response: closing
// a socket with unread request bytes makes the kernel send a reset, which
// can discard the response before the client reads it. As net/http does,
// close the sending side and let the client go first (reading and dropping
// what it still sends, for a second at most).
func lingeringClose(conn net.Conn) {
	cw, ok := conn.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	conn.SetReadDeadline(time.Now().Add(time.Second))
	io.CopyN(io.Discard, conn, 256<<10)
}

type request struct {
	method, path string
	keepAlive    bool
}

// readRequest reads one request head. It returns a status other than 0
// for a request it will not serve: 400 (malformed), 431 (head too large),
// 505 (not HTTP/1.x), 501 (a body, which no scrape has).
func readRequest(br *bufio.Reader) (request, int) {
	var req request
	read := 0
	line := func() (string, int) {
		l, err := br.ReadSlice('\n')
		read += len(l)
		if errors.Is(err, bufio.ErrBufferFull) || read > maxRequestHead {
			return "", 431
		}
		if err != nil {
			return "", 400
		}
		return strings.TrimSuffix(strings.TrimSuffix(string(l), "\n"), "\r"), 0
	}
	first, status := line()
	if status != 0 {
		return req, status
	}
	method, rest, ok1 := strings.Cut(first, " ")
	target, proto, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || method == "" || target == "" {
		return req, 400
	}
	req.method = method
	switch proto {
	case "HTTP/1.1":
		req.keepAlive = true
	case "HTTP/1.0":
	default:
		if strings.HasPrefix(proto, "HTTP/") {
			return req, 505
		}
		return req, 400
	}
	// Origin form (/metrics?x) or absolute form (http://host/metrics).
	if i := strings.Index(target, "://"); i > 0 && !strings.HasPrefix(target, "/") {
		target = target[i+3:]
		if j := strings.IndexByte(target, '/'); j >= 0 {
			target = target[j:]
		} else {
			target = "/"
		}
	}
	req.path, _, _ = strings.Cut(target, "?")
	for {
		h, status := line()
		if status != 0 {
			return req, status
		}
		if h == "" {
			break
		}
		name, value, ok := strings.Cut(h, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return req, 400
		}
		value = strings.TrimSpace(value)
		switch strings.ToLower(name) {
		case "connection":
			for tok := range strings.SplitSeq(value, ",") {
				switch strings.ToLower(strings.TrimSpace(tok)) {
				case "close":
					req.keepAlive = false
				case "keep-alive":
					// HTTP/1.0 keep-alive is not offered: the response
					// closes the connection.
				}
			}
		case "content-length":
			if n, err := strconv.ParseUint(value, 10, 63); err != nil || n > 0 {
				return req, 501
			}
		case "transfer-encoding":
			return req, 501
		}
	}
	return req, 0
}

var statusText = map[int]string{
	200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
	431: "Request Header Fields Too Large", 501: "Not Implemented", 505: "HTTP Version Not Supported",
}

// writeResponse writes the whole response to one request (status 0: the
// request is well formed) into out.
func writeResponse(out *bytes.Buffer, c *Collector, req request, status int, keep bool) {
	var body bytes.Buffer
	ctype := "text/plain; charset=utf-8"
	switch {
	case status != 0:
	case req.path != "/metrics":
		status = 404
	case req.method != "GET" && req.method != "HEAD":
		status = 405
	default:
		status = 200
		ctype = contentType
		c.appendText(&body)
	}
	if status != 200 {
		body.WriteString(strconv.Itoa(status) + " " + statusText[status] + "\n")
	}
	out.WriteString("HTTP/1.1 " + strconv.Itoa(status) + " " + statusText[status] + "\r\n")
	out.WriteString("Date: " + time.Now().UTC().Format(httpDate) + "\r\n")
	out.WriteString("Content-Type: " + ctype + "\r\n")
	out.WriteString("Content-Length: " + strconv.Itoa(body.Len()) + "\r\n")
	if status == 405 {
		out.WriteString("Allow: GET, HEAD\r\n")
	}
	if !keep {
		out.WriteString("Connection: close\r\n")
	}
	out.WriteString("\r\n")
	if req.method != "HEAD" {
		body.WriteTo(out)
	}
}
