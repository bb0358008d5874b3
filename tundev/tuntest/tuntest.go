package tuntest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/braid-vpn/braid/tundev"
)

// Config tunes a Device; DefaultConfig documents the defaults.
type Config struct {
	Name      string // what Name reports
	MTU       int    // what MTU reports; Inject refuses larger packets
	BatchSize int    // most packets per Read
	QueueLen  int    // packets buffered per direction
}

// DefaultConfig: Name "tuntest0", MTU tundev.DefaultMTU, BatchSize 16 (small
// enough that tests exercise batch boundaries), QueueLen 1024.
func DefaultConfig() Config {
	return Config{Name: "tuntest0", MTU: tundev.DefaultMTU, BatchSize: 16, QueueLen: 1024}
}

// Stats count packets through the device. Coalesced counts the written
// packets the real device would have merged into the packet before them
// (wireguard-go's GRO on write: a run of one flow, tundev.Run, whose first
// buffer has the room for all of it); Reads and Writes count the calls.
type Stats struct {
	Injected, Read, Written, Dropped uint64
	Coalesced                        uint64
	Reads, Writes                    uint64
}

// Device is the in-memory TUN. Safe for concurrent use.
type Device struct {
	cfg  Config
	in   chan [][]byte // groups of packets one Read returns together
	out  chan []byte
	rmu  sync.Mutex // Read's pending group
	pend [][]byte
	done chan struct{}
	once sync.Once
	wmu  sync.RWMutex // Write holds it shared; Close exclusively, to close out safely

	injected, read, written, dropped atomic.Uint64
	coalesced, reads, writes         atomic.Uint64
}

var _ tundev.Device = (*Device)(nil)

// New returns a Device with DefaultConfig and the given MTU.
func New(mtu int) *Device {
	cfg := DefaultConfig()
	cfg.MTU = mtu
	return NewConfig(cfg)
}

// NewConfig returns a Device with cfg; zero fields take defaults.
func NewConfig(cfg Config) *Device {
	d := DefaultConfig()
	if cfg.Name == "" {
		cfg.Name = d.Name
	}
	if cfg.MTU <= 0 {
		cfg.MTU = d.MTU
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = d.BatchSize
	}
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = d.QueueLen
	}
	return &Device{
		cfg:  cfg,
		in:   make(chan [][]byte, cfg.QueueLen),
		out:  make(chan []byte, cfg.QueueLen),
		done: make(chan struct{}),
	}
}

// Inject queues a copy of pkt for Read, as if an application had sent it
// into the tunnel. It blocks while the queue is full; it fails after Close
// or for a packet larger than the MTU.
func (d *Device) Inject(pkt []byte) error { return d.InjectBatch([][]byte{pkt}) }

// InjectBatch queues copies of pkts for one Read, as the real device returns
// the segments of a TCP super-packet the kernel handed it: at most BatchSize
// packets, each within the MTU.
func (d *Device) InjectBatch(pkts [][]byte) error {
	if len(pkts) > d.cfg.BatchSize {
		return fmt.Errorf("tuntest: %d packets do not fit one read of at most %d", len(pkts), d.cfg.BatchSize)
	}
	g := make([][]byte, len(pkts))
	for i, pkt := range pkts {
		if len(pkt) > d.cfg.MTU {
			return fmt.Errorf("tuntest: packet of %d bytes exceeds MTU %d", len(pkt), d.cfg.MTU)
		}
		g[i] = append([]byte(nil), pkt...)
	}
	select {
	case <-d.done:
		return os.ErrClosed
	default:
	}
	select {
	case d.in <- g:
		d.injected.Add(uint64(len(g)))
		return nil
	case <-d.done:
		return os.ErrClosed
	}
}

// Outbound delivers copies of the packets the engine writes. It is closed by
// Close.
func (d *Device) Outbound() <-chan []byte { return d.out }

// Recv returns the next written packet, or ctx's error, or os.ErrClosed once
// the device is closed and drained.
func (d *Device) Recv(ctx context.Context) ([]byte, error) {
	select {
	case p, ok := <-d.out:
		if !ok {
			return nil, os.ErrClosed
		}
		return p, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Read implements tundev.Device.
func (d *Device) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	limit := min(len(bufs), len(sizes), d.cfg.BatchSize)
	if limit == 0 {
		return 0, nil
	}
	d.rmu.Lock()
	defer d.rmu.Unlock()
	g := d.pend
	d.pend = nil
	if g == nil {
		select {
		case <-d.done:
			return 0, os.ErrClosed
		case g = <-d.in:
		}
	}
	if len(g) > limit {
		d.pend = g
		return 0, fmt.Errorf("tuntest: %d packets do not fit %d buffers", len(g), limit)
	}
	d.reads.Add(1)
	n := 0
	for {
		for _, p := range g {
			if len(bufs[n]) < offset+len(p) {
				return n, fmt.Errorf("tuntest: packet of %d bytes does not fit buffer %d at offset %d", len(p), len(bufs[n]), offset)
			}
			sizes[n] = copy(bufs[n][offset:], p)
			n++
			d.read.Add(1)
		}
		select {
		case g = <-d.in:
		default:
			return n, nil
		}
		if n+len(g) > limit {
			d.pend = g // whole groups only: the next Read
			return n, nil
		}
	}
}

// Write implements tundev.Device: it returns the number of packets taken.
func (d *Device) Write(bufs [][]byte, offset int) (int, error) {
	d.wmu.RLock()
	defer d.wmu.RUnlock()
	select {
	case <-d.done:
		return 0, os.ErrClosed
	default:
	}
	d.writes.Add(1)
	for i := 0; i < len(bufs); {
		n, size := tundev.Run(bufs[i:], offset)
		if n > 1 && cap(bufs[i][offset:])-offset >= size { // as wireguard-go measures the room
			d.coalesced.Add(uint64(n - 1))
		}
		i += n
	}
	for i, b := range bufs {
		if len(b) < offset {
			return i, fmt.Errorf("tuntest: buffer of %d bytes shorter than offset %d", len(b), offset)
		}
		p := append([]byte(nil), b[offset:]...)
		select {
		case d.out <- p:
			d.written.Add(1)
		default:
			d.dropped.Add(1)
		}
	}
	return len(bufs), nil
}

// BatchSize implements tundev.Device.
func (d *Device) BatchSize() int { return d.cfg.BatchSize }

// MTU implements tundev.Device.
func (d *Device) MTU() (int, error) { return d.cfg.MTU, nil }

// Name implements tundev.Device.
func (d *Device) Name() (string, error) { return d.cfg.Name, nil }

// Close unblocks Read and Inject with os.ErrClosed and closes Outbound
// (packets already written stay readable from it).
func (d *Device) Close() error {
	d.once.Do(func() {
		close(d.done)
		d.wmu.Lock()
		close(d.out)
		d.wmu.Unlock()
	})
	return nil
}

// Stats returns the counters.
func (d *Device) Stats() Stats {
	return Stats{Injected: d.injected.Load(), Read: d.read.Load(), Written: d.written.Load(), Dropped: d.dropped.Load(),
		Coalesced: d.coalesced.Load(), Reads: d.reads.Load(), Writes: d.writes.Load()}
}
