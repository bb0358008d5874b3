package tunnel

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/braid-vpn/braid/conn"
)

// A server with several readers per listen address binds them all to one
// port, and refuses a port another socket holds, also one that would let it
// join (SO_REUSEPORT): two daemons must not split one port's clients.
func TestListenReaders(t *testing.T) {
	start := func(addr netip.AddrPort, readers int) (*Engine, error) {
		tn := DefaultTunables()
		tn.ListenReaders = readers
		return New(Config{
			Role: Server, PrivateKey: mustKey(t), TUN: newNullTUN(), Logger: testLogger(t),
			Listen: conn.Listen, ListenAddrs: []netip.AddrPort{addr}, Tunables: tn,
		})
	}
	e, err := start(netip.MustParseAddrPort("127.0.0.1:0"), 3)
	if err != nil {
		t.Fatal(err)
	}
	port := e.conns[0].c.LocalAddr()
	if len(e.conns) != 3 || e.conns[1].c.LocalAddr() != port || e.conns[2].c.LocalAddr() != port {
		t.Fatalf("%d sockets, want 3 on %v", len(e.conns), port)
	}
	// A client's datagrams are one path whichever socket of the group the
	// kernel hands them to (after a rebinding it may pick another), so that
	// migratePath finds the path the client moved from.
	p := &peer{isSrv: false}
	ep := conn.Endpoint{Remote: netip.MustParseAddrPort("198.18.1.1:40000")}
	for _, cs := range e.conns {
		if cs.pathSock() != e.conns[0] || p.keyFor(cs, ep) != p.keyFor(e.conns[0], ep) {
			t.Fatalf("socket %d is a path socket of its own", cs.idx)
		}
	}
	if st := e.Status(); st.ListenSockets != 3 || len(st.Listen) != 1 || st.Listen[0] != port.String() {
		t.Fatalf("status: listen %v, %d sockets", st.Listen, st.ListenSockets)
	}
	// The port is this engine's: another with readers must not join it.
	if _, err := start(port, 2); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("a second server joined a port in use: %v", err)
	}
	e.closeConns()
	plain, err := conn.Listen(conn.Options{Addr: port})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := start(port, 2); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("a port held by a plain socket: %v", err)
	}
}

func TestDefaultListenReaders(t *testing.T) {
	for procs, want := range map[int]int{1: 1, 2: 1, 3: 1, 4: 2, 8: 4, 64: 4} {
		if got := DefaultListenReaders(procs); got != want {
			t.Errorf("DefaultListenReaders(%d) = %d, want %d", procs, got, want)
		}
	}
}
