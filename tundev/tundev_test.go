//go:build linux

package tundev

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/internal/testenv"
	"github.com/braid-vpn/braid/netns"
	"github.com/vishvananda/netlink"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

const nsPrefix = "brtuntest"

func TestMain(m *testing.M) {
	if os.Geteuid() == 0 {
		netns.Cleanup(nsPrefix)
	}
	os.Exit(m.Run())
}

// Offset must leave room for wireguard-go's virtio-net header.
var _ = [1]struct{}{}[Offset/10-3] // compile-time: 30 ≤ Offset < 40

func needRoot(t *testing.T) *netns.Namespace {
	t.Helper()
	testenv.SkipIfEmulated(t, testenv.NoNetns)
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace and a TUN device")
	}
	ns, err := netns.New(nsPrefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

func create(t *testing.T, ns *netns.Namespace, opt Options) Device {
	t.Helper()
	var dev Device
	err := ns.Do(func() error {
		var err error
		dev, err = Create(opt)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// reader reads packets from dev in the background.
func reader(dev Device) <-chan []byte {
	ch := make(chan []byte, 64)
	go func() {
		defer close(ch)
		bs := dev.BatchSize()
		bufs := make([][]byte, bs)
		for i := range bufs {
			bufs[i] = make([]byte, Offset+65535)
		}
		sizes := make([]int, bs)
		for {
			n, err := dev.Read(bufs, sizes, Offset)
			if err != nil {
				return
			}
			for i := 0; i < n; i++ {
				ch <- append([]byte(nil), bufs[i][Offset:Offset+sizes[i]]...)
			}
		}
	}()
	return ch
}

// await returns the first packet for which match is true.
func await(t *testing.T, ch <-chan []byte, what string, match func([]byte) bool) []byte {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case p, ok := <-ch:
			if !ok {
				t.Fatalf("device closed while waiting for %s", what)
			}
			if match(p) {
				return p
			}
		case <-timeout:
			t.Fatalf("no %s read from the TUN", what)
		}
	}
}

func checksum(b []byte, sum uint32) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// write sends one packet into the device with Offset headroom.
func write(t *testing.T, dev Device, pkt []byte) {
	t.Helper()
	buf := make([]byte, Offset+len(pkt))
	copy(buf[Offset:], pkt)
	if _, err := dev.Write([][]byte{buf}, Offset); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

func TestCreateReadWriteClose(t *testing.T) {
	ns := needRoot(t)
	opt := Options{
		Name:      "braidt0",
		MTU:       1400,
		Addresses: []netip.Prefix{netip.MustParsePrefix("100.64.0.1/24"), netip.MustParsePrefix("fd00::1/64")},
		Routes:    []netip.Prefix{netip.MustParsePrefix("100.65.0.0/16"), netip.MustParsePrefix("fd00:1::/64"), netip.MustParsePrefix("100.64.0.0/24")},
	}
	dev := create(t, ns, opt)
	h := ns.Netlink()

	link, err := h.LinkByName("braidt0")
	if err != nil {
		t.Fatal(err)
	}
	if link.Type() != "tuntap" || link.Attrs().Flags&net.FlagUp == 0 || link.Attrs().MTU != 1400 {
		t.Fatalf("link %s type %s flags %v mtu %d", link.Attrs().Name, link.Type(), link.Attrs().Flags, link.Attrs().MTU)
	}
	if mtu, err := dev.MTU(); err != nil || mtu != 1400 {
		t.Errorf("MTU() = %d, %v", mtu, err)
	}
	if name, _ := dev.Name(); name != "braidt0" {
		t.Errorf("Name() = %q", name)
	}
	addrs, _ := h.AddrList(link, netlink.FAMILY_ALL)
	var have []string
	for _, a := range addrs {
		have = append(have, a.IPNet.String())
	}
	for _, want := range []string{"100.64.0.1/24", "fd00::1/64"} {
		if !strings.Contains(strings.Join(have, " "), want) {
			t.Errorf("address %s missing; have %v", want, have)
		}
	}
	routes, _ := h.RouteList(link, netlink.FAMILY_ALL)
	var rs []string
	for _, r := range routes {
		if r.Dst != nil {
			rs = append(rs, r.Dst.String())
		}
	}
	for _, want := range []string{"100.65.0.0/16", "fd00:1::/64"} {
		if !strings.Contains(strings.Join(rs, " "), want) {
			t.Errorf("route %s missing; have %v", want, rs)
		}
	}
	// The tunnel host's host was on the route list twice: once connected,
	// once asked for. Create must not own (and later delete) the connected one.
	if got := len(dev.(*device).routes); got != 2 {
		t.Errorf("Create recorded %d routes as its own, want 2", got)
	}

	pkts := reader(dev)

	// IPv4: a ping from inside the namespace to 100.64.0.2 leaves through
	// the TUN; we answer it by writing a reply into the TUN.
	var ic *icmp.PacketConn
	if err := ns.Do(func() error {
		var err error
		ic, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	req, _ := (&icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: 0x4242, Seq: 7, Data: []byte("braid")}}).Marshal(nil)
	if _, err := ic.WriteTo(req, &net.IPAddr{IP: net.ParseIP("100.64.0.2")}); err != nil {
		t.Fatal(err)
	}
	p := await(t, pkts, "ICMP echo request to 100.64.0.2", func(p []byte) bool {
		return len(p) >= 28 && p[0]>>4 == 4 && p[9] == 1 && p[20] == 8 &&
			netip.AddrFrom4([4]byte(p[16:20])) == netip.MustParseAddr("100.64.0.2")
	})
	if src := netip.AddrFrom4([4]byte(p[12:16])); src != netip.MustParseAddr("100.64.0.1") {
		t.Errorf("echo request from %v", src)
	}
	ihl := int(p[0]&0xf) * 4
	reply := append([]byte(nil), p...)
	copy(reply[12:16], p[16:20]) // swap addresses
	copy(reply[16:20], p[12:16])
	reply[8] = 64
	reply[10], reply[11] = 0, 0
	binary.BigEndian.PutUint16(reply[10:], checksum(reply[:ihl], 0))
	reply[ihl] = 0 // echo reply
	reply[ihl+2], reply[ihl+3] = 0, 0
	binary.BigEndian.PutUint16(reply[ihl+2:], checksum(reply[ihl:], 0))
	write(t, dev, reply)
	ic.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		buf := make([]byte, 1500)
		n, from, err := ic.ReadFrom(buf)
		if err != nil {
			t.Fatalf("echo reply written to the TUN never reached the socket: %v", err)
		}
		m, err := icmp.ParseMessage(1, buf[:n])
		if err != nil || m.Type != ipv4.ICMPTypeEchoReply {
			continue
		}
		if e := m.Body.(*icmp.Echo); e.ID == 0x4242 && e.Seq == 7 && string(e.Data) == "braid" && from.String() == "100.64.0.2" {
			break
		}
	}

	// IPv6 the same way; the kernel verifies the ICMPv6 checksum with the
	// pseudo-header, so a wrong reply would be dropped.
	var ic6 *icmp.PacketConn
	if err := ns.Do(func() error {
		var err error
		ic6, err = icmp.ListenPacket("ip6:ipv6-icmp", "::")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ic6.Close()
	req6, _ := (&icmp.Message{Type: ipv6.ICMPTypeEchoRequest, Body: &icmp.Echo{ID: 0x4343, Seq: 9, Data: []byte("braid6")}}).Marshal(nil)
	if _, err := ic6.WriteTo(req6, &net.IPAddr{IP: net.ParseIP("fd00::2")}); err != nil {
		t.Fatal(err)
	}
	p6 := await(t, pkts, "ICMPv6 echo request to fd00::2", func(p []byte) bool {
		return len(p) >= 48 && p[0]>>4 == 6 && p[6] == 58 && p[40] == 128 &&
			netip.AddrFrom16([16]byte(p[24:40])) == netip.MustParseAddr("fd00::2")
	})
	r6 := append([]byte(nil), p6...)
	copy(r6[8:24], p6[24:40])
	copy(r6[24:40], p6[8:24])
	r6[7] = 64
	r6[40] = 129
	r6[42], r6[43] = 0, 0
	var pseudo uint32
	for i := 8; i < 40; i += 2 {
		pseudo += uint32(binary.BigEndian.Uint16(r6[i:]))
	}
	pseudo += uint32(len(r6)-40) + 58
	binary.BigEndian.PutUint16(r6[42:], checksum(r6[40:], pseudo))
	write(t, dev, r6)
	ic6.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		buf := make([]byte, 1500)
		n, _, err := ic6.ReadFrom(buf)
		if err != nil {
			t.Fatalf("ICMPv6 echo reply never reached the socket: %v", err)
		}
		m, err := icmp.ParseMessage(58, buf[:n])
		if err == nil && m.Type == ipv6.ICMPTypeEchoReply && m.Body.(*icmp.Echo).ID == 0x4343 {
			break
		}
	}

	// Close unblocks the reader and removes routes and link.
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-drainClosed(pkts):
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock Read")
	}
	if _, err := h.LinkByName("braidt0"); err == nil {
		t.Fatal("braidt0 still exists after Close")
	}
	if dev.(*device).leftover {
		t.Error("closing the TUN file descriptor did not remove the interface; Close had to delete it")
	}
	all, _ := h.RouteList(nil, netlink.FAMILY_ALL)
	for _, r := range all {
		if r.Dst != nil && (r.Dst.String() == "100.65.0.0/16" || r.Dst.String() == "fd00:1::/64") {
			t.Fatalf("route %v survived Close", r.Dst)
		}
	}
	bufs := [][]byte{make([]byte, 100)}
	if _, err := dev.Read(bufs, []int{0}, Offset); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Read after Close: %v, want os.ErrClosed", err)
	}
}

func drainClosed(ch <-chan []byte) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		for range ch {
		}
		close(done)
	}()
	return done
}

