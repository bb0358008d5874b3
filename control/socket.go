package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Socket tunables.
const (
	// SocketDirMode lets the directory's group reach the socket, nobody else.
	SocketDirMode = 0o750
	// SocketMode lets the socket's group query status without root.
	SocketMode = 0o660
	// RequestTimeout bounds one request on the server and one query on the
	// client, so a stuck peer cannot pin a goroutine or hang `braid status`.
	RequestTimeout = 5 * time.Second
	// maxRequest bounds the command line a client may send.
	maxRequest = 1024
	// maxReply bounds the reply Query accepts (a server with thousands of
	// clients and paths fits comfortably).
	maxReply = 64 << 20
)

// Commands lists what the socket understands. "status" and "status json" are
// the same: both reply with the JSON form of Status, and `braid status`
// formats it on the client side.
var Commands = []string{"status", "status json"}

// errorReply is the body of every error answer.
type errorReply struct {
	Error string `json:"error"`
}

// Listen creates the control socket at path: it makes the parent directory
// (mode 0750), removes a socket left behind by a process that died, and
// refuses to take over a socket another live braid answers on or a path that
// is not a socket at all. The socket is mode 0660.
//
// It is separate from Serve so that `braid up` can claim the socket, and
// fail, before it touches any network configuration.
func Listen(path string) (*net.UnixListener, error) {
	if err := os.MkdirAll(filepath.Dir(path), SocketDirMode); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, fmt.Errorf("control socket: %s exists and is not a socket; refusing to remove it", path)
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("control socket: %s is in use (is another braid running on this interface?)", path)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("control socket: removing stale %s: %w", path, err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, SocketMode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return ln, nil
}

// Serve listens on the control socket at path and answers requests until ctx
// is done; then it removes the socket and returns nil.
func Serve(ctx context.Context, socketPath string, provider func() Status) error {
	ln, err := Listen(socketPath)
	if err != nil {
		return err
	}
	return ServeListener(ctx, ln, provider)
}

// ServeListener answers requests on ln until ctx is done, then closes ln
// (which removes a socket made by Listen) and waits for requests in progress.
func ServeListener(ctx context.Context, ln net.Listener, provider func() Status) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()

	var wg sync.WaitGroup
	defer wg.Wait()

	backoff := time.Duration(0)
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors and the like: wait and retry rather
			// than spin or give up the socket.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		backoff = 0
		wg.Go(func() { handle(conn, provider) })
	}
}

func handle(conn net.Conn, provider func() Status) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(RequestTimeout))

	line, err := bufio.NewReader(io.LimitReader(conn, maxRequest)).ReadString('\n')
	if err != nil && (!errors.Is(err, io.EOF) || line == "") {
		return // nothing usable arrived before EOF or the deadline
	}
	cmd := strings.Join(strings.Fields(line), " ")
	switch cmd {
	case "status", "status json":
		s := provider()
		if s.Time.IsZero() {
			s.Time = time.Now()
		}
		writeJSON(conn, s)
	default:
		if len(cmd) > 64 {
			cmd = cmd[:64] + "…"
		}
		writeJSON(conn, errorReply{Error: fmt.Sprintf("unknown command %q (valid: %s)", cmd, strings.Join(Commands, ", "))})
	}
}

func writeJSON(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(errorReply{Error: "encoding reply: " + err.Error()})
	}
	w.Write(append(b, '\n'))
}

// Query asks the braid serving socketPath for its status.
func Query(socketPath string) (Status, error) {
	var s Status
	conn, err := net.DialTimeout("unix", socketPath, RequestTimeout)
	if err != nil {
		return s, dialError(socketPath, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(RequestTimeout))

	if _, err := io.WriteString(conn, "status json\n"); err != nil {
		return s, fmt.Errorf("control socket %s: %w", socketPath, err)
	}
	reply, err := io.ReadAll(io.LimitReader(conn, maxReply))
	if err != nil {
		return s, fmt.Errorf("control socket %s: reading reply: %w", socketPath, err)
	}
	var e errorReply
	if err := json.Unmarshal(reply, &e); err != nil {
		return s, fmt.Errorf("control socket %s: malformed reply: %w", socketPath, err)
	}
	if e.Error != "" {
		return s, fmt.Errorf("control socket %s: %s", socketPath, e.Error)
	}
	if err := json.Unmarshal(reply, &s); err != nil {
		return s, fmt.Errorf("control socket %s: malformed reply: %w", socketPath, err)
	}
	return s, nil
}

// dialError explains the usual reasons a control socket cannot be reached in
// terms of what the operator should check.
func dialError(path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("braid is not running? no control socket at %s", path)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("braid is not running? nothing answers on control socket %s", path)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("permission denied on control socket %s (run as root or as a member of its group)", path)
	}
	return fmt.Errorf("control socket %s: %w", path, err)
}
