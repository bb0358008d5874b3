package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/httpbench"
)

// Phases of the window whose stalls are told apart: a kill's effect on
// the clients is measured against what the same clients saw before it.
const (
	phaseBeforeKill = iota
	phaseAfterKill
	phaseAfterRevive
	phases
)

// clock is what every download's stall accounting shares: the window's
// start (unix ns; no stall counts before it) and the phase it is in.
type clock struct {
	from  atomic.Int64
	phase atomic.Int32
}

// progress is one client's download as its reading goroutine sees it;
// the sampler and the report read it while it runs.
type progress struct {
	bytes      atomic.Int64
	last       atomic.Int64 // unix ns of the last read that brought bytes
	maxStall   atomic.Int64 // ns, within the measured window
	stallAt    atomic.Int64 // unix ns when the longest stall began
	phaseStall [phases]atomic.Int64
	failures   atomic.Int64 // downloads that ended in an error and were started again
	lastErr    atomic.Value // string
}

// read records n more bytes at now.
func (p *progress) read(n int64, now int64, clk *clock) {
	p.bytes.Add(n)
	p.stall(now, clk)
	p.last.Store(now)
}

// stall records the gap from the last progress (or the window's start) to
// now; a stall belongs to the phase in which it ends.
func (p *progress) stall(now int64, clk *clock) {
	from := clk.from.Load()
	if now <= from {
		return
	}
	begin := max(p.last.Load(), from)
	gap := now - begin
	if gap > p.maxStall.Load() {
		p.maxStall.Store(gap)
		p.stallAt.Store(begin)
	}
	if ph := &p.phaseStall[clk.phase.Load()]; gap > ph.Load() {
		ph.Store(gap)
	}
}

