package tundev

import (
	"net/netip"

	"golang.zx2c4.com/wireguard/tun"
)

// Device is a TUN device moving batches of IP packets. Every buffer carries
// offset bytes of headroom before the packet.
type Device interface {
	// Read reads one or more packets into bufs[i][offset:], their lengths
	// into sizes[i], and returns how many. It blocks until at least one is
	// available; after Close it fails with an error matching os.ErrClosed.
	Read(bufs [][]byte, sizes []int, offset int) (n int, err error)
	// Write writes the packets bufs[i][offset:]. The bytes before offset may
	// be overwritten (virtio header).
	Write(bufs [][]byte, offset int) (int, error)
	// BatchSize is the most packets one Read returns; buffers for Read
	// should come in batches of this size.
	BatchSize() int
	MTU() (int, error)
	Name() (string, error)
	Close() error
}

// wireguard-go's device is a Device.
var _ Device = tun.Device(nil)

// Offset is the headroom in front of every packet in Read/Write buffers. It
// must be at least the virtio-net header (10 bytes) that wireguard-go's TUN
// puts there; the engine uses the room for its own datagram header.
const Offset = 32

// Defaults for Options.
const (
	// DefaultName is used when Options.Name is empty; the kernel replaces %d
	// by the first free number.
	DefaultName = "braid%d"
	// DefaultMTU is used when Options.MTU is 0: 1500 minus what braid adds
	// on the path (IPv6 40 + UDP 8 + braid header and AEAD tag) with room to
	// spare for PPPoE and tunnels under the path.
	DefaultMTU = 1380
)

// Options configures Create.
type Options struct {
	Name      string         // interface name (≤15 bytes, may contain %d); "" = DefaultName
	MTU       int            // 0 = DefaultMTU
	Addresses []netip.Prefix // interface addresses with prefix length, IPv4 and IPv6
	Routes    []netip.Prefix // routed into the device
}
