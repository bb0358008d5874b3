// Package flood sends a stream of UDP datagrams with spoofed source addresses from
// inside a network namespace: the attacker of braid's hardening measurements. It
// either replays one captured handshake initiation, or forges a distinct initiation
// per datagram (random ephemeral key and body, valid mac1 for the server's public
// key, no mac2), which is what an off-path host that knows the server's public key
// can send: the server's response cache cannot answer such copies, and each one
// reaches the server's per-source checks.
//
// It writes whole IP packets on a raw socket (IPv4 with IP_HDRINCL, IPv6 with
// IPV6_HDRINCL), so each datagram can carry a different source address and port,
// drawn from Sources. The socket belongs to the namespace it was opened in: packets
// never leave the lab.
package flood

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/netns"
	"github.com/braid-vpn/braid/noise"
	"github.com/braid-vpn/braid/wire"
)

// Config says what to send.
type Config struct {
	Target netip.AddrPort // where every datagram goes
	// Sources are the prefixes the source addresses are drawn from: a prefix
	// uniformly at random, then an address in it uniformly, with a random port
	// 1024-65535. All must be of Target's family.
	Sources []netip.Prefix
	// Payload is the UDP payload of every datagram; with Forge set it is only a
	// template whose length the forged initiations take (empty: the length of an
	// initiation carrying a timestamp and no parameters).
	Payload []byte
	// Forge, when not the zero key, is the server's public key: every datagram
	// is then a fresh initiation with random contents and a valid mac1.
	Forge keys.Key
	Rate  int    // datagrams per second; 0 sends as fast as the machine can
	Seed  uint64 // makes the sequence of sources (and forged bodies) reproducible
}

// Result says what was sent.
type Result struct {
	Sent     int64
	Errors   int64
	Duration time.Duration
}

// PerSecond is the achieved rate.
func (r Result) PerSecond() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.Sent) / r.Duration.Seconds()
}

// header lengths of the IP and UDP headers written before the payload.
const (
	ip4Len = 20
	ip6Len = 40
	udpLen = 8
)

// check validates cfg and returns the payload length and IP header length.
func (cfg *Config) check() (n, hdr int, err error) {
	v4 := cfg.Target.Addr().Is4()
	if len(cfg.Sources) == 0 {
		return 0, 0, errors.New("flood: no source prefixes")
	}
	for _, p := range cfg.Sources {
		if p.Addr().Is4() != v4 || !p.IsValid() {
			return 0, 0, fmt.Errorf("flood: source prefix %v is not of the target's family", p)
		}
	}
	n = len(cfg.Payload)
	if cfg.Forge != (keys.Key{}) {
		if n == 0 {
			n = wire.MinInitLen + wire.TimestampLen
		}
		if n < wire.MinInitLen+wire.TimestampLen || n > wire.MaxInitLen {
			return 0, 0, fmt.Errorf("flood: a forged initiation must be %d..%d bytes", wire.MinInitLen+wire.TimestampLen, wire.MaxInitLen)
		}
	}
	if n == 0 || n > 1400 {
		return 0, 0, errors.New("flood: payload must be 1..1400 bytes")
	}
	if v4 {
		return n, ip4Len, nil
	}
	return n, ip6Len, nil
}

// Run sends from inside ns until ctx ends. The raw socket is opened in ns (on a
// locked thread) and keeps to it afterwards, whatever thread writes.
func Run(ctx context.Context, ns *netns.Namespace, cfg Config) (Result, error) {
	n, hdr, err := cfg.check()
	if err != nil {
		return Result{}, err
	}
	v4 := cfg.Target.Addr().Is4()
	var fd int
	if err := ns.Do(func() (err error) {
		if v4 {
			fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
			return err
		}
		// IPPROTO_RAW on an IPv6 socket implies IPV6_HDRINCL (Linux ≥ 4.5).
		fd, err = unix.Socket(unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_RAW)
		return err
	}); err != nil {
		return Result{}, fmt.Errorf("flood: raw socket in %s (needs CAP_NET_RAW): %w", ns, err)
	}
	defer unix.Close(fd)
	var dst unix.Sockaddr
	if v4 {
		dst = &unix.SockaddrInet4{Addr: cfg.Target.Addr().As4()}
	} else {
		dst = &unix.SockaddrInet6{Addr: cfg.Target.Addr().As16()}
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x666c6f6f64))
	payload := make([]byte, n)
	copy(payload, cfg.Payload)
	var f *forger
	if cfg.Forge != (keys.Key{}) {
		f = &forger{mac1: noise.NewMAC1Key(cfg.Forge)}
	}
	buf := make([]byte, hdr+udpLen+n)
	var res Result
	start := time.Now()
	// Paced in slices of 1 ms: sleep when ahead of the rate, and send only what
	// is due, at most 64 at once. (Bursts of 64 at a low rate would leave gaps
	// of tens of milliseconds in which a genuine sender finds its source's
	// tokens refilled: that is not the flood the rate describes.)
	for ctx.Err() == nil {
		batch := int64(64)
		if cfg.Rate > 0 {
			batch = min(batch, int64(time.Since(start).Seconds()*float64(cfg.Rate))-res.Sent-res.Errors)
			if batch <= 0 {
				time.Sleep(time.Millisecond)
				continue
			}
		}
		for range batch {
			if f != nil {
				f.forge(rng, payload)
			}
			src := source(rng, cfg.Sources[rng.IntN(len(cfg.Sources))])
			var p []byte
			if v4 {
				p = packet(buf, src, cfg.Target, payload)
			} else {
				p = packet6(buf, src, cfg.Target, payload)
			}
			if err := unix.Sendto(fd, p, 0, dst); err != nil {
				res.Errors++
			} else {
				res.Sent++
			}
		}
	}
	res.Duration = time.Since(start)
	return res, nil
}

