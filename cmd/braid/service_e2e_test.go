package main

import (
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Under systemd (Type=notify) braid up says READY=1 once its tunnel is up,
// RELOADING=1 then READY=1 around a reload (SIGHUP) and STOPPING=1 when it stops.
func TestE2ESystemdNotify(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	r := newE2ERig(t, false) // three daemons: server, client a, client b
	var got []string
	read := func(n int) {
		t.Helper()
		buf := make([]byte, 256)
		for len(got) < n {
			ln.SetReadDeadline(time.Now().Add(5 * time.Second))
			k, err := ln.Read(buf)
			if err != nil {
				t.Fatalf("after %q: %v", got, err)
			}
			got = append(got, string(buf[:k]))
		}
	}
	read(3)
	if strings.Join(got, ",") != "READY=1,READY=1,READY=1" {
		t.Fatalf("at start: %q", got)
	}
	got = nil
	r.dSrv.cmd.Process.Signal(syscall.SIGHUP)
	read(2)
	if strings.Join(got, ",") != "RELOADING=1,READY=1" {
		t.Fatalf("around a reload: %q", got)
	}
	got = nil
	if err := r.dSrv.stop(t); err != nil {
		t.Fatal(err)
	}
	read(1)
	if got[0] != "STOPPING=1" {
		t.Fatalf("at stop: %q", got)
	}
}
