// Package httpbench is the download workload of braid's tests and lab: a real HTTP
// server that serves bodies of any size, and a client that times a download the way
// the papers did (wget of a 16 MB file: goodput = size ÷ time) while recording its
// progress, so a test can also say how long the transfer ever stood still.
package httpbench

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// MB is the papers' megabyte for file sizes (16 MB = 16 × 2^20 bytes).
const MB = 1 << 20

// Handler serves GET /bytes/N with an N-byte body (a repeating pattern, so nothing
// along the way can compress it).
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /bytes/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
		if err != nil || n < 0 || n > 1<<34 {
			http.Error(w, "bad size", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		w.Header().Set("Content-Type", "application/octet-stream")
		writeBody(w, n)
	})
	return mux
}

// patternLen is the length of the body's repeating pattern.
const patternLen = 32 << 10

// writeBody writes the n-byte body: a 32 KiB pattern repeated, cut at n. It
// stops at the first write error (a client that went away).
func writeBody(w io.Writer, n int64) {
	var chunk [patternLen]byte
	for i := range chunk {
		chunk[i] = byte(i*131 + i>>8)
	}
	for n > 0 {
		k := min(n, patternLen)
		if _, err := w.Write(chunk[:k]); err != nil {
			return
		}
		n -= k
	}
}

// BodySum is the SHA-256 of the n-byte body Handler serves, to check a
// download's Result.SHA256 against.
func BodySum(n int64) [sha256.Size]byte {
	h := sha256.New()
	writeBody(h, n)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// Control returns a socket control function that sets TCP_CONGESTION (e.g. "cubic";
// "" leaves the system default). Root may pick any algorithm the kernel has built in,
// even one a namespace does not list as allowed.
func Control(cc string) func(network, address string, c syscall.RawConn) error {
	if cc == "" {
		return nil
	}
	return func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptString(int(fd), syscall.IPPROTO_TCP, 13 /* TCP_CONGESTION */, cc)
		})
		if err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("setting TCP congestion control %q: %w", cc, serr)
		}
		return nil
	}
}

// Listen opens a TCP listener with the given congestion control.
func Listen(addr, cc string) (net.Listener, error) {
	lc := net.ListenConfig{Control: Control(cc)}
	return lc.Listen(context.Background(), "tcp", addr)
}

// Result describes one download.
type Result struct {
	Bytes    int64
	Duration time.Duration
	// MaxStall is the longest time no byte arrived, from the request to the end.
	MaxStall time.Duration
	// SHA256 is the body's hash when Options.Hash asked for it.
	SHA256 [sha256.Size]byte
}

// GoodputMbps is size ÷ time in Mbit/s (10^6 bits).
func (r Result) GoodputMbps() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.Bytes) * 8 / r.Duration.Seconds() / 1e6
}

// Options of a download.
type Options struct {
	// Dial opens the TCP connection (e.g. inside a network namespace); nil uses
	// net.Dialer with CC.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	CC   string // TCP congestion control for the default dialer
	// OnProgress, if set, is called from the reading goroutine after every read.
	OnProgress func(total int64)
	// Hash computes Result.SHA256 (it costs CPU a throughput measurement
	// should not pay).
	Hash bool
}

// Fetch downloads url, discarding the body, and times it from the request to the last
// byte, as wget reports. A short body is an error.
func Fetch(ctx context.Context, url string, o Options) (Result, error) {
	dial := o.Dial
	if dial == nil {
		d := net.Dialer{Control: Control(o.CC)}
		dial = d.DialContext
	}
	tr := &http.Transport{DialContext: dial, DisableCompression: true, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	last := start
	var res Result
	resp, err := client.Do(req)
	if err != nil {
		return res, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return res, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	buf := make([]byte, 64<<10)
	var h hash.Hash
	if o.Hash {
		h = sha256.New()
	}
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if h != nil {
				h.Write(buf[:n])
			}
			now := time.Now()
			res.MaxStall = max(res.MaxStall, now.Sub(last))
			last = now
			res.Bytes += int64(n)
			if o.OnProgress != nil {
				o.OnProgress(res.Bytes)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return res, err
		}
	}
	res.Duration = last.Sub(start)
	if h != nil {
		h.Sum(res.SHA256[:0])
	}
	if resp.ContentLength >= 0 && res.Bytes != resp.ContentLength {
		return res, fmt.Errorf("GET %s: got %d of %d bytes", url, res.Bytes, resp.ContentLength)
	}
	return res, nil
}

// URL returns the address of an n-byte body on host (host:port).
func URL(host string, n int64) string {
	if strings.Contains(host, "://") {
		return fmt.Sprintf("%s/bytes/%d", host, n)
	}
	return fmt.Sprintf("http://%s/bytes/%d", host, n)
}
