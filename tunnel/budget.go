package tunnel

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/braid-vpn/braid/budget"
)

// A client path may have a data allowance (LocalPath.Budget, e.g. "10GiB/month" on
// a metered LTE link). The client meters the bytes its paths over that local path
// send and receive; once the allowance is used, those paths drop to the backup tier
// (overBudgetTier, above every configured one) until the period ends, and the client
// rekeys so the server learns the new tiers at once. Usage survives restarts in
// Config.BudgetState.

// overBudgetTier is the tier of a path whose allowance is used up: above every
// tier the config may give (0..7).
const overBudgetTier = 8

// budgetEvery is how often the meters are brought up to date.
const budgetEvery = time.Second

// budgetSaveEvery is how often usage is written to Config.BudgetState.
const budgetSaveEvery = time.Minute

// budgetUsage is one meter's state on disk.
type budgetUsage = budget.Usage

// meterFor returns the meter of a local path with an allowance (nil for none),
// creating it (from saved usage, if any) the first time. Caller holds p.mu.
func (p *peer) meterFor(l LocalPath) *budget.Meter {
	if l.Budget.IsZero() {
		return nil
	}
	key := l.String()
	if m := p.meters[key]; m != nil {
		m.Limit = l.Budget
		return m
	}
	if p.meters == nil {
		p.meters = make(map[string]*budget.Meter)
	}
	m := &budget.Meter{Limit: l.Budget}
	if u, ok := p.e.usage[key]; ok {
		if now := time.Now(); m.Restore(u, now) {
			p.e.log.Warn("path budget usage dated in the future; counted against the current period", "local", key,
				"since", u.Since.Format(time.RFC3339), "now", now.Format(time.RFC3339), "used", u.Used)
		}
	}
	p.meters[key] = m
	return m
}

// budgetTick counts what the metered paths carried since the last tick and moves
// paths between their tier and the backup tier. Caller holds p.mu (client).
func (p *peer) budgetTick(now time.Time) {
	if len(p.meters) == 0 || now.Sub(p.budgetAt) < budgetEvery {
		return
	}
	p.budgetAt = now
	changed := false
	for _, ps := range p.paths {
		if ps == nil || ps.meter == nil {
			continue
		}
		tx, rx := ps.sender.TxBytes(), ps.rxBytes
		ps.meter.Add(tx-ps.meteredTx+rx-ps.meteredRx, now)
		ps.meteredTx, ps.meteredRx = tx, rx
		tier := ps.baseTier
		if ps.meter.Exceeded(now) {
			tier = overBudgetTier
		}
		if tier != ps.tier {
			ps.tier, changed = tier, true
			p.e.log.Info("path budget", "path", ps.id, "local", ps.cs.local.String(), "used", ps.meter.Used, "allowance", ps.meter.Limit.String(), "backup_only", tier == overBudgetTier)
		}
	}
	if changed && p.cur != nil && p.hs == nil {
		p.initiateLocked(now, true) // the server takes tiers from the handshake
	}
	if now.Sub(p.budgetSaved) >= budgetSaveEvery {
		p.budgetSaved = now
		// Written on a goroutine of its own: the write fsyncs, and the peer
		// lock is the lock of the data path.
		if snap := p.usageSnapshot(); snap.usage != nil {
			p.e.wg.Add(1)
			go func() {
				defer p.e.wg.Done()
				p.e.writeUsage(snap)
			}()
		}
	}
}

// loadUsage reads Config.BudgetState, once, when the engine is made (before
// any peer lock is taken). A missing file is no usage; anything else that keeps
// it from being read is logged, and a corrupt file is kept aside as .corrupt.
func (e *Engine) loadUsage() {
	if e.cfg.BudgetState == "" {
		return
	}
	u, err := budget.Load(e.cfg.BudgetState)
	switch {
	case errors.Is(err, budget.ErrCorrupt):
		e.log.Error("path budget usage file corrupt; usage starts from zero", "err", err)
	case err != nil:
		e.log.Warn("reading path budget usage; usage starts from zero", "file", e.cfg.BudgetState, "err", err)
	}
	e.usage = u
}

// usageWriter orders the writes of Config.BudgetState: a snapshot is written
// only if no later one has been, so a slow periodic write that finishes after
// the one at Close does not put older usage back.
type usageWriter struct {
	seq     atomic.Uint64
	mu      sync.Mutex
	written uint64
}

// usageSnapshot is the meters' state at one moment, numbered.
type usageSnapshot struct {
	seq   uint64
	usage map[string]budgetUsage
}

// usageSnapshot copies the meters (nil usage when there is nothing to save).
// Caller holds p.mu; the write happens after it is let go (writeUsage).
func (p *peer) usageSnapshot() usageSnapshot {
	if p.e.cfg.BudgetState == "" || len(p.meters) == 0 {
		return usageSnapshot{}
	}
	out := make(map[string]budgetUsage, len(p.meters))
	for k, m := range p.meters {
		out[k] = budgetUsage{Used: m.Used, Since: m.Since}
	}
	return usageSnapshot{seq: p.e.usageW.seq.Add(1), usage: out}
}

// writeUsage writes a snapshot to Config.BudgetState (budget.Save: atomic and
// durable, never through a symbolic link), unless a later one was written.
// Called without any peer lock.
func (e *Engine) writeUsage(s usageSnapshot) {
	if s.usage == nil {
		return
	}
	w := &e.usageW
	w.mu.Lock()
	defer w.mu.Unlock()
	if s.seq <= w.written {
		return
	}
	if err := budget.Save(e.cfg.BudgetState, s.usage); err != nil {
		e.log.Warn("saving path budget usage", "file", e.cfg.BudgetState, "err", err)
		return
	}
	w.written = s.seq
}
