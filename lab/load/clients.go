package load

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/braid-vpn/braid/conn"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/lab/flood"
	"github.com/braid-vpn/braid/tundev/tuntest"
	"github.com/braid-vpn/braid/tunnel"
)

// The client process's pipes: it writes replies on ReplyFD and reads
// requests from RequestFD (exec.Cmd.ExtraFiles 0 and 1).
const (
	ReplyFD   = 3
	RequestFD = 4
)

// The requests, one line each; each gets one reply line.
const (
	opRamp    = "ramp"    // wait until every client is up or RampTimeout passed
	opTraffic = "traffic" // start the inner traffic
	opStop    = "stop"    // stop it and say what was sent
	opReport  = "report"  // the handshakes seen and the engines' drops
)

// Spec is what the client process runs, written by the driver into a file
// (it holds the clients' private keys: mode 0600, removed with the run).
type Spec struct {
	ServerPublicKey keys.Key       `json:"server_public_key"`
	Server          netip.AddrPort `json:"server"`
	Sink            netip.AddrPort `json:"sink"`
	Paths           int            `json:"paths"`
	// Rate is inner packets a second per client, of PacketSize bytes
	// (IPv4 and UDP headers included).
	Rate       float64 `json:"rate"`
	PacketSize int     `json:"packet_size"`
	// StartRate is engines started a second (0: all at once).
	StartRate   float64       `json:"start_rate"`
	RampTimeout time.Duration `json:"ramp_timeout"`
	// RekeyAfter and RejectAfter, when set, replace the engines' defaults
	// (so that a short run sees rekeys).
	RekeyAfter  time.Duration `json:"rekey_after"`
	RejectAfter time.Duration `json:"reject_after"`
	Keys        []keys.Key    `json:"keys"` // one private key per client
}

// reply is the answer to one request; the fields its request fills.
type reply struct {
	Error string `json:"error,omitempty"`
	// ramp: when the first engine started, and each client's time from
	// then to its first handshake (s; -1: not up).
	Start time.Time `json:"start,omitzero"`
	Up    []float64 `json:"up,omitempty"`
	// stop: inner packets and bytes handed to the engines.
	Packets uint64 `json:"packets,omitempty"`
	Bytes   uint64 `json:"bytes,omitempty"`
	// report: every handshake seen (s since Start), the engines' drops.
	Handshakes []float64         `json:"handshakes,omitempty"`
	Drops      map[string]uint64 `json:"drops,omitempty"`
}

// RunClients is the client process: it builds one engine per key of the
// spec in file, starts them and answers requests from in on out until in
// ends or ctx is done; then it closes every engine. Its log goes to logw.
func RunClients(ctx context.Context, file string, in io.Reader, out, logw io.Writer) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var spec Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if err := checkPlan(len(spec.Keys), spec.Paths); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	// Every engine has a socket per path, and the runtime a few files more.
	if err := raiseNoFile(uint64(len(spec.Keys)*spec.Paths + 256)); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cs, err := newClients(spec, log)
	if err != nil {
		return err
	}
	defer cs.close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go cs.run(ctx)
	enc := json.NewEncoder(out)
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var r reply
		switch op := sc.Text(); op {
		case opRamp:
			r = cs.waitRamp(ctx)
		case opTraffic:
			cs.startTraffic(ctx)
		case opStop:
			r.Packets, r.Bytes = cs.stopTraffic()
		case opReport:
			r.Handshakes, r.Drops = cs.report()
		default:
			r.Error = fmt.Sprintf("unknown request %q", op)
		}
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return sc.Err()
}

// raiseNoFile makes room for n open files (root may raise the hard limit).
func raiseNoFile(n uint64) error {
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Cur >= n {
		return nil
	}
	l.Cur, l.Max = max(l.Cur, n), max(l.Max, n)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("raising the open-file limit to %d for the clients' sockets: %w", n, err)
	}
	return nil
}

// clients are the engines of the client process.
type clients struct {
	spec    Spec
	engines []*tunnel.Engine
	tuns    []*tuntest.Device
	pkts    [][]byte // client i's inner packet
	started atomic.Int64
	start   time.Time // when the first engine started; set before started > 0

	mu       sync.Mutex
	up       []float64   // s from start to the first handshake; -1: none yet
	last     []time.Time // the last handshake seen per client
	hs       []float64   // every handshake seen, s from start
	allUp    chan struct{}
	upCount  int
	traffic  context.CancelFunc
	senders  sync.WaitGroup
	sentPkts atomic.Uint64
}

// newClients builds (and does not start) an engine per key.
func newClients(spec Spec, log *slog.Logger) (_ *clients, err error) {
	n := len(spec.Keys)
	cs := &clients{spec: spec, up: make([]float64, n), last: make([]time.Time, n), allUp: make(chan struct{})}
	defer func() {
		if err != nil {
			cs.close()
		}
	}()
	tn := tunnel.DefaultTunables()
	if spec.RekeyAfter > 0 {
		tn.RekeyAfterTime, tn.RejectAfterTime = spec.RekeyAfter, spec.RejectAfter
	}
	for i, key := range spec.Keys {
		cs.up[i] = -1
		dev := tuntest.NewConfig(tuntest.Config{Name: fmt.Sprintf("load%d", i), MTU: MaxPacket})
		cfg := tunnel.Config{
			Role: tunnel.Client, PrivateKey: key, TUN: dev, Listen: conn.Listen, Logger: log.With("client", i),
			ServerPublicKey: spec.ServerPublicKey, ServerAllowedIPs: []netip.Prefix{Tunnel},
			Servers: []netip.AddrPort{spec.Server}, Tunables: tn,
		}
		for k := range spec.Paths {
			cfg.LocalPaths = append(cfg.LocalPaths, tunnel.LocalPath{Addr: Source(i, k, spec.Paths)})
		}
		e, err := tunnel.New(cfg)
		if err != nil {
			dev.Close()
			return nil, fmt.Errorf("client %d: %w", i, err)
		}
		cs.engines, cs.tuns = append(cs.engines, e), append(cs.tuns, dev)
		pkt := make([]byte, spec.PacketSize)
		payload := make([]byte, spec.PacketSize-MinPacket)
		cs.pkts = append(cs.pkts, flood.UDP4(pkt, netip.AddrPortFrom(ClientInner(i), SinkPort), spec.Sink, payload))
	}
	return cs, nil
}

