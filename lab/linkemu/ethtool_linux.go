//go:build linux

package linkemu

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unsafe"

	"github.com/braid-vpn/braid/netns"
	"golang.org/x/sys/unix"
)

// Why offloads must go, and where.
//
// A veth hands the skb its peer transmitted to the other end unchanged, and
// an AF_PACKET socket on that end copies out whatever the skb holds. With
// the default veth features the sender's stack leaves work to the "device":
//
//   - TSO/GSO (and UDP GSO, GSO lists…): one skb carries up to 64 KB of
//     TCP or UDP payload that would be cut into MTU-sized frames on real
//     hardware. The emulator would read one super-frame, serialize it as a
//     single 64 KB unit (wrong timing, wrong loss granularity) and could not
//     send it out of the other veth (larger than its MTU).
//   - TX checksum offload: the transport checksum is left as a partial sum
//     (CHECKSUM_PARTIAL) for the device to finish. Copied out as bytes and
//     re-injected through a packet socket, the frame arrives with a wrong
//     checksum and the receiving host drops it silently.
//   - GRO/LRO on the receiving end merges frames into super-frames, with
//     the same effect as GSO.
//
// These are features of the interface that transmits into the veth the
// emulator reads, i.e. of the peers in the neighbouring namespaces, and of
// the emulator's own ends (GRO on receive; TX features for the frames it
// writes, which reach the far host through the next veth). Start turns
// them off on the emulator's interfaces; whoever builds the topology must
// call DisableOffloads on the far ends too (the hosts' veths). Frames that
// still arrive larger than the MTU are counted as DroppedOversize.
//
// The features are switched with the ethtool ioctl (SIOCETHTOOL,
// ETHTOOL_SFEATURES): the kernel publishes its feature names as a string
// set, and every changeable feature whose name marks a segmentation,
// checksum, scatter-gather or receive-coalescing offload is cleared. The
// result is read back; a feature that stays on is an error.

const (
	ethSSFeatures  = 4  // ETH_SS_FEATURES string set
	ethGStringLen  = 32 // ETH_GSTRING_LEN
	ifreqSize      = 40 // struct ifreq on 64-bit Linux
	ethtoolWordLen = 4
)

// offloadFeature reports whether a kernel feature name is one DisableOffloads
// turns off.
func offloadFeature(name string) bool {
	switch {
	case strings.HasPrefix(name, "tx-checksum"),
		strings.HasPrefix(name, "tx-scatter-gather"),
		strings.HasSuffix(name, "-segmentation"),
		strings.HasPrefix(name, "tx-gso"),
		strings.HasPrefix(name, "rx-gro"),
		name == "rx-lro",
		name == "rx-udp-gro-forwarding":
		return true
	}
	return false
}

// ifreqData is struct ifreq with the ifr_data member, padded to its size.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [ifreqSize - unix.IFNAMSIZ - unsafe.Sizeof(uintptr(0))]byte
}

func ethtool(fd int, ifname string, buf []byte) error {
	var ifr ifreqData
	copy(ifr.name[:unix.IFNAMSIZ-1], ifname)
	ifr.data = unsafe.Pointer(&buf[0])
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if e != 0 {
		return e
	}
	return nil
}

var ne = binary.NativeEndian

// featureNames reads the ETH_SS_FEATURES string set.
func featureNames(fd int, ifname string) ([]string, error) {
	// struct ethtool_sset_info { u32 cmd; u32 reserved; u64 sset_mask; u32 data[]; }
	info := make([]byte, 4+4+8+4)
	ne.PutUint32(info[0:], unix.ETHTOOL_GSSET_INFO)
	ne.PutUint64(info[8:], 1<<ethSSFeatures)
	if err := ethtool(fd, ifname, info); err != nil {
		return nil, fmt.Errorf("ETHTOOL_GSSET_INFO: %w", err)
	}
	if ne.Uint64(info[8:])&(1<<ethSSFeatures) == 0 {
		return nil, fmt.Errorf("ETHTOOL_GSSET_INFO: no feature string set")
	}
	n := int(ne.Uint32(info[16:]))
	// struct ethtool_gstrings { u32 cmd; u32 string_set; u32 len; u8 data[]; }
	gs := make([]byte, 12+n*ethGStringLen)
	ne.PutUint32(gs[0:], unix.ETHTOOL_GSTRINGS)
	ne.PutUint32(gs[4:], ethSSFeatures)
	ne.PutUint32(gs[8:], uint32(n))
	if err := ethtool(fd, ifname, gs); err != nil {
		return nil, fmt.Errorf("ETHTOOL_GSTRINGS: %w", err)
	}
	names := make([]string, n)
	for i := range names {
		s := gs[12+i*ethGStringLen : 12+(i+1)*ethGStringLen]
		if j := strings.IndexByte(string(s), 0); j >= 0 {
			s = s[:j]
		}
		names[i] = string(s)
	}
	return names, nil
}

