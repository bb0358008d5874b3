//go:build linux

package stream

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/braid-vpn/braid/conn"
)

// MPTCPSysctl is the switch that must be 1 for MPTCP sockets to open, per network
// namespace.
const MPTCPSysctl = "net.mptcp.enabled"

// ErrMPTCPDisabled is wrapped by the error New returns when MPTCP sockets cannot be
// opened.
var ErrMPTCPDisabled = errors.New("MPTCP unavailable")

// probe opens (and closes) one socket of the configured kind with the configured
// congestion control, to turn a kernel that cannot into a clear error.
func probe(cfg Config) error {
	proto := unix.IPPROTO_TCP
	if cfg.Kind == MPTCP {
		proto = unix.IPPROTO_MPTCP
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, proto)
	if err != nil && cfg.Kind == MPTCP {
		return mptcpError(err)
	}
	if err != nil {
		return fmt.Errorf("tcp socket: %w", err)
	}
	defer unix.Close(fd)
	if cfg.Congestion != "" {
		if err := unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, cfg.Congestion); err != nil {
			return congestionError(cfg.Congestion, err)
		}
	}
	return nil
}

// mptcpError explains why an MPTCP socket could not be created, naming the sysctl.
func mptcpError(err error) error {
	b, rerr := os.ReadFile("/proc/sys/net/mptcp/enabled")
	switch {
	case rerr != nil:
		return fmt.Errorf("%w: this kernel has no MPTCP (sysctl %s does not exist; it needs CONFIG_MPTCP): socket: %v", ErrMPTCPDisabled, MPTCPSysctl, err)
	case strings.TrimSpace(string(b)) == "0":
		return fmt.Errorf("%w: MPTCP is switched off in this network namespace: sysctl %s = 0 (enable it with: sysctl -w %s=1)", ErrMPTCPDisabled, MPTCPSysctl, MPTCPSysctl)
	}
	return fmt.Errorf("%w: cannot open an MPTCP socket (sysctl %s = %s): %v", ErrMPTCPDisabled, MPTCPSysctl, strings.TrimSpace(string(b)), err)
}

func congestionError(name string, err error) error {
	avail, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	switch {
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("tcp_congestion %q: no such congestion control in this kernel (available: %s; a module such as tcp_%s may need loading)", name, strings.TrimSpace(string(avail)), name)
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("tcp_congestion %q: not in net.ipv4.tcp_allowed_congestion_control, and setting it needs CAP_NET_ADMIN", name)
	}
	return fmt.Errorf("tcp_congestion %q: %v", name, err)
}

// control is the socket setup before bind/connect: the device pin and the
// congestion control.
func (t *Transport) control(device string) func(network, address string, rc syscall.RawConn) error {
	cc := t.cfg.Congestion
	return func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			s := int(fd)
			if device != "" {
				if err := unix.SetsockoptString(s, unix.SOL_SOCKET, unix.SO_BINDTODEVICE, device); err != nil {
					serr = deviceError(device, err)
					return
				}
			}
			if cc != "" {
				if err := unix.SetsockoptString(s, unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc); err != nil {
					serr = congestionError(cc, err)
				}
			}
		})
		if err != nil {
			return err
		}
		return serr
	}
}

// afterConnect sets the options of an established connection. They are best
// effort: an MPTCP socket of an older kernel refuses some.
func (t *Transport) afterConnect(tc *net.TCPConn) {
	_ = tc.SetNoDelay(true) // frames are batched already; Nagle would only delay them
	rc, err := tc.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		if t.cfg.NotSentLowat > 0 {
			_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, t.cfg.NotSentLowat)
		}
		if t.cfg.UserTimeout > 0 {
			_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(t.cfg.UserTimeout/time.Millisecond))
		}
	})
}

func deviceError(device string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENODEV:
			return &conn.Error{Msg: `interface "` + device + `" not found`, Err: errno}
		case syscall.EPERM, syscall.EACCES:
			return &conn.Error{Msg: `binding to interface "` + device + `" (SO_BINDTODEVICE) needs CAP_NET_RAW or CAP_NET_ADMIN`, Err: errno}
		}
	}
	return &conn.Error{Msg: `binding to interface "` + device + `": ` + err.Error(), Err: err}
}

// listenError turns a failed listen into the line the user sees.
func listenError(kind Kind, addr, device string, err error) error {
	var ce *conn.Error
	if errors.As(err, &ce) {
		return ce
	}
	msg := err.Error()
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		msg = oe.Err.Error()
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.EADDRINUSE:
			msg = "address already in use"
		case syscall.EADDRNOTAVAIL:
			msg = "address not available (not assigned to a local interface)"
		case syscall.EACCES:
			msg = "permission denied (ports below 1024 need CAP_NET_BIND_SERVICE)"
		}
	}
	return &conn.Error{Msg: "listen " + kind.String() + " " + addr + ": " + msg, Err: err}
}