// pollEvery is how often the engines not yet up are asked for their
// status; the others are asked once a second (for rekeys), which is as
// fine as the handshake counts per second need: each handshake is counted
// at its own time (the status's last_handshake).
const pollEvery = 100 * time.Millisecond

// run starts the engines (at StartRate) and watches their handshakes until
// ctx is done.
func (cs *clients) run(ctx context.Context) {
	go cs.watch(ctx)
	cs.start = time.Now()
	for i, e := range cs.engines {
		if r := cs.spec.StartRate; r > 0 {
			if d := time.Until(cs.start.Add(time.Duration(float64(i) / r * float64(time.Second)))); d > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
		}
		e.Start()
		cs.started.Add(1)
	}
}

func (cs *clients) watch(ctx context.Context) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	var full time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			all := now.Sub(full) >= time.Second
			if all {
				full = now
			}
			cs.poll(all)
		}
	}
}

// poll reads the status of the started engines (those not yet up, or all)
// and records the handshakes new since the last poll.
func (cs *clients) poll(all bool) {
	n := int(cs.started.Load())
	for i := range n {
		cs.mu.Lock()
		skip := !all && cs.up[i] >= 0
		cs.mu.Unlock()
		if skip {
			continue
		}
		st := cs.engines[i].Status()
		if len(st.Peers) == 0 {
			continue
		}
		p := st.Peers[0]
		cs.mu.Lock()
		if !p.LastHandshake.IsZero() && !p.LastHandshake.Equal(cs.last[i]) {
			cs.last[i] = p.LastHandshake
			at := p.LastHandshake.Sub(cs.start).Seconds()
			cs.hs = append(cs.hs, at)
			if p.Established && cs.up[i] < 0 {
				cs.up[i] = at
				if cs.upCount++; cs.upCount == len(cs.engines) {
					close(cs.allUp)
				}
			}
		}
		cs.mu.Unlock()
	}
}

// waitRamp waits until every client is up or RampTimeout has passed since
// the start.
func (cs *clients) waitRamp(ctx context.Context) reply {
	t := time.NewTimer(cs.spec.RampTimeout)
	defer t.Stop()
	select {
	case <-cs.allUp:
	case <-t.C:
	case <-ctx.Done():
		return reply{Error: ctx.Err().Error()}
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return reply{Start: cs.start, Up: append([]float64(nil), cs.up...)}
}

// sendTick is how often the senders top every client up to its rate.
const sendTick = 10 * time.Millisecond

// startTraffic starts one sender per CPU, each feeding a share of the
// clients' TUN devices at Rate packets a second per client.
func (cs *clients) startTraffic(ctx context.Context) {
	if cs.traffic != nil || cs.spec.Rate <= 0 {
		return
	}
	ctx, cs.traffic = context.WithCancel(ctx)
	workers := min(runtime.GOMAXPROCS(0), len(cs.engines))
	begin := time.Now()
	for w := range workers {
		cs.senders.Go(func() {
			sent := make([]uint64, len(cs.engines))
			batch := make([][]byte, 0, tuntest.DefaultConfig().BatchSize)
			t := time.NewTicker(sendTick)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case now := <-t.C:
					due := uint64(cs.spec.Rate * now.Sub(begin).Seconds())
					for i := w; i < len(cs.engines); i += workers {
						for sent[i] < due && ctx.Err() == nil {
							batch = batch[:0]
							for k := sent[i]; k < due && len(batch) < cap(batch); k++ {
								batch = append(batch, cs.pkts[i])
							}
							if cs.tuns[i].InjectBatch(batch) != nil {
								return
							}
							sent[i] += uint64(len(batch))
							cs.sentPkts.Add(uint64(len(batch)))
						}
					}
				}
			}
		})
	}
}

// stopTraffic stops the senders and returns what they handed the engines.
func (cs *clients) stopTraffic() (pkts, bytes uint64) {
	if cs.traffic != nil {
		cs.traffic()
		cs.senders.Wait()
	}
	n := cs.sentPkts.Load()
	return n, n * uint64(cs.spec.PacketSize)
}

// report returns the handshakes seen so far and the engines' drops (the
// reasons with any).
func (cs *clients) report() ([]float64, map[string]uint64) {
	cs.poll(true)
	drops := map[string]uint64{}
	for _, e := range cs.engines {
		for k, v := range e.Drops() {
			if v > 0 {
				drops[k] += v
			}
		}
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]float64(nil), cs.hs...), drops
}

// close stops the traffic and closes every engine (which closes its TUN).
func (cs *clients) close() {
	cs.stopTraffic()
	var wg sync.WaitGroup
	for _, e := range cs.engines {
		wg.Go(func() { e.Close() })
	}
	wg.Wait()
}

// errClientsGone is what the driver reports when the client process's
// replies end.
var errClientsGone = errors.New("the client process ended")
