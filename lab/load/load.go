package load

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/lab/bench"
	"github.com/braid-vpn/braid/lab/proc"
	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/lab/stats"
	"github.com/braid-vpn/braid/lab/testbed"
	"github.com/braid-vpn/braid/netns"
)

// Defaults of Config, the command's flags.
const (
	DefaultClients     = 1000
	DefaultPaths       = 2
	DefaultRate        = 10 // packets a second per client
	DefaultPacketSize  = 1200
	DefaultRampTimeout = 60 * time.Second
	DefaultHold        = 5 * time.Second
	DefaultTraffic     = 10 * time.Second
)

// Timeouts of the driver's own steps.
const (
	stopTimeout = 5 * time.Second
	// drainWait lets the packets in flight when the senders stop reach the
	// sink before it is read.
	drainWait = 500 * time.Millisecond
)

// Config is one load run.
type Config struct {
	Clients, Paths int
	// Rate is inner packets a second per client, PacketSize their size.
	Rate       float64
	PacketSize int
	// StartRate is clients started a second (0: all at once).
	StartRate float64
	// RampTimeout bounds the wait for every client's first handshake;
	// Hold is the idle phase, Traffic the traffic phase.
	RampTimeout, Hold, Traffic time.Duration
	// RekeyAfter, when set, is both ends' rekey_after_time (reject after
	// half as long again), so that a short run shows rekeys.
	RekeyAfter time.Duration
	// Prefix names the namespaces ("" = testbed.Prefix, so that the lab's
	// stale-namespace cleanup also finds a crashed run's).
	Prefix string
	// Braid starts the server daemon and the client process.
	Braid runner.BraidCommand
	// Progress, if set, gets one line per phase.
	Progress func(line string)
}

func (c Config) withDefaults() Config {
	c.Clients = cmp.Or(c.Clients, DefaultClients)
	c.Paths = cmp.Or(c.Paths, DefaultPaths)
	c.PacketSize = cmp.Or(c.PacketSize, DefaultPacketSize)
	c.RampTimeout = cmp.Or(c.RampTimeout, DefaultRampTimeout)
	c.Prefix = cmp.Or(c.Prefix, testbed.Prefix)
	if c.Progress == nil {
		c.Progress = func(string) {}
	}
	return c
}

// Check validates c, naming the field's flag.
func (c Config) Check() error {
	if err := checkPlan(c.Clients, c.Paths); err != nil {
		return err
	}
	switch {
	case c.PacketSize < MinPacket || c.PacketSize > MaxPacket:
		return fmt.Errorf("packet size %d: want %d..%d bytes", c.PacketSize, MinPacket, MaxPacket)
	case c.Rate < 0 || c.Rate > MaxRate:
		return fmt.Errorf("rate %v: want 0..%d packets a second per client", c.Rate, MaxRate)
	case c.StartRate < 0:
		return fmt.Errorf("start rate %v: want ≥ 0 clients a second", c.StartRate)
	case c.RekeyAfter != 0 && c.RekeyAfter < MinRekey:
		return fmt.Errorf("rekey after %v: want at least %v", c.RekeyAfter, MinRekey)
	case c.Hold < 0 || c.Traffic < 0 || c.RampTimeout < 0:
		return errors.New("phase durations must not be negative")
	}
	return nil
}

// rejectAfter is reject_after_time for a rekey_after_time of d: half as
// long again, so a key that failed to rekey once still has time.
func rejectAfter(d time.Duration) time.Duration { return d + d/2 }

// Run does one load run and removes everything it created; cancelled or
// failed part-way, it returns what it measured so far with the error.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if os.Geteuid() != 0 {
		return nil, runner.ErrNotRoot
	}
	cfg = cfg.withDefaults()
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	res := newResult(cfg)
	l, err := newLab(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer l.close()
	err = l.measure(ctx, res)
	res.Finished = time.Now()
	return res, err
}

// lab is one run's namespaces, files and processes.
type lab struct {
	cfg      Config
	srv, cli *netns.Namespace
	dir      string
	sock     string // the server's control socket
	server   *proc.Child
	clients  *proc.Child
	req      io.WriteCloser // to the client process
	replies  *bufio.Scanner // from it
	sink     *net.UDPConn
	sunk     atomic.Uint64 // bytes (IPv4 and UDP headers counted) and packets at the sink
	sunkPkts atomic.Uint64
	keys     []keys.Key // the clients'
	srvKey   keys.Key
	emptyRSS float64 // bytes: the server's RSS without clients
}

