//go:build linux

package linkemu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/braid-vpn/braid/netns"
	"golang.org/x/sys/unix"
)

// Offloads (see the package documentation) are switched with the ethtool
// ioctl: the kernel names its features in a string set, and the changeable
// ones that offloadFeature picks are cleared and read back.

const (
	ethSSFeatures = 4  // ETH_SS_FEATURES string set
	ethGStringLen = 32 // ETH_GSTRING_LEN
	ifreqSize     = 40 // struct ifreq on 64-bit Linux
)

// offloadFeature reports whether a feature is a segmentation, checksum,
// scatter-gather or receive-coalescing offload.
func offloadFeature(name string) bool {
	for _, p := range []string{"tx-checksum", "tx-scatter-gather", "tx-gso", "rx-gro"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return strings.HasSuffix(name, "-segmentation") || name == "rx-lro" || name == "rx-udp-gro-forwarding"
}

// ifreqData is struct ifreq with the ifr_data member, padded to its size.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [ifreqSize - unix.IFNAMSIZ - unsafe.Sizeof(uintptr(0))]byte
}

var ne = binary.NativeEndian

// request is an ethtool request of size bytes that starts with the u32
// words w (the command first).
func request(size int, w ...uint32) []byte {
	buf := make([]byte, size)
	for i, v := range w {
		ne.PutUint32(buf[4*i:], v)
	}
	return buf
}

func ethtool(fd int, ifname string, buf []byte) ([]byte, error) {
	ifr := ifreqData{data: unsafe.Pointer(&buf[0])}
	copy(ifr.name[:unix.IFNAMSIZ-1], ifname)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); e != 0 {
		return nil, e
	}
	return buf, nil
}

// featureBlock is struct ethtool_get_features_block (but never_changed).
type featureBlock struct{ available, requested, active uint32 }

// features reads the names of ifname's features (the ETH_SS_FEATURES string
// set) and their state; names is nil on error.
func features(fd int, ifname string) ([]string, []featureBlock, error) {
	// struct ethtool_sset_info { u32 cmd; u32 reserved; u64 sset_mask; u32 data[]; }
	info := request(20, unix.ETHTOOL_GSSET_INFO)
	ne.PutUint64(info[8:], 1<<ethSSFeatures)
	if _, err := ethtool(fd, ifname, info); err != nil {
		return nil, nil, fmt.Errorf("ETHTOOL_GSSET_INFO: %w", err)
	}
	if ne.Uint64(info[8:])&(1<<ethSSFeatures) == 0 {
		return nil, nil, errors.New("ETHTOOL_GSSET_INFO: no feature string set")
	}
	n := int(ne.Uint32(info[16:]))
	// struct ethtool_gstrings { u32 cmd; u32 string_set; u32 len; u8 data[]; }
	gs, err := ethtool(fd, ifname, request(12+n*ethGStringLen, unix.ETHTOOL_GSTRINGS, ethSSFeatures, uint32(n)))
	if err != nil {
		return nil, nil, fmt.Errorf("ETHTOOL_GSTRINGS: %w", err)
	}
	// struct ethtool_gfeatures { u32 cmd; u32 size; struct ethtool_get_features_block features[]; }
	words := (n + 31) / 32
	buf, err := ethtool(fd, ifname, request(8+words*16, unix.ETHTOOL_GFEATURES, uint32(words)))
	if err != nil {
		return nil, nil, fmt.Errorf("ETHTOOL_GFEATURES: %w", err)
	}
	names, blocks := make([]string, n), make([]featureBlock, words)
	for i := range names {
		s, _, _ := bytes.Cut(gs[12+i*ethGStringLen:12+(i+1)*ethGStringLen], []byte{0})
		names[i] = string(s)
	}
	for i := range blocks {
		b := buf[8+i*16:]
		blocks[i] = featureBlock{ne.Uint32(b), ne.Uint32(b[4:]), ne.Uint32(b[8:])}
	}
	return names, blocks, nil
}

// activeOffloads lists the offloads of ifname that are on.
func activeOffloads(fd int, ifname string) (on []string, err error) {
	names, blocks, err := features(fd, ifname)
	for i, name := range names {
		if offloadFeature(name) && blocks[i/32].active&(1<<(i%32)) != 0 {
			on = append(on, name)
		}
	}
	return on, err
}

// disableOffloads clears the offloads of ifname using fd, any socket of the
// interface's namespace.
func disableOffloads(fd int, ifname string) error {
	names, blocks, err := features(fd, ifname)
	if err != nil {
		return err
	}
	// struct ethtool_sfeatures { u32 cmd; u32 size; struct { u32 valid; u32 requested; } features[]; }
	set := append([]uint32{unix.ETHTOOL_SFEATURES, uint32(len(blocks))}, make([]uint32, 2*len(blocks))...)
	change := false
	for i, name := range names {
		if b, bit := blocks[i/32], uint32(1)<<(i%32); offloadFeature(name) && b.available&bit != 0 && (b.active|b.requested)&bit != 0 {
			set[2+2*(i/32)] |= bit // valid; requested stays 0
			change = true
		}
	}
	// A positive return (ETHTOOL_F_WISH…) is not an error, and a feature the
	// driver keeps on is not changeable: the read-back is the judge.
	if change {
		if _, err := ethtool(fd, ifname, request(4*len(set), set...)); err != nil {
			return fmt.Errorf("ETHTOOL_SFEATURES: %w", err)
		}
	}
	still, err := activeOffloads(fd, ifname)
	if err == nil && len(still) > 0 {
		err = fmt.Errorf("offloads still on (fixed by the driver or refused): %s", strings.Join(still, ", "))
	}
	return err
}

// DisableOffloads turns off the offloads of interface ifname in ns, so that
// it sends and receives complete frames of at most MTU bytes. Call it on both
// ends of every veth feeding an emulated link; Start does it for its own.
func DisableOffloads(ns *netns.Namespace, ifname string) error {
	return withSocket(ns, "disabling offloads on "+ifname, func(fd int) error { return disableOffloads(fd, ifname) })
}

// ActiveOffloads lists the offloads (as DisableOffloads chooses them) that
// are on for ifname in ns, to check a topology before trusting its numbers.
func ActiveOffloads(ns *netns.Namespace, ifname string) (on []string, err error) {
	err = withSocket(ns, "reading offloads of "+ifname, func(fd int) (err error) {
		on, err = activeOffloads(fd, ifname)
		return err
	})
	return on, err
}

// withSocket runs f in ns with a socket there (ethtool requests name an
// interface of the socket's namespace), and says what failed.
func withSocket(ns *netns.Namespace, what string, f func(fd int) error) error {
	err := ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return f(fd)
	})
	if err != nil {
		return fmt.Errorf("linkemu: %s in %s: %w", what, ns.Name(), err)
	}
	return nil
}
