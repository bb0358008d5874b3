package tunnel

import (
	"encoding/json"
	"os"
	"path/filepath"
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
type budgetUsage struct {
	Used  uint64    `json:"used"`
	Since time.Time `json:"since"`
}

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
	if u, ok := p.e.savedUsage()[key]; ok {
		m.Used, m.Since = u.Used, u.Since
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
		p.saveUsage()
		p.budgetSaved = now
	}
}

// savedUsage reads Config.BudgetState once (nil when absent or unreadable).
func (e *Engine) savedUsage() map[string]budgetUsage {
	if e.usage != nil || e.cfg.BudgetState == "" {
		return e.usage
	}
	e.usage = map[string]budgetUsage{}
	b, err := os.ReadFile(e.cfg.BudgetState)
	if err != nil {
		if !os.IsNotExist(err) {
			e.log.Warn("reading path budget usage", "file", e.cfg.BudgetState, "err", err)
		}
		return e.usage
	}
	if err := json.Unmarshal(b, &e.usage); err != nil {
		e.log.Warn("reading path budget usage", "file", e.cfg.BudgetState, "err", err)
	}
	return e.usage
}

// saveUsage writes the meters to Config.BudgetState (atomically). Caller holds
// p.mu.
func (p *peer) saveUsage() {
	file := p.e.cfg.BudgetState
	if file == "" || len(p.meters) == 0 {
		return
	}
	out := make(map[string]budgetUsage, len(p.meters))
	for k, m := range p.meters {
		out[k] = budgetUsage{Used: m.Used, Since: m.Since}
	}
	b, _ := json.Marshal(out)
	tmp := filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err == nil {
		err = os.Rename(tmp, file)
		if err == nil {
			return
		}
	}
	p.e.log.Warn("saving path budget usage", "file", file)
}
