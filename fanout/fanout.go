// Package fanout spreads the independent items of a batch over a few worker
// goroutines and waits for them: fork and join around one batch, with no queue
// between stages and nothing reordered, so a caller that needs its items in
// order afterwards (the tunnel's sockets and TUN device do) simply walks them
// again.
//
// The tunnel seals and opens its datagrams this way. A batch of a TUN read or
// a recvmmsg holds tens of datagrams; their AEAD work is independent, while
// everything around it (schedulers, windows, replay windows, reorder buffers)
// is not. Splitting only the AEAD keeps the engine's single-goroutine logic
// and still lets a second core do part of the cipher work.
//
// Items are claimed in chunks from a shared counter, by the caller from the
// start and by the workers once they wake. A worker that wakes late finds
// little or nothing left and the caller has done it meanwhile: waking a
// goroutine costs microseconds (more in a virtual machine), and a fixed split
// made the caller wait for it, which was slower than doing the batch alone.
// The caller waits only for chunks a worker has claimed, one at most each.
package fanout

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Batch is work on the items [lo, hi) of one batch. Do is called on disjoint
// ranges from several goroutines at once.
type Batch interface {
	Do(lo, hi int)
}

// Pool is a fixed set of worker goroutines shared by every caller. A nil Pool
// or one without workers runs every batch on its caller.
type Pool struct {
	jobs    chan job
	workers int
	chunk   int
	wg      sync.WaitGroup
	// batches and items count the Runs shared with workers and their items,
	// workerItems the items the workers did: whether the workers help is
	// measured, not assumed.
	batches, items, workerItems atomic.Uint64
}

// Stats is what a Pool's workers did so far.
type Stats struct {
	Batches, Items, WorkerItems uint64
}

// Stats returns the pool's counts (zero for a nil Pool).
func (p *Pool) Stats() Stats {
	if p == nil {
		return Stats{}
	}
	return Stats{Batches: p.batches.Load(), Items: p.items.Load(), WorkerItems: p.workerItems.Load()}
}

// job invites a worker to help with one batch of one Fork. It is sent by
// value: the worker's copy of b and n is its own, so a worker that wakes
// after the batch is over reads nothing the caller is rewriting.
type job struct {
	f     *Fork
	b     Batch
	n     int
	epoch uint32
}

// Fork is one caller's state for its batches. A goroutine keeps its own and
// never shares it; the zero value is ready.
type Fork struct {
	// claim is the batch's epoch (high 32 bits) and its next unclaimed item
	// (low 32 bits): a worker claims only within the epoch it was invited to.
	claim atomic.Uint64
	done  atomic.Int64 // items finished in this epoch
	epoch uint32
}

// New starts workers goroutines. Items are claimed chunk at a time: a claim
// is an atomic operation, and a chunk is the most the caller may have to wait
// for once it finds nothing left to claim.
func New(workers, chunk int) *Pool {
	if workers <= 0 {
		return nil
	}
	p := &Pool{jobs: make(chan job, workers), workers: workers, chunk: max(chunk, 1)}
	p.wg.Add(workers)
	for range workers {
		go p.work()
	}
	return p
}

func (p *Pool) work() {
	defer p.wg.Done()
	for j := range p.jobs {
		p.help(j.f, j.b, j.n, j.epoch, true)
	}
}

// Workers reports how many workers run besides the callers (0 for a nil Pool).
func (p *Pool) Workers() int {
	if p == nil {
		return 0
	}
	return p.workers
}

// Run calls b.Do over [0, n) and returns when every item is done. It never
// waits for a worker to become free: a batch no worker helps with is done
// by the caller alone. Batches of fewer than two chunks are not shared.
func (p *Pool) Run(f *Fork, b Batch, n int) {
	if p == nil || n < 2*p.chunk {
		if n > 0 {
			b.Do(0, n)
		}
		return
	}
	p.batches.Add(1)
	p.items.Add(uint64(n))
	f.epoch++
	f.done.Store(0)
	f.claim.Store(uint64(f.epoch) << 32)
	invite := min(p.workers, n/p.chunk-1)
	for range invite {
		select {
		case p.jobs <- job{f: f, b: b, n: n, epoch: f.epoch}:
		default: // every worker is busy: do it here
		}
	}
	p.help(f, b, n, f.epoch, false)
	for f.done.Load() < int64(n) {
		runtime.Gosched() // a worker finishes the chunk it holds
	}
}

// help claims chunks of batch epoch of f and does them until none is left. A
// worker counts its items before it marks them done, so that Stats already
// holds them when Run returns.
func (p *Pool) help(f *Fork, b Batch, n int, epoch uint32, worker bool) {
	for {
		c := f.claim.Load()
		lo := int(uint32(c))
		if uint32(c>>32) != epoch || lo >= n {
			return
		}
		hi := min(lo+p.chunk, n)
		if !f.claim.CompareAndSwap(c, uint64(epoch)<<32|uint64(hi)) {
			continue
		}
		b.Do(lo, hi)
		if worker {
			p.workerItems.Add(uint64(hi - lo))
		}
		f.done.Add(int64(hi - lo))
	}
}

// Close stops the workers once no Run is in progress.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	close(p.jobs)
	p.wg.Wait()
}