// featureBlock is struct ethtool_get_features_block.
type featureBlock struct{ available, requested, active, neverChanged uint32 }

func getFeatures(fd int, ifname string, n int) ([]featureBlock, error) {
	words := (n + 31) / 32
	// struct ethtool_gfeatures { u32 cmd; u32 size; struct block features[]; }
	buf := make([]byte, 8+words*4*ethtoolWordLen)
	ne.PutUint32(buf[0:], unix.ETHTOOL_GFEATURES)
	ne.PutUint32(buf[4:], uint32(words))
	if err := ethtool(fd, ifname, buf); err != nil {
		return nil, fmt.Errorf("ETHTOOL_GFEATURES: %w", err)
	}
	blocks := make([]featureBlock, words)
	for i := range blocks {
		b := buf[8+i*16:]
		blocks[i] = featureBlock{ne.Uint32(b), ne.Uint32(b[4:]), ne.Uint32(b[8:]), ne.Uint32(b[12:])}
	}
	return blocks, nil
}

// disableOffloads clears the offload features of ifname using fd, any
// socket of the interface's namespace.
func disableOffloads(fd int, ifname string) error {
	names, err := featureNames(fd, ifname)
	if err != nil {
		return err
	}
	blocks, err := getFeatures(fd, ifname, len(names))
	if err != nil {
		return err
	}
	// struct ethtool_sfeatures { u32 cmd; u32 size; struct { u32 valid; u32 requested; } features[]; }
	set := make([]byte, 8+len(blocks)*8)
	ne.PutUint32(set[0:], unix.ETHTOOL_SFEATURES)
	ne.PutUint32(set[4:], uint32(len(blocks)))
	var fixed []string
	change := false
	for i, name := range names {
		w, bit := i/32, uint32(1)<<(i%32)
		if !offloadFeature(name) || blocks[w].active&bit == 0 && blocks[w].requested&bit == 0 {
			continue
		}
		if blocks[w].available&bit == 0 {
			if blocks[w].active&bit != 0 {
				fixed = append(fixed, name)
			}
			continue
		}
		off := 8 + w*8
		ne.PutUint32(set[off:], ne.Uint32(set[off:])|bit) // valid; requested stays 0
		change = true
	}
	if len(fixed) > 0 {
		return fmt.Errorf("offloads fixed on by the driver: %s", strings.Join(fixed, ", "))
	}
	if change {
		// A positive return (ETHTOOL_F_WISH…) is not an error: the read-back
		// below is the judge.
		if err := ethtool(fd, ifname, set); err != nil {
			return fmt.Errorf("ETHTOOL_SFEATURES: %w", err)
		}
	}
	still, err := activeOffloads(fd, ifname, names)
	if err != nil {
		return err
	}
	if len(still) > 0 {
		return fmt.Errorf("offloads still on after ETHTOOL_SFEATURES: %s", strings.Join(still, ", "))
	}
	return nil
}

// DisableOffloads turns off segmentation, checksum, scatter-gather and
// receive-coalescing offloads of interface ifname in ns, so every frame it
// transmits or receives is a complete frame of at most MTU bytes with its
// checksums filled in (the comment at the top of this file says why).
// Call it on both ends of every veth whose traffic passes an emulated link;
// Start does it for the emulator's own interfaces.
func DisableOffloads(ns *netns.Namespace, ifname string) error {
	err := withSocket(ns, func(fd int) error { return disableOffloads(fd, ifname) })
	if err != nil {
		return fmt.Errorf("linkemu: disabling offloads on %s in %s: %w", ifname, ns.Name(), err)
	}
	return nil
}

// ActiveOffloads lists the offload features (as DisableOffloads chooses
// them) that are on for ifname in ns; tests and the lab use it to check a
// topology before trusting its numbers.
func ActiveOffloads(ns *netns.Namespace, ifname string) ([]string, error) {
	var on []string
	err := withSocket(ns, func(fd int) error {
		names, err := featureNames(fd, ifname)
		if err == nil {
			on, err = activeOffloads(fd, ifname, names)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("linkemu: reading offloads of %s in %s: %w", ifname, ns.Name(), err)
	}
	return on, nil
}

// activeOffloads lists the offload features among names that are on now.
func activeOffloads(fd int, ifname string, names []string) ([]string, error) {
	blocks, err := getFeatures(fd, ifname, len(names))
	if err != nil {
		return nil, err
	}
	var on []string
	for i, name := range names {
		if offloadFeature(name) && blocks[i/32].active&(1<<(i%32)) != 0 {
			on = append(on, name)
		}
	}
	return on, nil
}

// withSocket runs f in ns with a socket there: ethtool requests name an
// interface of the socket's namespace.
func withSocket(ns *netns.Namespace, f func(fd int) error) error {
	return ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return f(fd)
	})
}
