package runner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/braid-vpn/braid/httpbench"
)

// CompetingLead is how long the competing downloads run before the measured
// one starts, so that it meets them in congestion avoidance rather than in
// slow start.
const CompetingLead = 2 * time.Second

// competingSize is larger than any competing flow gets through; stop ends it.
const competingSize = 1 << 34 // the web server's largest: hours at the lab's rates

// competition is a set of ordinary TCP downloads over one path that run
// alongside a measured download.
type competition struct {
	n      atomic.Int64 // bytes received by all flows
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
}

func (r *runState) startCompeting(ctx context.Context) (*competition, error) {
	pa, ok := r.tb.Plan.Path(r.exp.CompetingPath)
	if !ok {
		return nil, fmt.Errorf("competing flows: no path %q", r.exp.CompetingPath)
	}
	cctx, cancel := context.WithCancel(ctx)
	c := &competition{cancel: cancel}
	dial := Dialer{NS: r.tb.Client(), From: pa.ClientAddr, CC: r.cc}.Dial
	url := httpbench.URL(netip.AddrPortFrom(r.web.Addr, WebPort).String(), competingSize)
	for range r.exp.Competing {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			var prev int64
			_, err := httpbench.Fetch(cctx, url, httpbench.Options{Dial: dial, OnProgress: func(total int64) {
				c.n.Add(total - prev)
				prev = total
			}})
			if err != nil && cctx.Err() == nil {
				c.mu.Lock()
				c.err = errors.Join(c.err, err)
				c.mu.Unlock()
			}
		}()
	}
	select {
	case <-time.After(CompetingLead):
	case <-ctx.Done():
	}
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err == nil && c.n.Load() == 0 {
		err = errors.New("no byte arrived")
	}
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("competing flows over %s: %w", r.exp.CompetingPath, err)
	}
	return c, nil
}

// bytes is what the flows have received so far (0 for no competition).
func (c *competition) bytes() int64 {
	if c == nil {
		return 0
	}
	return c.n.Load()
}

func (c *competition) stop() {
	c.cancel()
	c.wg.Wait()
}