func TestCreateErrors(t *testing.T) {
	ns := needRoot(t)
	dev := create(t, ns, Options{Name: "braidt1"})
	if mtu, _ := dev.MTU(); mtu != DefaultMTU {
		t.Errorf("default MTU %d", mtu)
	}
	err := ns.Do(func() error { _, err := Create(Options{Name: "braidt1"}); return err })
	if err == nil || err.Error() != `tundev: TUN device "braidt1" already exists and is in use` {
		t.Errorf("second device with the same name: %v", err)
	}
	err = ns.Do(func() error { _, err := Create(Options{Name: "lo"}); return err })
	if err == nil || !strings.Contains(err.Error(), "another type") {
		t.Errorf("name of a non-TUN link: %v", err)
	}
	err = ns.Do(func() error { _, err := Create(Options{Name: "braid-name-too-long"}); return err })
	if err == nil || !strings.Contains(err.Error(), "longer than 15") {
		t.Errorf("long name: %v", err)
	}
	// Nothing half-made stays behind after a failure: the second, duplicate
	// address fails (EEXIST) after the device exists; it must be removed.
	err = ns.Do(func() error {
		_, err := Create(Options{Name: "braidt2", Routes: []netip.Prefix{netip.MustParsePrefix("100.66.0.0/16")}, Addresses: []netip.Prefix{netip.MustParsePrefix("100.66.0.1/16"), netip.MustParsePrefix("100.66.0.1/16")}})
		return err
	})
	if err == nil {
		t.Error("duplicate address accepted")
	}
	if _, lerr := ns.Netlink().LinkByName("braidt2"); lerr == nil {
		t.Errorf("failed Create (%v) left braidt2 behind", err)
	}

	saved := tunPath
	tunPath = "/nonexistent/net/tun"
	_, err = Create(Options{})
	tunPath = saved
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/net/tun does not exist") {
		t.Errorf("missing clone device: %v", err)
	}
}

// TestCreateWithoutCapability drops CAP_NET_ADMIN from this thread only
// (capabilities are per thread on Linux) and checks the message.
func TestCreateWithoutCapability(t *testing.T) {
	ns := needRoot(t)
	err := ns.Do(func() error {
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var saved [2]unix.CapUserData
		if err := unix.Capget(&hdr, &saved[0]); err != nil {
			return err
		}
		dropped := saved
		dropped[unix.CAP_NET_ADMIN/32].Effective &^= 1 << (unix.CAP_NET_ADMIN % 32)
		if err := unix.Capset(&hdr, &dropped[0]); err != nil {
			return err
		}
		_, cerr := Create(Options{Name: "braidt3"})
		if err := unix.Capset(&hdr, &saved[0]); err != nil {
			return fmt.Errorf("restoring capabilities: %w", err) // thread stays locked and dies
		}
		runtime.UnlockOSThread()
		want := `tundev: creating TUN device "braidt3" needs root or CAP_NET_ADMIN`
		if cerr == nil || cerr.Error() != want {
			return fmt.Errorf("without CAP_NET_ADMIN: %v, want %q", cerr, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
