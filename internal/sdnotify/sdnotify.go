// Package sdnotify tells systemd about the daemon's state (sd_notify(3)) without a
// dependency on libsystemd: a datagram to the unix socket named by $NOTIFY_SOCKET.
// Outside systemd (no $NOTIFY_SOCKET) every call does nothing.
package sdnotify

import (
	"net"
	"os"
)

// States braid sends.
const (
	Ready     = "READY=1"
	Reloading = "RELOADING=1"
	Stopping  = "STOPPING=1"
)

// Notify sends state to systemd. It returns false when there is no one to tell
// (not started by systemd with Type=notify) and an error when sending failed.
func Notify(state string) (bool, error) {
	name := os.Getenv("NOTIFY_SOCKET")
	if name == "" {
		return false, nil
	}
	if name[0] == '@' { // abstract namespace
		name = "\x00" + name[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return false, err
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		return false, err
	}
	return true, nil
}