// forger makes initiations that pass a server's mac1 check and nothing more.
type forger struct {
	mac1 noise.MAC1Key
}

// forge rewrites b (an initiation's length) as a new initiation: type and
// reserved bytes, a random sender index, random ephemeral key, encrypted static
// key and payload (the server spends a Diffie-Hellman on them before it finds
// they do not decrypt), the mac1 the server checks, and no mac2 (no cookie).
func (f *forger) forge(r *rand.Rand, b []byte) {
	b[0], b[1], b[2], b[3] = wire.TypeHandshakeInit, 0, 0, 0
	body := b[4 : len(b)-2*wire.MACLen]
	for i := 0; i < len(body); i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(body[i:], w[:])
	}
	f.mac1.PutInitiationMAC1(b)
	clear(b[len(b)-wire.MACLen:])
}

// packet builds the IPv4/UDP packet for one source into b (len ≥ 28+payload) and
// returns it. The UDP checksum is left zero (allowed for IPv4); the kernel fills in
// the IP checksum and length for IP_HDRINCL sockets.
func packet(b []byte, src netip.AddrPort, dst netip.AddrPort, payload []byte) []byte {
	n := ip4Len + udpLen + len(payload)
	b = b[:n]
	clear(b[:ip4Len+udpLen])
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(n))
	b[8] = 64 // TTL
	b[9] = 17 // UDP
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(b[12:16], s[:])
	copy(b[16:20], d[:])
	putUDP(b[ip4Len:], src.Port(), dst.Port(), payload)
	return b
}

// UDP4 is packet with the IPv4 header checksum filled in: what an in-memory
// TUN device must hand an engine whose peer writes the packet into a real
// TUN, since the receiving kernel drops a packet whose header checksum is
// wrong (a raw socket's kernel fills it in, so the flood does not need it).
func UDP4(b []byte, src, dst netip.AddrPort, payload []byte) []byte {
	b = packet(b, src, dst, payload)
	binary.BigEndian.PutUint16(b[10:], ^fold(onesSum(0, b[:ip4Len])))
	return b
}

// packet6 builds the IPv6/UDP packet for one source into b (len ≥ 48+payload).
// IPv6 makes the UDP checksum mandatory (RFC 8200 §8.1), and with IPV6_HDRINCL
// the kernel computes nothing, so it is filled in here.
func packet6(b []byte, src netip.AddrPort, dst netip.AddrPort, payload []byte) []byte {
	n := ip6Len + udpLen + len(payload)
	b = b[:n]
	clear(b[:ip6Len+udpLen])
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], uint16(udpLen+len(payload)))
	b[6] = 17 // next header: UDP
	b[7] = 64 // hop limit
	s, d := src.Addr().As16(), dst.Addr().As16()
	copy(b[8:24], s[:])
	copy(b[24:40], d[:])
	u := b[ip6Len:]
	putUDP(u, src.Port(), dst.Port(), payload)
	// Pseudo-header: addresses, upper-layer length, next header.
	sum := onesSum(0, b[8:40])
	sum += uint32(udpLen + len(payload))
	sum += 17
	sum = onesSum(sum, u)
	c := ^fold(sum)
	if c == 0 {
		c = 0xffff // a computed zero is sent as all ones
	}
	binary.BigEndian.PutUint16(u[6:], c)
	return b
}

// putUDP writes the UDP header (checksum zero) and the payload into b.
func putUDP(b []byte, sport, dport uint16, payload []byte) {
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint16(b[4:], uint16(udpLen+len(payload)))
	b[6], b[7] = 0, 0
	copy(b[udpLen:], payload)
}

// onesSum adds b as big-endian 16-bit words to sum (the Internet checksum's sum).
func onesSum(sum uint32, b []byte) uint32 {
	for len(b) >= 2 {
		sum += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	return sum
}

// fold folds the carries of a one's-complement sum into 16 bits.
func fold(sum uint32) uint16 {
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}

// source draws a random source address in p and a random port.
func source(r *rand.Rand, p netip.Prefix) netip.AddrPort {
	a := p.Masked().Addr().As16()
	host := 128 - p.Bits()
	if p.Addr().Is4() {
		host = 32 - p.Bits()
	}
	// Random bits into the host part, from the last byte backwards.
	for i := 15; host > 0; i-- {
		v := byte(r.Uint32())
		if host < 8 {
			v &= 1<<host - 1
		}
		a[i] |= v
		host -= 8
	}
	port := uint16(1024 + r.IntN(65535-1024))
	addr := netip.AddrFrom16(a)
	if p.Addr().Is4() {
		addr = addr.Unmap()
	}
	return netip.AddrPortFrom(addr, port)
}
