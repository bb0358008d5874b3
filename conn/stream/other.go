//go:build !linux

package stream

import (
	"errors"
	"net"
	"syscall"
)

// ErrMPTCPDisabled is wrapped by the error New returns when MPTCP is unavailable.
var ErrMPTCPDisabled = errors.New("MPTCP unavailable")

// MPTCPSysctl is the Linux switch for MPTCP.
const MPTCPSysctl = "net.mptcp.enabled"

func probe(cfg Config) error {
	if cfg.Kind == MPTCP {
		return ErrMPTCPDisabled
	}
	return nil
}

func (t *Transport) control(device string) func(network, address string, rc syscall.RawConn) error {
	return nil
}

func (t *Transport) afterConnect(tc *net.TCPConn) { _ = tc.SetNoDelay(true) }

func listenError(kind Kind, addr, device string, err error) error {
	return errors.New("listen " + kind.String() + " " + addr + ": " + err.Error())
}

func kernelInfo(l *link, in *Info) {}

func runsMPTCP(tc *net.TCPConn) bool { return false }