// newLab builds the namespaces and the veth pair, writes the keys and the
// server's file and starts the server and the sink.
func newLab(ctx context.Context, cfg Config) (_ *lab, err error) {
	if _, err := netns.Cleanup(cfg.Prefix); err != nil {
		return nil, fmt.Errorf("removing stale namespaces: %w", err)
	}
	l := &lab{cfg: cfg}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	if l.dir, err = os.MkdirTemp("", "braid-load-"); err != nil {
		return nil, err
	}
	if l.srv, err = netns.New(cfg.Prefix); err != nil {
		return nil, err
	}
	if l.cli, err = netns.New(cfg.Prefix); err != nil {
		return nil, err
	}
	addrs := []netip.Prefix{ClientOuter}
	for i := range cfg.Clients {
		for k := range cfg.Paths {
			addrs = append(addrs, netip.PrefixFrom(Source(i, k, cfg.Paths), 32))
		}
	}
	cfg.Progress(fmt.Sprintf("building the namespaces: %d clients × %d paths = %d source addresses", cfg.Clients, cfg.Paths, len(addrs)-1))
	if err := netns.AddVeth(netns.VethEnd{NS: l.srv, Name: ServerIf, Addrs: []netip.Prefix{ServerOuter}},
		netns.VethEnd{NS: l.cli, Name: ClientIf, Addrs: addrs}); err != nil {
		return nil, err
	}
	if err := l.srv.AddRoute(netns.Route{Dst: Sources, Via: ClientOuter.Addr(), Dev: ServerIf}); err != nil {
		return nil, err
	}
	if l.srvKey, err = keys.Generate(); err != nil {
		return nil, err
	}
	for range cfg.Clients {
		k, err := keys.Generate()
		if err != nil {
			return nil, err
		}
		l.keys = append(l.keys, k)
	}
	key, _ := l.srvKey.MarshalText()
	if err := os.WriteFile(filepath.Join(l.dir, "server.key"), key, 0o600); err != nil {
		return nil, err
	}
	// A server without clients first: what the process costs by itself.
	empty, _, err := l.startServer(ctx, "empty", nil)
	if err != nil {
		return nil, err
	}
	s, err := sample(empty)
	empty.Stop(stopTimeout)
	if err != nil {
		return nil, err
	}
	l.emptyRSS = s.rss
	if l.server, l.sock, err = l.startServer(ctx, "server", l.keys); err != nil {
		return nil, err
	}
	if err := l.srv.Do(func() (err error) {
		l.sink, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(Sink()))
		return err
	}); err != nil {
		return nil, fmt.Errorf("sink: %w", err)
	}
	l.sink.SetReadBuffer(8 << 20)
	go l.drain()
	return l, nil
}

// startServer writes name.toml, the server's file for clientKeys, and
// starts the daemon, which is ready when its control socket answers.
func (l *lab) startServer(ctx context.Context, name string, clientKeys []keys.Key) (_ *proc.Child, sock string, err error) {
	sock = filepath.Join(l.dir, name+".sock")
	file := filepath.Join(l.dir, name+".toml")
	data, err := serverFile(l.cfg, clientKeys, sock).Encode()
	if err == nil {
		err = os.WriteFile(file, data, 0o600)
	}
	if err != nil {
		return nil, "", err
	}
	cmd, err := l.cfg.Braid.Command("up", "-c", file)
	if err != nil {
		return nil, "", err
	}
	c, err := proc.Start(l.srv, "braid server", cmd)
	if err != nil {
		return nil, "", err
	}
	if err := proc.Await(ctx, runner.BraidReadyTimeout, 20*time.Millisecond, func() error {
		if _, err := control.Query(sock); err != nil {
			return fmt.Errorf("braid server: no status after %v: %v", runner.BraidReadyTimeout, err)
		}
		return nil
	}, c); err != nil {
		c.Stop(stopTimeout)
		return nil, "", err
	}
	return c, sock, nil
}

// serverFile is the server's config: every client with its key and inner
// address, braid's defaults but for the rekey times when the run sets them.
func serverFile(cfg Config, clientKeys []keys.Key, socket string) *config.File {
	f := &config.File{
		Role: string(config.RoleServer), PrivateKeyFile: "server.key",
		Tun: config.FileTun{Address: []string{netip.PrefixFrom(ServerInner(), Tunnel.Bits()).String()}},
		Server: &config.FileServer{
			Listen: []string{netip.AddrPortFrom(netip.IPv4Unspecified(), runner.BraidPort).String()},
		},
		Control: config.FileControl{Socket: socket},
	}
	for i, k := range clientKeys {
		f.Server.Clients = append(f.Server.Clients, config.FilePeer{Name: clientName(i), PublicKey: k.Public().String(),
			AllowedIPs: []string{netip.PrefixFrom(ClientInner(i), 32).String()}})
	}
	if d := cfg.RekeyAfter; d > 0 {
		f.Security = config.FileSecurity{RekeyAfterTime: d.String(), RejectAfterTime: rejectAfter(d).String()}
	}
	return f
}

