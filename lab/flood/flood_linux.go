package flood

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"golang.org/x/sys/unix"

	"github.com/braid-vpn/braid/netns"
)

// Run sends from inside ns until ctx ends. The raw socket is opened in ns (on a
// locked thread) and keeps to it afterwards, whatever thread writes.
func Run(ctx context.Context, ns *netns.Namespace, cfg Config) (Result, error) {
	if err := cfg.check(); err != nil {
		return Result{}, err
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
		if cfg.Rate > 0 {
			due := int64(time.Since(start).Seconds() * float64(cfg.Rate))
			if res.Sent+res.Errors >= due {
				time.Sleep(time.Millisecond)
				continue
			}
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
