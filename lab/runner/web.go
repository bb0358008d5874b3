package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/braid-vpn/braid/httpbench"
	"github.com/braid-vpn/braid/netns"
)

// Web server ports: plain TCP for direct and tunnelled downloads, MPTCP for
// mptcp-direct (a separate listener, so that the baselines use exactly the
// socket type they name).
const (
	WebPort      = 8080
	WebPortMPTCP = 8081
)

// WebServer is the httpbench server in the web namespace. It remembers the
// retransmission count of each connection it served (TCP_INFO read just
// before the connection closes), keyed by the client's address.
type WebServer struct {
	Addr    netip.Addr
	srv     *http.Server
	mu      sync.Mutex
	cond    *sync.Cond
	retrans map[string]int64
}

// StartWeb opens the listeners inside ns with congestion control cc and
// serves until Close.
func StartWeb(ns *netns.Namespace, addr netip.Addr, cc string) (*WebServer, error) {
	w := &WebServer{Addr: addr, retrans: map[string]int64{}, srv: &http.Server{Handler: httpbench.Handler(), ReadHeaderTimeout: 10 * time.Second}}
	w.cond = sync.NewCond(&w.mu)
	var lns []net.Listener
	err := ns.Do(func() error {
		for port, mp := range map[int]bool{WebPort: false, WebPortMPTCP: true} {
			lc := net.ListenConfig{Control: httpbench.Control(cc)}
			lc.SetMultipathTCP(mp)
			ln, err := lc.Listen(context.Background(), "tcp4", fmt.Sprintf("0.0.0.0:%d", port))
			if err != nil {
				return err
			}
			lns = append(lns, &trackListener{Listener: ln, w: w, mptcp: mp})
		}
		return nil
	})
	for _, ln := range lns {
		if err != nil {
			ln.Close()
		} else {
			go w.srv.Serve(ln)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("web server: %w", err)
	}
	return w, nil
}

// Retransmits waits up to wait for the server's side of the connection from
// client to close and returns its retransmitted segments, or -1 if unknown.
func (w *WebServer) Retransmits(client string, wait time.Duration) int64 {
	deadline := time.Now().Add(wait)
	t := time.AfterFunc(wait, func() { w.mu.Lock(); w.cond.Broadcast(); w.mu.Unlock() })
	defer t.Stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		if v, ok := w.retrans[client]; ok {
			delete(w.retrans, client)
			return v
		}
		if !time.Now().Before(deadline) {
			return -1
		}
		w.cond.Wait()
	}
}

// Close stops serving.
func (w *WebServer) Close() error {
	if w == nil {
		return nil
	}
	return w.srv.Close()
}

type trackListener struct {
	net.Listener
	w     *WebServer
	mptcp bool
}

func (l *trackListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &trackConn{Conn: c, w: l.w, mptcp: l.mptcp}, nil
}

type trackConn struct {
	net.Conn
	w     *WebServer
	mptcp bool
	once  sync.Once
}

// Close records TCP_INFO's total retransmissions first. An MPTCP socket's
// TCP_INFO describes one subflow at most, so MPTCP records -1 (unknown).
func (c *trackConn) Close() error {
	c.once.Do(func() {
		v := int64(-1)
		if tc, ok := c.Conn.(*net.TCPConn); ok && !c.mptcp {
			if rc, err := tc.SyscallConn(); err == nil {
				rc.Control(func(fd uintptr) {
					if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
						v = int64(info.Total_retrans)
					}
				})
			}
		}
		c.w.mu.Lock()
		c.w.retrans[c.RemoteAddr().String()] = v
		c.w.cond.Broadcast()
		c.w.mu.Unlock()
	})
	err := c.Conn.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
