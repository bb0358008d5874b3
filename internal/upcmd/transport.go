package upcmd

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/conn"
	"github.com/braid-vpn/braid/conn/stream"
	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/tunnel"
)

// tunnelTransport is what `braid up` sets up for [client]/[server] transport: nothing
// for "udp" (the engine opens its UDP sockets), a stream Transport for "tcp", and
// for "mptcp" also the kernel path manager's endpoints and limits.
type tunnelTransport struct {
	name   string
	stream *stream.Transport   // nil for udp
	pm     *stream.PathManager // mptcp only; nil when the path manager is unusable
	log    *slog.Logger
}

func transportOf(cfg *config.Config) (name, cc string) {
	if c := cfg.Client; c != nil {
		return c.Transport, c.TCPCongestion
	}
	if s := cfg.Server; s != nil {
		return s.Transport, s.TCPCongestion
	}
	return config.DefaultTransport, ""
}

// setupTransport checks that the kernel can run the configured transport (a clear
// error otherwise, e.g. MPTCP switched off by sysctl) and, for mptcp, configures
// the path manager. Close undoes it.
func setupTransport(cfg *config.Config, log *slog.Logger) (*tunnelTransport, error) {
	name, cc := transportOf(cfg)
	tt := &tunnelTransport{name: name, log: log}
	if name == "udp" {
		return tt, nil
	}
	sc := stream.DefaultConfig()
	sc.Kind = stream.TCP
	if name == "mptcp" {
		sc.Kind = stream.MPTCP
	}
	sc.Congestion = cc
	sc.Logger = log
	if c := cfg.Client; c != nil && name == "mptcp" {
		// The one connection goes to the first server address; the others are
		// tried in turn when it does not answer.
		if len(c.Servers) > 1 {
			sc.Fallbacks = c.Servers[1:]
		}
		// Extra subflows per path are announced once the server has accepted the
		// connection (see stream.PathManager.Apply), after every reconnection.
		sc.OnEstablished = func() {
			if tt.pm == nil {
				return
			}
			if err := tt.pm.Announce(); err != nil {
				log.Warn("mptcp: announcing extra subflow ports", "err", err)
			}
		}
	}
	st, err := stream.New(sc)
	if err != nil {
		return nil, fmt.Errorf("transport %s: %w", name, err)
	}
	tt.stream = st
	if name == "mptcp" {
		pm, err := stream.NewPathManager(log)
		if err != nil {
			// The tunnel still runs, on the subflows the kernel opens by itself.
			log.Warn("mptcp: cannot configure the kernel path manager; subflows as configured outside braid", "err", err)
		} else {
			tt.pm = pm
			tt.configurePM(cfg)
		}
	}
	return tt, nil
}

// configurePM applies the path manager plan of cfg (at start and on reload).
// Failures are logged: one MPTCP connection works without them, on fewer subflows.
func (tt *tunnelTransport) configurePM(cfg *config.Config) {
	if tt.pm == nil {
		return
	}
	var want []stream.PlannedEndpoint
	var lim stream.Limits
	var warn []string
	if c := cfg.Client; c != nil {
		var paths []stream.PMPath
		for _, p := range c.Paths {
			paths = append(paths, stream.PMPath{Device: p.Interface, Addr: p.Addr})
		}
		want, lim, warn = stream.ClientPlan(paths, c.Servers, c.SubflowsPerPath)
	} else if s := cfg.Server; s != nil {
		want, lim, warn = stream.ServerPlan(s.Listen)
	}
	for _, w := range warn {
		tt.log.Warn("mptcp: " + w)
	}
	if err := tt.pm.Apply(want, lim); err != nil {
		tt.log.Warn("mptcp: path manager", "err", err)
	}
}

// listen is the engine's socket seam for this transport: nil keeps UDP.
func (tt *tunnelTransport) listen(role config.Role) func(conn.Options) (conn.Conn, error) {
	if tt.stream == nil {
		return nil
	}
	if role == config.RoleServer {
		return tt.stream.Server
	}
	return tt.stream.Client
}

// adjust fits the engine's config to a stream transport. MPTCP runs the tunnel as
// one path, one connection to the first server address from no particular device:
// the kernel spreads that connection over the paths. And a path over a stream
// never loses a datagram but can stall for a retransmission timeout or two, so a
// path is declared down only after seconds of silence rather than the 350 ms that
// suit UDP.
func (tt *tunnelTransport) adjust(ec *tunnel.Config) {
	if tt.name == "udp" {
		return
	}
	if tt.name == "mptcp" && ec.Role == tunnel.Client {
		ec.LocalPaths = nil
		if len(ec.Servers) > 1 {
			ec.Servers = ec.Servers[:1]
		}
		ec.Subflows = 1
		ec.Params.Weights = nil
	}
	// A stream server accepts connections on one listener.
	ec.Tunables.ListenReaders = 1
	p := &ec.Tunables.Path
	p.DownBusyMin = max(p.DownBusyMin, StreamDownBusyMin)
	p.DownBusyMax = max(p.DownBusyMax, StreamDownBusyMax)
	p.DownIdle = max(p.DownIdle, StreamDownIdle)
}

// Path liveness over stream transports (see adjust). The TCP user timeout of the
// stream (conn/stream) ends a connection that stays stuck much longer.
const (
	StreamDownBusyMin = time.Second
	StreamDownBusyMax = 2 * time.Second
	StreamDownIdle    = 3 * time.Second
)

// status adds the transport and its counters to the engine's status.
func (tt *tunnelTransport) status(eng func() control.Status) func() control.Status {
	return func() control.Status {
		st := eng()
		st.Transport = tt.name
		st.Memory = control.ReadMemory()
		if tt.stream != nil {
			if st.Counters == nil {
				st.Counters = make(map[string]uint64)
			}
			for k, v := range tt.stream.Counters() {
				st.Counters[k] += v
			}
		}
		return st
	}
}

// close removes what braid configured in the kernel's path manager.
func (tt *tunnelTransport) close() {
	if tt.pm != nil {
		if err := tt.pm.Close(); err != nil {
			tt.log.Warn("mptcp: cleaning up the path manager", "err", err)
		}
	}
}

// withTransport and withTransportServer return copies of a table with another
// transport, so a reload that changed it still reloads the rest consistently with
// the transport that runs.
func withTransport(c *config.Client, name string) *config.Client {
	if c == nil {
		return nil
	}
	x := *c
	x.Transport = name
	return &x
}

func withTransportServer(s *config.Server, name string) *config.Server {
	if s == nil {
		return nil
	}
	x := *s
	x.Transport = name
	return &x
}
