// Package flood sends a stream of UDP datagrams with spoofed source addresses from
// inside a network namespace: the attacker of braid's hardening measurements, who
// replays one captured handshake initiation from addresses it does not own.
//
// It writes whole IPv4 packets on a raw socket (IP_HDRINCL), so each datagram can
// carry a different source address and port, drawn from Sources. The socket belongs
// to the namespace it was opened in: packets never leave the lab.
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

	"github.com/braid-vpn/braid/netns"
)

// Config says what to send.
type Config struct {
	Target netip.AddrPort // where every datagram goes
	// Sources is the IPv4 prefix the source addresses are drawn from (uniformly,
	// with random ports 1024-65535).
	Sources netip.Prefix
	Payload []byte // the UDP payload of every datagram
	Rate    int    // datagrams per second; 0 sends as fast as the machine can
	Seed    uint64 // makes the sequence of sources reproducible
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

// Run sends from inside ns until ctx ends. The raw socket is opened in ns (on a
// locked thread) and keeps to it afterwards, whatever thread writes.
func Run(ctx context.Context, ns *netns.Namespace, cfg Config) (Result, error) {
	if !cfg.Target.Addr().Is4() || !cfg.Sources.Addr().Is4() {
		return Result{}, errors.New("flood: IPv4 target and sources only")
	}
	if len(cfg.Payload) == 0 || len(cfg.Payload) > 1400 {
		return Result{}, errors.New("flood: payload must be 1..1400 bytes")
	}
	var fd int
	if err := ns.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
		return err
	}); err != nil {
		return Result{}, fmt.Errorf("flood: raw socket in %s (needs CAP_NET_RAW): %w", ns, err)
	}
	defer unix.Close(fd)
	dst := &unix.SockaddrInet4{Addr: cfg.Target.Addr().As4()}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x666c6f6f64))
	buf := make([]byte, 28+len(cfg.Payload))
	var res Result
	start := time.Now()
	// Paced in slices of 1 ms: sleep when ahead of the rate.
	for ctx.Err() == nil {
		if cfg.Rate > 0 && res.Sent+res.Errors >= int64(time.Since(start).Seconds()*float64(cfg.Rate)) {
			time.Sleep(time.Millisecond)
			continue
		}
		for range 64 {
			p := packet(buf, source(rng, cfg.Sources), cfg.Target, cfg.Payload)
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

// packet builds the IPv4/UDP packet for one source into b (len ≥ 28+payload) and
// returns it. The UDP checksum is left zero (allowed for IPv4); the kernel fills in
// the IP checksum and length for IP_HDRINCL sockets.
func packet(b []byte, src netip.AddrPort, dst netip.AddrPort, payload []byte) []byte {
	n := 28 + len(payload)
	b = b[:n]
	clear(b[:28])
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(n))
	b[8] = 64 // TTL
	b[9] = 17 // UDP
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(b[12:16], s[:])
	copy(b[16:20], d[:])
	binary.BigEndian.PutUint16(b[20:], src.Port())
	binary.BigEndian.PutUint16(b[22:], dst.Port())
	binary.BigEndian.PutUint16(b[24:], uint16(8+len(payload)))
	copy(b[28:], payload)
	return b
}

// source draws a random source address and port in p.
func source(r *rand.Rand, p netip.Prefix) netip.AddrPort {
	base := p.Masked().Addr().As4()
	a := binary.BigEndian.Uint32(base[:])
	if bits := 32 - p.Bits(); bits > 0 {
		a |= r.Uint32() & (1<<bits - 1)
	}
	port := uint16(1024 + r.IntN(65535-1024))
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(binary.BigEndian.AppendUint32(nil, a))), port)
}