// download fetches objects of size from the backend through c's tunnel
// until ctx ends, starting again after an error (the stall goes on).
func (c *client) download(ctx context.Context, size int64, clk *clock) {
	url := httpbench.URL(netip.AddrPortFrom(backendAddr, WebPort).String(), size)
	for ctx.Err() == nil {
		var seen int64
		_, err := httpbench.Fetch(ctx, url, httpbench.Options{Dial: c.dialer.Dial, OnProgress: func(total int64) {
			c.dl.read(total-seen, time.Now().UnixNano(), clk)
			seen = total
		}})
		if err != nil && ctx.Err() == nil {
			c.dl.failures.Add(1)
			c.dl.lastErr.Store(err.Error())
			select { // a tunnel being rebuilt refuses connections at once
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// Run builds the fleet, runs the downloads, the events and the
// measurements, and removes everything again. It returns the results so far along
// with an error that cut the run short.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	res := newResults(cfg)
	l, err := build(ctx, cfg)
	if err != nil {
		return res, err
	}
	defer l.close()
	err = l.run(ctx, res)
	res.Finished = time.Now()
	return res, err
}

// run is the measured part: downloads start, the warm-up passes, then the
// window of cfg.Duration with its events.
func (l *lab) run(ctx context.Context, res *Results) error {
	cfg := l.cfg
	dctx, stop := context.WithCancel(ctx)
	var clk clock
	clk.from.Store(time.Now().Add(cfg.Warmup + time.Hour).UnixNano()) // no stall counts before the window
	var wg sync.WaitGroup
	for _, c := range l.clients {
		wg.Go(func() { c.download(dctx, cfg.Object, &clk) })
	}
	defer func() { stop(); wg.Wait() }()
	cfg.Progress(fmt.Sprintf("%d downloads running; warm-up %v, then %v measured", len(l.clients), cfg.Warmup, cfg.Duration))
	if err := sleep(ctx, cfg.Warmup); err != nil {
		return err
	}
	t0 := time.Now()
	clk.from.Store(t0.UnixNano())
	res.Window = t0
	base := make([]int64, len(l.clients))
	for i, c := range l.clients {
		base[i] = c.dl.bytes.Load()
	}
	cpu0, cpus, cpuErr := l.cpu()
	w := watch{l: l, res: res, t0: t0, clk: &clk}
	w.poll() // who holds each session at the start
	res.holdersAt(&res.Start, w.holders)

	type event struct {
		at time.Duration
		do func() error
	}
	var events []event
	if cfg.KillAt > 0 {
		events = append(events, event{cfg.KillAt, func() error { return w.kill(cfg.Kill) }})
		if cfg.ReviveAt > 0 {
			events = append(events, event{cfg.ReviveAt, func() error { return w.revive(ctx, res.Setup.Kill) }})
		}
	}
	events = append(events, event{cfg.Duration, nil})
	sampleTick := time.NewTicker(cfg.Sample)
	defer sampleTick.Stop()
	statusTick := time.NewTicker(StatusEvery)
	defer statusTick.Stop()
	res.Samples = append(res.Samples, w.sample(base))
	var runErr error
	for len(events) > 0 && runErr == nil {
		next := time.NewTimer(time.Until(t0.Add(events[0].at)))
		select {
		case <-ctx.Done():
			runErr = ctx.Err()
		case <-sampleTick.C:
			res.Samples = append(res.Samples, w.sample(base))
		case <-statusTick.C:
			w.poll()
		case <-next.C:
			if events[0].do != nil {
				runErr = events[0].do()
			}
			events = events[1:]
		}
		next.Stop()
	}
	end := time.Now()
	if cpu1, _, err := l.cpu(); cpuErr == nil && err == nil {
		res.CPU = cpuOver(cpu0, cpu1, cpus, end.Sub(t0).Seconds())
	}
	res.Samples = append(res.Samples, w.sample(base))
	w.poll()
	res.holdersAt(&res.End, w.holders)
	stop()
	wg.Wait()
	for i, c := range l.clients {
		c.dl.stall(end.UnixNano(), &clk) // a client still stalled at the end
		res.Clients[i].finish(c, base[i], t0, end)
	}
	res.finish(w.pathsOn())
	return runErr
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// watch follows the servers: which holds each client's session, and
// which are dead.
type watch struct {
	l       *lab
	res     *Results
	t0      time.Time
	clk     *clock
	dead    []bool
	holders []int // per client: the server holding its session, -1: none
	// lastStatus and prevStatus are each server's last two status reads
	// (nil: dead or failed).
	lastStatus, prevStatus []*control.Status
}

// sample is every client's bytes since base, now.
func (w *watch) sample(base []int64) Sample {
	s := Sample{T: time.Since(w.t0).Seconds(), Bytes: make([]int64, len(base))}
	for i, c := range w.l.clients {
		s.Bytes[i] = c.dl.bytes.Load() - base[i]
	}
	return s
}

// poll reads every live server's status and records the session moves:
// a client's session is held by the server where it is established with
// the latest handshake (a server that has not yet noticed a client left
// may still list it).
func (w *watch) poll() {
	n := len(w.l.servers)
	if w.dead == nil {
		w.dead, w.lastStatus, w.prevStatus = make([]bool, n), make([]*control.Status, n), make([]*control.Status, n)
		w.holders = make([]int, len(w.l.clients))
		for i := range w.holders {
			w.holders[i] = -1
		}
	}
	type hold struct {
		server int
		at     time.Time
	}
	best := make(map[string]hold)
	for j, s := range w.l.servers {
		if w.dead[j] {
			continue
		}
		st, err := control.Query(s.sock())
		w.prevStatus[j], w.lastStatus[j] = w.lastStatus[j], nil
		if err != nil {
			continue // counted as no holder
		}
		w.lastStatus[j] = &st
		for _, p := range st.Peers {
			if h, ok := best[p.PublicKey]; p.Established && (!ok || p.LastHandshake.After(h.at)) {
				best[p.PublicKey] = hold{j, p.LastHandshake}
			}
		}
	}
	now := time.Since(w.t0).Seconds()
	for i, c := range w.l.clients {
		h, ok := best[c.pub]
		to := -1
		if ok {
			to = h.server
		}
		if to != w.holders[i] {
			w.res.Clients[i].Holders = append(w.res.Clients[i].Holders, Holder{T: now, Server: to})
			w.holders[i] = to
		}
	}
}

// kill SIGKILLs server j's daemon (KillBusiest: the one holding the most
// sessions now): no goodbye to its clients.
func (w *watch) kill(j int) error {
	w.poll()
	w.res.holdersAt(&w.res.BeforeKill, w.holders)
	if j == KillBusiest {
		held := make([]int, len(w.l.servers))
		for _, h := range w.holders {
			if h >= 0 {
				held[h]++
			}
		}
		j = slices.Index(held, slices.Max(held))
	}
	w.res.Setup.Kill = j
	s := w.l.servers[j]
	child := s.current()
	if err := unix.Kill(child.PID(), unix.SIGKILL); err != nil {
		return fmt.Errorf("killing %s: %w", s.name, err)
	}
	for !child.Exited() {
		time.Sleep(time.Millisecond)
	}
	w.dead[j], w.lastStatus[j], w.prevStatus[j] = true, nil, nil
	w.clk.phase.Store(phaseAfterKill)
	w.res.Events = append(w.res.Events, Event{T: time.Since(w.t0).Seconds(), What: fmt.Sprintf("server %d killed (SIGKILL)", j)})
	w.l.cfg.Progress(fmt.Sprintf("%.1fs: killed server %d", time.Since(w.t0).Seconds(), j))
	return nil
}

// revive starts server j again on the same config.
func (w *watch) revive(ctx context.Context, j int) error {
	if err := w.l.startServer(ctx, w.l.servers[j]); err != nil {
		return errors.Join(fmt.Errorf("starting server %d again", j), err)
	}
	w.dead[j] = false
	w.clk.phase.Store(phaseAfterRevive)
	w.res.Events = append(w.res.Events, Event{T: time.Since(w.t0).Seconds(), What: fmt.Sprintf("server %d started again", j)})
	w.l.cfg.Progress(fmt.Sprintf("%.1fs: server %d started again", time.Since(w.t0).Seconds(), j))
	return nil
}

// pathsOn counts, from the servers' last two status reads, each client's
// usable paths on each server and the paths on which each server received
// its bytes between the two reads; and each server's established peers.
func (w *watch) pathsOn() (usable, receiving [][]int, established []int) {
	n := len(w.l.servers)
	established = make([]int, n)
	for range w.l.clients {
		usable, receiving = append(usable, make([]int, n)), append(receiving, make([]int, n))
	}
	for j, st := range w.lastStatus {
		if st == nil {
			continue
		}
		for _, p := range st.Peers {
			if p.Established {
				established[j]++
			}
			for i, c := range w.l.clients {
				if c.pub != p.PublicKey {
					continue
				}
				if p.Established {
					usable[i][j] = c.usablePaths(control.Status{Peers: []control.PeerStatus{p}})
				}
				for _, a := range c.paths {
					if rxFrom(p, a) > rxFrom(peerIn(w.prevStatus[j], p.PublicKey), a) {
						receiving[i][j]++
					}
				}
			}
		}
	}
	return usable, receiving, established
}

// peerIn is the peer of key in st (zero if none or st is nil).
func peerIn(st *control.Status, key string) control.PeerStatus {
	if st != nil {
		for _, p := range st.Peers {
			if p.PublicKey == key {
				return p
			}
		}
	}
	return control.PeerStatus{}
}

// rxFrom is the bytes p's daemon paths received from address a.
func rxFrom(p control.PeerStatus, a netip.Addr) (n uint64) {
	for _, ps := range p.Paths {
		if r, err := netip.ParseAddrPort(ps.Remote); err == nil && r.Addr().Unmap() == a {
			n += ps.RxBytes
		}
	}
	return n
}