// clientName is client i's name in the server's file (and so its status).
func clientName(i int) string { return "load-" + strconv.Itoa(i) }

// drain counts what reaches the sink until it is closed.
func (l *lab) drain() {
	b := make([]byte, 64<<10)
	for {
		n, err := l.sink.Read(b)
		if err != nil {
			return
		}
		l.sunk.Add(uint64(n + MinPacket))
		l.sunkPkts.Add(1)
	}
}

// startClients writes the spec and starts the client process in the
// client namespace, its pipes as ExtraFiles.
func (l *lab) startClients() error {
	spec := Spec{
		ServerPublicKey: l.srvKey.Public(), Server: ServerAddr(), Sink: Sink(), Paths: l.cfg.Paths,
		Rate: l.cfg.Rate, PacketSize: l.cfg.PacketSize, StartRate: l.cfg.StartRate, RampTimeout: l.cfg.RampTimeout,
		Keys: l.keys,
	}
	if d := l.cfg.RekeyAfter; d > 0 {
		spec.RekeyAfter, spec.RejectAfter = d, rejectAfter(d)
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	file := filepath.Join(l.dir, "clients.json")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		return err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		return err
	}
	reqR, reqW, err := os.Pipe()
	if err != nil {
		repR.Close()
		repW.Close()
		return err
	}
	cmd, err := l.cfg.Braid.Command("lab", "load", "clients", file)
	if err != nil {
		return err
	}
	cmd.ExtraFiles = []*os.File{repW, reqR} // ReplyFD, RequestFD
	l.clients, err = proc.Start(l.cli, "load clients", cmd)
	repW.Close()
	reqR.Close()
	if err != nil {
		repR.Close()
		reqW.Close()
		return err
	}
	l.req = reqW
	l.replies = bufio.NewScanner(repR)
	l.replies.Buffer(nil, 64<<20) // a report holds every handshake
	return nil
}

// ask sends op to the client process and waits for its reply; ctx ends
// the wait by stopping the process.
func (l *lab) ask(ctx context.Context, op string) (reply, error) {
	if _, err := io.WriteString(l.req, op+"\n"); err != nil {
		return reply{}, fmt.Errorf("%w: %s", errClientsGone, l.clients.LastLine())
	}
	stop := context.AfterFunc(ctx, func() { l.clients.Stop(stopTimeout) })
	defer stop()
	if !l.replies.Scan() {
		if ctx.Err() != nil {
			return reply{}, ctx.Err()
		}
		return reply{}, fmt.Errorf("%w: %s", errClientsGone, l.clients.LastLine())
	}
	var r reply
	if err := json.Unmarshal(l.replies.Bytes(), &r); err != nil {
		return reply{}, fmt.Errorf("client process: %w", err)
	}
	if r.Error != "" {
		return r, fmt.Errorf("client process: %s", r.Error)
	}
	return r, nil
}

// close stops the processes (the client process first: it ends its
// sessions politely while the server still runs), closes the sink and
// removes the namespaces and files.
func (l *lab) close() {
	if l.req != nil {
		l.req.Close() // the client process closes its engines and exits
	}
	l.clients.Stop(stopTimeout)
	l.server.Stop(stopTimeout)
	if l.sink != nil {
		l.sink.Close()
	}
	for _, ns := range []*netns.Namespace{l.cli, l.srv} {
		if ns != nil {
			ns.Close()
		}
	}
	if l.dir != "" {
		os.RemoveAll(l.dir)
	}
}

// procSample is what the driver reads of a process at a phase's edge.
type procSample struct {
	at       time.Time
	cpu      float64 // s, user + system
	rss, hwm float64 // bytes
}

// sample reads c's CPU time and memory from /proc.
func sample(c *proc.Child) (procSample, error) {
	pid := c.PID()
	s := procSample{at: time.Now()}
	var err error
	s.cpu, err = bench.ReadPidCPU(pid)
	var status []byte
	if err == nil {
		status, err = os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	}
	if err == nil {
		s.rss, err = bench.ParseStatusKB(status, "VmRSS")
	}
	if err == nil {
		s.hwm, err = bench.ParseStatusKB(status, "VmHWM")
	}
	if err != nil {
		return s, fmt.Errorf("%s (pid %d): %w", c.Name, pid, err)
	}
	return s, nil
}

