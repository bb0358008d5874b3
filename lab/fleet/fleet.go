// Package fleet is `braid lab fleet`: many real client daemons (`braid up`,
// each in its own namespace, on one or more paths) downloading in bulk
// through one or several braid servers, the latter behind the nftables
// balancer of package balance, with a server killed and brought back
// mid-run. It measures each client's goodput and longest stall, Jain's
// fairness index, and which server holds each session. docs/lab.md
// ("Fleet") describes the topology and every figure.
package fleet

import (
	"errors"
	"fmt"
	"time"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/httpbench"
	"github.com/braid-vpn/braid/lab/runner"
)

// Defaults of Config.
const (
	DefaultSample = 50 * time.Millisecond
	// DefaultWarmup is left out of the goodput and stall figures: the
	// handshakes are done, but every download is still in slow start.
	DefaultWarmup = 3 * time.Second
	DefaultCC     = "cubic"
	// DefaultLogLevel keeps dozens of daemons on two cores quiet.
	DefaultLogLevel = "warn"
	// StatusEvery is how often the servers' status is read to see which
	// one holds each session: often enough to date a failover to well
	// within its 8 s target, seldom enough to cost the daemons little.
	StatusEvery = 500 * time.Millisecond
	// Continuous is the object size of a download that lasts the whole
	// run: the largest the lab's HTTP server serves.
	Continuous = 1 << 34
	// ObjectSize is the papers' object, for --object.
	ObjectSize = 16 * httpbench.MB
	WebPort    = 8080
	// KillBusiest as Config.Kill kills the server holding the most
	// sessions at the time of the kill.
	KillBusiest = -1
)

// Config of a fleet run. Zero fields take the defaults above.
type Config struct {
	Scenario string // names the run in its report ("fairness", "scaleout")
	Servers  int
	Clients  int
	Paths    int // per client
	// Duration is the whole measured run, from the end of the warm-up.
	Duration time.Duration
	Warmup   time.Duration
	// Uplink shapes each server's link toward the clients (bit/s, tbf);
	// 0 leaves it unshaped.
	Uplink uint64
	// Object is the size of each download a client repeats; 0 = one
	// download for the whole run (Continuous).
	Object int64
	// Kill is the server (or KillBusiest) SIGKILLed KillAt into the
	// measured run (0: no kill) and started again at ReviveAt (0: never).
	Kill              int
	KillAt, ReviveAt  time.Duration
	RekeyAfter        time.Duration // every daemon's security.rekey_after_time; 0 = braid's
	Sample            time.Duration // how often each client's bytes are read
	CC                string
	LogLevel          string
	Seed              uint64 // shuffles the order the client daemons start in
	Prefix            string // of the namespaces' names ("" = testbed.Prefix)
	Braid             runner.BraidCommand
	Progress          func(line string)
	StartConcurrently int // client daemons started at once (0: 8)
}

func (c Config) withDefaults() Config {
	if c.Paths == 0 {
		c.Paths = 1
	}
	if c.Servers == 0 {
		c.Servers = 1
	}
	if c.Warmup == 0 {
		c.Warmup = DefaultWarmup
	}
	if c.Object == 0 {
		c.Object = Continuous
	}
	if c.Sample == 0 {
		c.Sample = DefaultSample
	}
	if c.CC == "" {
		c.CC = DefaultCC
	}
	if c.LogLevel == "" {
		c.LogLevel = DefaultLogLevel
	}
	if c.StartConcurrently == 0 {
		c.StartConcurrently = 8
	}
	if c.Progress == nil {
		c.Progress = func(string) {}
	}
	return c
}

// Check says what is wrong with c (after defaults), naming the flag.
func (c Config) Check() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Servers < 1 || c.Servers > MaxServers {
		bad("--servers: %d is outside 1..%d", c.Servers, MaxServers)
	}
	if c.Clients < 1 || c.Clients > MaxClients {
		bad("--clients: %d is outside 1..%d", c.Clients, MaxClients)
	}
	if c.Paths < 1 || c.Clients*c.Paths > MaxClientPaths {
		bad("--paths: %d per client is outside 1..%d in all", c.Paths, MaxClientPaths)
	}
	if c.Duration <= 0 {
		bad("--seconds: the run must last longer than 0")
	}
	if c.Object < 0 || c.Object > Continuous {
		bad("--object: %d is outside 0..%d bytes", c.Object, int64(Continuous))
	}
	if c.KillAt < 0 {
		bad("--kill: the time %v is negative", c.KillAt)
	}
	if c.KillAt > 0 {
		if c.Kill < KillBusiest || c.Kill >= c.Servers {
			bad("--kill: server %d does not exist (servers 0..%d)", c.Kill, c.Servers-1)
		}
		if c.KillAt >= c.Duration {
			bad("--kill: the time %v is outside the run (0..%v)", c.KillAt, c.Duration)
		}
		if c.ReviveAt != 0 && (c.ReviveAt <= c.KillAt || c.ReviveAt >= c.Duration) {
			bad("--revive: %v must come after the kill (%v) and before the end (%v)", c.ReviveAt, c.KillAt, c.Duration)
		}
		if c.Servers == 1 {
			bad("--kill: the only server would leave nothing to fail over to")
		}
	}
	if c.Sample < time.Millisecond || c.Sample > time.Second {
		bad("--sample: %v is outside 1ms..1s", c.Sample)
	}
	if c.RekeyAfter < 0 || (c.RekeyAfter > 0 && c.RekeyAfter < config.MinRekeyAfterTime) {
		bad("--rekey-after: %v is below braid's minimum of %v", c.RekeyAfter, config.MinRekeyAfterTime)
	}
	return errors.Join(errs...)
}
