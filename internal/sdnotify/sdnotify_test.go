package sdnotify

import (
	"net"
	"path/filepath"
	"testing"
	"time"
)

func TestNotify(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if sent, err := Notify(Ready); sent || err != nil {
		t.Fatalf("without NOTIFY_SOCKET: sent %v, err %v", sent, err)
	}
	sock := filepath.Join(t.TempDir(), "notify")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	for _, want := range []string{Ready, Reloading, Stopping} {
		if sent, err := Notify(want); !sent || err != nil {
			t.Fatalf("Notify(%q): sent %v, err %v", want, sent, err)
		}
		buf := make([]byte, 64)
		ln.SetReadDeadline(time.Now().Add(time.Second))
		n, err := ln.Read(buf)
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("systemd got %q (%v), want %q", buf[:n], err, want)
		}
	}
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "absent"))
	if _, err := Notify(Ready); err == nil {
		t.Fatal("no error for a socket that does not exist")
	}
}
