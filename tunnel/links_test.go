package tunnel

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/braid-vpn/braid/tundev/tuntest"
)

// A configured interface that is not there yet is a waiting path, not an error;
// when it appears (with an address) its path opens and carries traffic within a
// second; when it goes away its paths leave at once, on the client and, told by a
// PATH_GONE frame, on the server. Patterns match interfaces as they come.
func TestEngineInterfaceComesAndGoes(t *testing.T) {
	r := newRig(t, rigOpts{})
	waitUsable(t, r.srv, "a", 2)
	r.cliA.Close()
	events := make(chan LinkEvent, 4)
	cfg := r.cfgA
	cfg.TUN = tuntest.New(1380)
	cfg.LocalPaths = []LocalPath{{Addr: cliAddr1}, {Device: "wwan*"}}
	cfg.LinkEvents = events
	var ifaces atomic.Pointer[[]string]
	ifaces.Store(&[]string{"lo"})
	cfg.Interfaces = func() []string { return *ifaces.Load() }
	cli, err := New(cfg)
	if err != nil {
		t.Fatalf("a missing interface stops the client: %v", err)
	}
	cli.Start()
	defer cli.Close()
	waitUsable(t, cli, "server", 1)
	waiting := false
	for _, pa := range cli.Status().Peers[0].Paths {
		waiting = waiting || pa.State == "waiting"
	}
	if !waiting {
		t.Fatalf("no waiting path in %+v", cli.Status().Peers[0].Paths)
	}

	// The modem appears.
	r.net.AddInterface("wwan0", cliAddr2)
	ifaces.Store(&[]string{"lo", "wwan0"})
	appeared := time.Now()
	events <- LinkEvent{Device: "wwan0", Up: true}
	for usablePaths(cli.Status(), "server") < 2 {
		if time.Since(appeared) > time.Second {
			t.Fatalf("the new interface's path not usable 1 s after it appeared: %+v", cli.Status().Peers[0].Paths)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("path over the new interface usable %v after it appeared", time.Since(appeared).Round(time.Millisecond))
	waitUsable(t, r.srv, "a", 2)

	// It goes away: both ends stop using it at once.
	gone := time.Now()
	events <- LinkEvent{Device: "wwan0", Up: false}
	for usablePaths(cli.Status(), "server") > 1 || usablePaths(r.srv.Status(), "a") > 1 {
		if time.Since(gone) > 100*time.Millisecond {
			t.Fatalf("after the interface left: client %d, server %d usable paths", usablePaths(cli.Status(), "server"), usablePaths(r.srv.Status(), "a"))
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Logf("both ends stopped using it %v after it left", time.Since(gone).Round(time.Millisecond))
}