// drops are the server's drop counters now.
func (l *lab) drops() (map[string]uint64, *control.Status, error) {
	st, err := control.Query(l.sock)
	if err != nil {
		return nil, nil, err
	}
	m := map[string]uint64{}
	for k, v := range st.Counters {
		if r, ok := strings.CutPrefix(k, control.DropPrefix); ok {
			m[r] = v
		}
	}
	return m, &st, nil
}

// measure runs the phases, filling res as it goes.
func (l *lab) measure(ctx context.Context, res *Result) error {
	cfg := l.cfg
	// The server's own cost with every client configured and none up: the
	// baseline of the RSS per client.
	drops0, _, err := l.drops()
	if err != nil {
		return err
	}
	base, err := sample(l.server)
	if err != nil {
		return err
	}
	res.Idle.RSSEmptyMB, res.Idle.RSSBeforeMB = stats.Num(l.emptyRSS/1e6), stats.Num(base.rss/1e6)

	// Ramp.
	cfg.Progress(fmt.Sprintf("ramp: starting %d client engines", cfg.Clients))
	if err := l.startClients(); err != nil {
		return err
	}
	ramp, err := l.ask(ctx, opRamp)
	if err != nil {
		return err
	}
	afterRamp, err := sample(l.server)
	if err != nil {
		return err
	}
	res.setRamp(ramp, afterRamp.cpu-base.cpu)
	cfg.Progress(res.Ramp.line())
	if res.Ramp.Established < cfg.Clients {
		res.Notes = append(res.Notes, fmt.Sprintf("only %d of %d clients were up after %v", res.Ramp.Established, cfg.Clients, cfg.RampTimeout))
	}

	// Idle hold. Its cores are measured over the second half: the first
	// still has the ramp's tail (the last paths validated, first probes).
	if err := sleep(ctx, cfg.Hold/2); err != nil {
		return err
	}
	mid, err := sample(l.server)
	if err != nil {
		return err
	}
	if err := sleep(ctx, cfg.Hold-cfg.Hold/2); err != nil {
		return err
	}
	idle, err := sample(l.server)
	if err != nil {
		return err
	}
	_, st, err := l.drops()
	if err != nil {
		return err
	}
	res.setIdle(l.emptyRSS, base, mid, idle, st)
	cfg.Progress(res.Idle.line())

	// Traffic.
	b0, p0 := l.sunk.Load(), l.sunkPkts.Load()
	t0, err := sample(l.server)
	if err != nil {
		return err
	}
	c0, err := sample(l.clients)
	if err != nil {
		return err
	}
	if _, err := l.ask(ctx, opTraffic); err != nil {
		return err
	}
	if err := sleep(ctx, cfg.Traffic); err != nil {
		return err
	}
	sent, err := l.ask(ctx, opStop)
	if err != nil {
		return err
	}
	sendEnd := time.Now()
	if err := sleep(ctx, drainWait); err != nil {
		return err
	}
	t1, err := sample(l.server)
	if err != nil {
		return err
	}
	c1, err := sample(l.clients)
	if err != nil {
		return err
	}
	res.setTraffic(sent, l.sunk.Load()-b0, l.sunkPkts.Load()-p0, sendEnd.Sub(t0.at), t1.cpu-t0.cpu)
	res.Generator = Generator{CPUSeconds: c1.cpu, PeakRSSMB: c1.hwm / 1e6, TrafficCores: (c1.cpu - c0.cpu) / c1.at.Sub(c0.at).Seconds()}
	cfg.Progress(res.Traffic.line())

	// Handshakes over the run, and drops.
	rep, err := l.ask(ctx, opReport)
	if err != nil {
		return err
	}
	drops1, _, err := l.drops()
	if err != nil {
		return err
	}
	res.setEnd(rep, drops0, drops1, afterRamp.at.Sub(ramp.Start).Seconds())
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// hostInfo names the machine for the report.
func hostInfo() (host, kernel string, cpus int) {
	host, _ = os.Hostname()
	var uts unix.Utsname
	unix.Uname(&uts)
	_, cpus, _ = bench.ReadSystemCPU()
	return host, unix.ByteSliceToString(uts.Release[:]), cpus
}

// nonZero is m without its zero entries, sorted keys aside.
func nonZero(m map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range m {
		if v > 0 {
			out[k] = v
		}
	}
	return out
}

// sortedKeys is m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
