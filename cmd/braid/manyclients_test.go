package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-vpn/braid/internal/testenv"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/netns"
)

// manyClients is how many clients TestManyClients runs against one server.
const manyClients = 50

// Fifty clients, each with its own key, namespace, link and tunnel address, download
// through one server at once: every download completes, each request reaches the
// server from its own client's tunnel address (no cross-talk), and a client sending
// from another client's tunnel address is dropped by the server. The server's CPU
// time and peak RSS are logged.
func TestManyClients(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 51 daemons")
	}
	testenv.SkipIfEmulated(t, testenv.NoNetns)
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces, veth pairs and TUN devices")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2 (ip): apt-get install iproute2")
	}
	netns.Cleanup(e2ePrefix)
	dir := t.TempDir()
	srvNS := newNS(t)
	srvKey, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "srv.key", srvKey.String())

	type client struct {
		ns    *netns.Namespace
		inner netip.Addr
		cfg   string
		sock  string
		d     *daemon
	}
	cls := make([]*client, manyClients)
	var srvCfg strings.Builder
	fmt.Fprintf(&srvCfg, "role = \"server\"\nprivate_key_file = \"srv.key\"\n[tun]\naddress = [\"100.64.0.1/24\"]\n[server]\nlisten = [\"0.0.0.0:7000\"]\n")
	for i := range cls {
		c := &client{ns: newNS(t), inner: netip.AddrFrom4([4]byte{100, 64, 0, byte(10 + i)})}
		cls[i] = c
		cliLink := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(i), 1}), 24)
		srvLink := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(i), 2}), 24)
		if err := netns.AddVeth(netns.VethEnd{NS: c.ns, Name: "c", Addrs: []netip.Prefix{cliLink}}, netns.VethEnd{NS: srvNS, Name: fmt.Sprintf("s%d", i), Addrs: []netip.Prefix{srvLink}}); err != nil {
			t.Fatal(err)
		}
		k, err := keys.Generate()
		if err != nil {
			t.Fatal(err)
		}
		keyFile := fmt.Sprintf("c%d.key", i)
		writeFile(t, dir, keyFile, k.String())
		fmt.Fprintf(&srvCfg, "[[server.clients]]\nname = \"c%d\"\npublic_key = %q\nallowed_ips = [\"%s/32\"]\n", i, k.Public(), c.inner)
		c.sock = filepath.Join(dir, fmt.Sprintf("c%d.sock", i))
		c.cfg = writeFile(t, dir, fmt.Sprintf("c%d.toml", i), fmt.Sprintf(
			"role = \"client\"\nprivate_key_file = %q\n[tun]\naddress = [\"%s/24\"]\n[client]\nserver_public_key = %q\nservers = [\"%s\"]\n[control]\nsocket = %q\n",
			keyFile, c.inner, srvKey.Public(), netip.AddrPortFrom(srvLink.Addr(), 7000), c.sock))
	}
	srvSock := filepath.Join(dir, "srv.sock")
	fmt.Fprintf(&srvCfg, "[control]\nsocket = %q\n", srvSock)
	srv := startDaemon(t, srvNS, "server", writeFile(t, dir, "server.toml", srvCfg.String()), srvSock)

	// The web server answers with the source address it saw, so each client can
	// check that its request arrived from its own tunnel address.
	var ln net.Listener
	if err := srvNS.Do(func() (err error) {
		ln, err = net.Listen("tcp4", "0.0.0.0:8080")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-From", r.RemoteAddr)
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		buf := make([]byte, 32<<10)
		for n > 0 {
			k := min(n, len(buf))
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	})}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })

	for i, c := range cls {
		c.d = startDaemon(t, c.ns, fmt.Sprintf("client %d", i), c.cfg, c.sock)
	}
	for i, c := range cls {
		c.d.waitPaths(t, "", 1)
		srv.waitPaths(t, fmt.Sprintf("c%d", i), 1)
	}

	// Every client downloads at once.
	const size = 1 << 20
	var wg sync.WaitGroup
	errs := make([]error, len(cls))
	start := time.Now()
	for i, c := range cls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = download(c.ns, c.inner, size)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for i, err := range errs {
		if err != nil {
			t.Errorf("client %d: %v", i, err)
		}
	}

	// Client 0 sends from client 1's tunnel address: the server must drop it.
	before := srv.status(t).Counters["drop_spoofed_source"]
	if err := cls[0].ns.AddAddr("braid0", netip.PrefixFrom(cls[1].inner, 32)); err != nil {
		t.Fatal(err)
	}
	if err := cls[0].ns.Do(func() error {
		c, err := net.DialUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(cls[1].inner, 0)), net.UDPAddrFromAddrPort(netip.MustParseAddrPort("100.64.0.1:9")))
		if err != nil {
			return err
		}
		defer c.Close()
		for range 5 {
			c.Write([]byte("spoofed"))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for srv.status(t).Counters["drop_spoofed_source"]-before < 5 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := srv.status(t).Counters["drop_spoofed_source"] - before; got < 5 {
		t.Errorf("server dropped %d of 5 datagrams sent from another client's address", got)
	}

	cpu, rss := procUsage(t, srv.cmd.Process.Pid)
	t.Logf("%d clients × %d MiB in %v (%.1f Mbit/s in all); server CPU %v, peak RSS %d MiB",
		len(cls), size>>20, elapsed.Round(time.Millisecond), float64(len(cls)*size*8)/elapsed.Seconds()/1e6, cpu, rss>>20)
}

// download fetches size bytes from the server through the tunnel inside ns and
// checks the server saw the request come from inner.
func download(ns *netns.Namespace, inner netip.Addr, size int) error {
	tr := &http.Transport{DialContext: dialIn(ns, e2eCC()), DisableKeepAlives: true}
	cl := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	resp, err := cl.Get(fmt.Sprintf("http://100.64.0.1:8080/%d", size))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return fmt.Errorf("after %d bytes: %w", n, err)
	}
	if n != int64(size) {
		return fmt.Errorf("got %d bytes, want %d", n, size)
	}
	seen, err := netip.ParseAddrPort(resp.Header.Get("X-Seen-From"))
	if err != nil || seen.Addr() != inner {
		return fmt.Errorf("the server saw the request from %q, want %s", resp.Header.Get("X-Seen-From"), inner)
	}
	return nil
}

// procUsage returns a process's CPU time (user + system) and peak RSS.
func procUsage(t *testing.T, pid int) (time.Duration, int64) {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	cpu := time.Duration(ut+st) * time.Second / 100 // USER_HZ
	return cpu, procStatus(t, pid, "VmHWM")
}
