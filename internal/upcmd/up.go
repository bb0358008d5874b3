// Package upcmd is the `up` command: a braid endpoint (client or server) in
// the foreground. cmd/braid and cmd/braid-lab both add it to their command trees.
package upcmd

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/console"
	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/internal/sdnotify"
	"github.com/braid-vpn/braid/netwatch"
	"github.com/braid-vpn/braid/tundev"
	"github.com/braid-vpn/braid/tunnel"
)

// NewUpCmd is `up -c FILE`: the VPN daemon. Both braid and braid-lab have it
// (the lab starts its own executable as the daemons it measures).
func NewUpCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "up -c FILE",
		Short: "Run a tunnel endpoint in the foreground",
		Long: `Run a braid client or server in the foreground.

SIGINT and SIGTERM close the sessions, remove the TUN device and its routes and exit.
SIGHUP re-reads the config file and applies changed paths (client) or clients (server)
without dropping sessions.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("up needs a config file: braid up -c FILE")
			}
			return runUp(cmd.Context(), file)
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "config file (TOML)")
	return cmd
}

func runUp(ctx context.Context, file string) error {
	cfg, err := config.Load(file)
	if err != nil {
		return err
	}
	log := startLogger(cfg, os.Stderr)
	if !hasNetAdmin() {
		return errors.New("up needs root or CAP_NET_ADMIN (to create the TUN device and bind paths to interfaces)")
	}
	// Claim the control socket and the metrics address before touching the
	// network, so a second instance fails without disturbing the first.
	ctl, err := control.Listen(cfg.Control.Socket)
	if err != nil {
		return err
	}
	defer ctl.Close()
	var metricsLn net.Listener
	if cfg.Control.Metrics != "" {
		if metricsLn, err = net.Listen("tcp", cfg.Control.Metrics); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		defer metricsLn.Close()
	}
	var consoleLn net.Listener
	var consoleTLS *tls.Config
	if c := cfg.Control; c.Console != "" {
		if c.ConsoleCert != "" {
			cert, err := tls.LoadX509KeyPair(c.ConsoleCert, c.ConsoleKey)
			if err != nil {
				return fmt.Errorf("console: %w", err)
			}
			consoleTLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		}
		if consoleLn, err = net.Listen("tcp", c.Console); err != nil {
			return fmt.Errorf("console: %w", err)
		}
		defer consoleLn.Close()
	}
	// The transport first: a kernel without (enabled) MPTCP stops us here, before
	// anything is created.
	tt, err := setupTransport(cfg, log)
	if err != nil {
		return err
	}
	defer tt.close()
	tun, err := tundev.Create(tundev.Options{Name: cfg.Tun.Name, MTU: cfg.Tun.MTU, Addresses: cfg.Tun.Address, Routes: cfg.Tun.Routes})
	if err != nil {
		return err
	}
	ecfg := engineConfig(cfg, log)
	ecfg.TUN = tun
	ecfg.Listen = tt.listen(cfg.Role)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.Client != nil && tt.name == "udp" {
		// Paths follow their interfaces as they come and go (netlink).
		if ev, err := netwatch.Watch(ctx, log); err != nil {
			log.Warn("paths follow interface changes only on reload", "err", err)
		} else {
			ecfg.LinkEvents = ev
		}
	}
	eng, err := tunnel.New(ecfg)
	if err != nil {
		tun.Close()
		return err
	}
	status := tt.status(eng.Status)
	eng.Start()
	name, _ := tun.Name()
	log.Info("braid up", "role", cfg.Role, "interface", name, "public_key", cfg.PublicKey.String(), "transport", tt.name)

	errc := make(chan error, 3)
	go func() {
		if err := control.ServeListener(ctx, ctl, status); err != nil && ctx.Err() == nil {
			errc <- fmt.Errorf("control socket: %w", err)
		}
	}()
	if metricsLn != nil {
		go func() {
			if err := control.ServeMetricsOn(ctx, metricsLn, control.NewCollector(status)); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("metrics: %w", err)
			}
		}()
	}
	if consoleLn != nil {
		go func() {
			// A client records its one peer's history all the time; a
			// server only that of the clients a page watches.
			o := console.Options{Source: console.Source{Status: status, Peers: eng.PeerStatuses},
				Token: cfg.Control.ConsoleToken, WatchAll: cfg.Role == config.RoleClient}
			if err := console.Serve(ctx, consoleLn, o, consoleTLS); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("console: %w", err)
			}
		}()
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	notify(log, sdnotify.Ready) // the TUN device, sockets and control socket are up
	var runErr error
loop:
	for {
		select {
		case s := <-sigs:
			if s == syscall.SIGHUP {
				notify(log, sdnotify.Reloading)
				reload(file, cfg.Role, eng, tt, log)
				notify(log, sdnotify.Ready)
				continue
			}
			log.Info("shutting down", "signal", s.String())
			break loop
		case err := <-errc:
			runErr = err
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	notify(log, sdnotify.Stopping)
	cancel()
	if err := eng.Close(); err != nil {
		log.Debug("closing", "err", err)
	}
	return runErr
}

// notify tells systemd (Type=notify units) the daemon's state; outside systemd it
// does nothing.
func notify(log *slog.Logger, state string) {
	if _, err := sdnotify.Notify(state); err != nil {
		log.Warn("telling systemd", "state", state, "err", err)
	}
}

// startLogger returns the daemon's logger, writing to w at the file's log
// level, and logs the file's warnings (a key file other users can read, a
// metrics endpoint open to the network) with it, so they are the first thing
// in the log.
func startLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: cfg.LogLevel}))
	logWarnings(log, cfg)
	return log
}

// logWarnings logs each config warning as a message of its own.
func logWarnings(log *slog.Logger, cfg *config.Config) {
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
}

// reload applies a re-read config file; a bad file changes nothing.
func reload(file string, role config.Role, eng *tunnel.Engine, tt *tunnelTransport, log *slog.Logger) {
	cfg, err := config.Load(file)
	if err != nil {
		log.Error("reload failed; keeping the running configuration", "err", err)
		return
	}
	if cfg.Role != role {
		log.Error("reload failed; keeping the running configuration", "err", fmt.Sprintf("%s: role changed from %s to %s (restart to change roles)", file, role, cfg.Role))
		return
	}
	logWarnings(log, cfg)
	if name, _ := transportOf(cfg); name != tt.name {
		log.Warn("reload: transport changes need a restart; keeping "+tt.name, "file", name)
		cfg.Client, cfg.Server = withTransport(cfg.Client, tt.name), withTransportServer(cfg.Server, tt.name)
	}
	if err := eng.Reload(engineConfig(cfg, log)); err != nil {
		log.Error("reload", "err", err)
		return
	}
	tt.configurePM(cfg)
	log.Info("configuration reloaded")
}

// engineConfig translates the file's config into the engine's.
func engineConfig(cfg *config.Config, log *slog.Logger) tunnel.Config {
	tn := tunnel.DefaultTunables()
	tn.ReplayWindow = cfg.Security.ReplayWindow
	tn.RekeyAfterTime = cfg.Security.RekeyAfterTime
	tn.RejectAfterTime = cfg.Security.RejectAfterTime
	tn.RekeyAfterMessages = cfg.Security.RekeyAfterPackets
	if cfg.CryptoWorkers != config.AutoCryptoWorkers {
		tn.CryptoWorkers = cfg.CryptoWorkers
	}
	ec := tunnel.Config{
		PrivateKey: cfg.PrivateKey,
		Logger:     log,
		Tunables:   tn,
		NoOffload:  !cfg.Offload,
	}
	if c := cfg.Client; c != nil {
		ec.Role = tunnel.Client
		ec.ServerPublicKey = c.ServerPublicKey
		// The server may send only from what this client routes into the tunnel.
		ec.ServerAllowedIPs = append(ec.ServerAllowedIPs, cfg.Tun.Routes...)
		for _, a := range cfg.Tun.Address {
			ec.ServerAllowedIPs = append(ec.ServerAllowedIPs, a.Masked())
		}
		ec.PSK = cfg.PresharedKey
		ec.Servers = c.Servers
		for _, p := range c.Paths {
			ec.LocalPaths = append(ec.LocalPaths, tunnel.LocalPath{Device: p.Interface, Addr: p.Addr, Priority: p.Priority, Budget: p.Budget})
		}
		ec.Subflows = c.SubflowsPerPath
		ec.BudgetState = c.BudgetState
		ec.Params = tunnel.Params{Scheduler: c.Scheduler, Weights: c.Weights, Reorder: c.Reorder, ReorderHold: c.ReorderHold, Congestion: c.Congestion, Recovery: c.Recovery}
		if c.HandshakeTimeout > 0 {
			ec.Tunables.HandshakeRetry = c.HandshakeTimeout
			ec.Tunables.HandshakeRetryMax = max(ec.Tunables.HandshakeRetryMax, c.HandshakeTimeout)
		}
	}
	if s := cfg.Server; s != nil {
		ec.Role = tunnel.Server
		ec.ListenAddrs = s.Listen
		ec.ServerID = s.ServerID
		ec.ServerIDBits = s.ServerIDBits
		ec.HandshakeRate = s.HandshakeRate
		if s.ListenSockets > 0 {
			ec.Tunables.ListenReaders = s.ListenSockets
		}
		for _, c := range s.Clients {
			ec.Clients = append(ec.Clients, tunnel.ClientPeer{Name: c.Label(), PublicKey: c.PublicKey, PSK: c.PresharedKey, AllowedIPs: c.AllowedIPs})
		}
	}
	name, _ := transportOf(cfg)
	(&tunnelTransport{name: name}).adjust(&ec)
	return ec
}

// hasNetAdmin reports whether the process holds CAP_NET_ADMIN (root normally does),
// read from /proc so the check needs no extra dependency.
func hasNetAdmin() bool {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return os.Geteuid() == 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return os.Geteuid() == 0
			}
			const capNetAdmin = 12
			return caps&(1<<capNetAdmin) != 0
		}
	}
	return os.Geteuid() == 0
}
