package bench

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/braid-vpn/braid/httpbench"
	"github.com/braid-vpn/braid/lab/runner"
)

func TestBenchPaths(t *testing.T) {
	if len(benchPaths) != 4 {
		t.Fatalf("%d veth pairs, want 4", len(benchPaths))
	}
	p := benchPaths[2]
	if p.Name != "p3" || p.Index != 2 || p.ClientIf != "a-p3" || p.ServerIf != "b-p3" ||
		p.ClientAddr.String() != "198.18.3.1" || p.ServerAddr.String() != "198.18.3.2" || p.Subnet.String() != "198.18.3.0/24" {
		t.Errorf("third path %+v", p)
	}
	for c, want := range map[string]int{
		"kernel": 2, "kernel,braid-1path,wireguard-go": 2, "braid-2paths": 2, "braid-4paths": 4,
		strings.Join(AllCases, ","): 4,
	} {
		if got := vethsFor(strings.Split(c, ",")); got != want {
			t.Errorf("vethsFor(%s) = %d, want %d", c, got, want)
		}
	}
}

func TestCheckParallel(t *testing.T) {
	for _, c := range []struct {
		k    int
		size int64
		ok   bool
	}{{1, 1, true}, {4, 1 << 20, true}, {MaxParallel, 1 << 30, true}, {0, 10, false}, {MaxParallel + 1, 1 << 30, false}, {3, 2, false}} {
		if err := CheckParallel(c.k, c.size); (err == nil) != c.ok {
			t.Errorf("CheckParallel(%d, %d): %v", c.k, c.size, err)
		}
	}
}

// loopTunnel downloads from a local httpbench server, counting its dials;
// failAt > 0 makes that dial fail.
type loopTunnel struct {
	runner.BaseSession
	dials  atomic.Int32
	failAt int32
}

func (l *loopTunnel) Dial(ctx context.Context, n, a string) (net.Conn, error) {
	if l.dials.Add(1) == l.failAt {
		return nil, errors.New("left from the wrong address")
	}
	var d net.Dialer
	return d.DialContext(ctx, n, a)
}

func TestDownloadParallel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: httpbench.Handler()}
	go srv.Serve(ln)
	defer srv.Close()
	target := netip.MustParseAddrPort(ln.Addr().String()).String()

	// 3 downloads of 1000001 bytes in all: 333334 + 333334 + 333333, each
	// on a connection of its own that the tunnel dialed.
	tn := &loopTunnel{BaseSession: runner.BaseSession{To: target}}
	res, err := download(context.Background(), tn, 1000001, 3)
	if err != nil || res.Bytes != 1000001 || res.Duration <= 0 || tn.dials.Load() != 3 {
		t.Errorf("got %+v (%v), %d dials; want 1000001 bytes over 3", res, err, tn.dials.Load())
	}
	// One refused connection fails the whole download, with its own error.
	tn = &loopTunnel{BaseSession: runner.BaseSession{To: target}, failAt: 2}
	if _, err := download(context.Background(), tn, 3<<20, 4); err == nil || !strings.Contains(err.Error(), "wrong address") {
		t.Errorf("a refused connection: %v", err)
	}
}
