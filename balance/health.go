package balance

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/braid-vpn/braid/control"
)

// maxSessionsDoc bounds a /sessions document read (about 200 bytes a
// session: 64 MiB is some 300 000 sessions).
const maxSessionsDoc = 64 << 20

// checkHealth asks every server's /healthz at once and applies the results:
// Failures failures in a row take a server out, Rises successes put it
// back; the initiation map is rewritten when the live set changed.
func (b *Balancer) checkHealth(ctx context.Context) error {
	errs := b.each(ctx, func(ctx context.Context, s Server) error {
		ctx, cancel := context.WithTimeout(ctx, b.cfg.HealthTimeout)
		defer cancel()
		_, err := b.get(ctx, s, control.HealthPath, 64)
		return err
	})
	if ctx.Err() != nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	changed := false
	for i, err := range errs {
		h := &b.health[i]
		s := b.cfg.Servers[i]
		if err != nil {
			h.lastError = err.Error()
			h.rises = 0
			if h.fails++; h.live && h.fails >= b.cfg.Failures {
				h.live, changed = false, true
				b.log.Warn("server down", "id", s.ID, "address", s.Address, "err", err)
			}
			continue
		}
		h.lastError = ""
		h.fails = 0
		if h.rises++; !h.live && h.rises >= b.cfg.Rises {
			h.live, changed = true, true
			b.log.Info("server up", "id", s.ID, "address", s.Address)
		}
	}
	if !changed && b.initMap != nil {
		return nil
	}
	return b.rewriteLocked()
}

// pollRoutes reads every live server's sessions and routes each client
// prefix via the server holding the newest session that lists it; routes
// to prefixes no live server lists are removed. A route it cannot set is
// logged and tried again at the next poll.
func (b *Balancer) pollRoutes(ctx context.Context) {
	b.mu.Lock()
	live := make([]bool, len(b.health))
	for i, h := range b.health {
		live[i] = h.live
	}
	b.mu.Unlock()
	docs := make([][]control.Session, len(b.cfg.Servers))
	errs := b.each(ctx, func(ctx context.Context, s Server) error {
		i := b.index(s.ID)
		if !live[i] {
			return nil
		}
		ctx, cancel := context.WithTimeout(ctx, b.cfg.RoutePoll)
		defer cancel()
		body, err := b.get(ctx, s, control.SessionsPath, maxSessionsDoc)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(body, &docs[i]); err != nil {
			return fmt.Errorf("%s%s: %w", s.Control, control.SessionsPath, err)
		}
		return nil
	})
	if ctx.Err() != nil {
		return
	}
	want := wantedRoutes(docs, errs, b.cfg.VIP.Is4())
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	for i, err := range errs {
		if err != nil {
			b.health[i].lastError = err.Error()
			// A server that did not answer keeps its routes until it is
			// declared down: one lost poll must not cut its clients off.
			for p, j := range b.routes {
				if j == i {
					if _, taken := want[p]; !taken {
						want[p] = i
					}
				}
			}
		}
	}
	for p, i := range want {
		if cur, ok := b.routes[p]; ok && cur == i {
			continue
		}
		if err := b.k.setClientRoute(p, b.cfg.Servers[i].Address); err != nil {
			// Tried again every poll, but said once.
			if !b.refused[p] {
				b.log.Warn("client route", "prefix", p, "via", b.cfg.Servers[i].Address, "err", err)
				b.refused[p] = true
			}
			continue
		}
		delete(b.refused, p)
		b.routes[p] = i
	}
	for p := range b.refused {
		if _, ok := want[p]; !ok {
			delete(b.refused, p)
		}
	}
	for p := range b.routes {
		if _, ok := want[p]; !ok {
			if err := b.k.delClientRoute(p); err != nil {
				b.log.Warn("removing client route", "prefix", p, "err", err)
			}
			delete(b.routes, p)
		}
	}
}

// wantedRoutes picks, for every prefix the servers list, the server whose
// session with it is newest. Only prefixes of the servers' address family
// (IPv4 if is4) can go via them, and never a default route: a client that
// claims 0.0.0.0/0 must not take the balancer's own.
func wantedRoutes(docs [][]control.Session, errs []error, is4 bool) map[netip.Prefix]int {
	want := map[netip.Prefix]int{}
	newest := map[netip.Prefix]time.Time{}
	for i, doc := range docs {
		if errs[i] != nil {
			continue
		}
		for _, s := range doc {
			for _, a := range s.AllowedIPs {
				p, err := netip.ParsePrefix(a)
				if err != nil || p.Addr().Is4() != is4 || p.Bits() == 0 {
					continue
				}
				p = p.Masked()
				if t, seen := newest[p]; !seen || s.LastHandshake.After(t) {
					want[p], newest[p] = i, s.LastHandshake
				}
			}
		}
	}
	return want
}

// each runs fn for every server in parallel and returns their errors by
// server index.
func (b *Balancer) each(ctx context.Context, fn func(context.Context, Server) error) []error {
	errs := make([]error, len(b.cfg.Servers))
	var wg sync.WaitGroup
	for i, s := range b.cfg.Servers {
		wg.Go(func() { errs[i] = fn(ctx, s) })
	}
	wg.Wait()
	return errs
}

// get fetches path from s's control server, reading at most limit bytes.
func (b *Balancer) get(ctx context.Context, s Server, path string, limit int64) ([]byte, error) {
	u := s.Control.JoinPath(path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", u, resp.Status)
	}
	return body, nil
}
