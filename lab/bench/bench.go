// Package bench is `braid lab bench`: bulk TCP throughput and its CPU cost
// through braid on one, two and four paths, kernel TCP and wireguard-go, on
// unshaped veths. docs/lab.md ("Throughput bench") describes the setup and
// every figure.
package bench

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/lab/testbed"
)

const (
	CaseKernel      = "kernel"
	CaseBraid1      = "braid-1path"
	CaseBraid2      = "braid-2paths"
	CaseBraid4      = "braid-4paths"
	CaseWireGuardGo = "wireguard-go"
)

// AllCases is every case, in the order a repetition runs them.
var AllCases = []string{CaseKernel, CaseBraid1, CaseBraid2, CaseBraid4, CaseWireGuardGo}

// cases are each case's label and, for braid, its client paths (veths);
// the other cases use the first veth only.
var cases = map[string]struct {
	label string
	paths int
}{
	CaseKernel:      {"kernel TCP, 1 veth", 0},
	CaseBraid1:      {"braid, 1 path", 1},
	CaseBraid2:      {"braid, 2 paths", 2},
	CaseBraid4:      {"braid, 4 paths", 4},
	CaseWireGuardGo: {"wireguard-go, 1 veth", 0},
}

// vethsFor is how many veth pairs the cases need: always two (docs/lab.md),
// more for a braid case with more paths.
func vethsFor(names []string) int {
	n := 2
	for _, c := range names {
		n = max(n, cases[c].paths)
	}
	return n
}

// Defaults of Config and the bench's fixed settings.
const (
	// DefaultSize is large enough that a multi-Gbit/s transfer lasts
	// seconds, so that tick-sampled CPU times are counted in hundreds of
	// ticks.
	DefaultSize = 1 << 30
	DefaultReps = 3
	// DefaultCC is the papers' congestion control, set per socket (this
	// host's default is bbr).
	DefaultCC   = "cubic"
	DefaultIdle = time.Second
	// MinTimeoutRate sizes the default download timeout: a transfer slower
	// than this (bit/s) on an unshaped veth is broken, not slow.
	MinTimeoutRate = 20e6
	MinTimeout     = time.Minute
	// MaxParallel bounds Config.Parallel, as a guard against typos: a few
	// streams already fill every CPU of a test machine.
	MaxParallel = 64
	// WarmupSize is the untimed download before each timed one: it makes
	// the tunnel's handshake and the first slow start happen off the clock.
	WarmupSize    = 1 << 20
	WebPort       = 8080
	WireGuardPort = 51820
	stopTimeout   = 5 * time.Second  // for a child to exit on SIGTERM
	readyTimeout  = 10 * time.Second // for the HTTP server and wireguard-go
)

// Config of a bench run. Zero fields take the defaults above.
type Config struct {
	// Size is the bytes of one timed download, in all of its Parallel
	// concurrent HTTP downloads.
	Size     int64
	Parallel int
	Reps     int
	CC       string
	// Cases to run, a subset of AllCases (nil = all of them; wireguard-go
	// is left out with a note when WireGuardGo or Wg is missing).
	Cases []string
	// Idle is the background window before each download; < 0 disables it.
	Idle time.Duration
	// Timeout bounds one download (0: size at MinTimeoutRate, at least
	// MinTimeout).
	Timeout time.Duration
	// Prefix names the namespaces ("" = testbed.Prefix, so that the lab's
	// stale-namespace cleanup also finds a crashed bench's).
	Prefix string
	// Braid starts braid daemons and the HTTP server (`braid lab serve`).
	Braid runner.BraidCommand
	// Congestion, Recovery and CryptoWorkers set braid's options of those
	// names ("", nil: braid's defaults).
	Congestion, Recovery string
	CryptoWorkers        *int
	// WireGuardGo and Wg are the programs for the wireguard-go case; a
	// zero Path leaves the case out.
	WireGuardGo, Wg Tool
	// Progress, if set, gets one line per download or failure.
	Progress func(line string)
}

func (c Config) withDefaults() Config {
	if c.Size <= 0 {
		c.Size = DefaultSize
	}
	if c.Parallel <= 0 {
		c.Parallel = 1
	}
	if c.Reps <= 0 {
		c.Reps = DefaultReps
	}
	c.CC = cmp.Or(c.CC, DefaultCC)
	if c.Cases == nil {
		c.Cases = AllCases
	}
	c.Idle = cmp.Or(c.Idle, DefaultIdle)
	if c.Timeout <= 0 {
		c.Timeout = max(MinTimeout, time.Duration(float64(c.Size)*8/MinTimeoutRate*float64(time.Second)))
	}
	c.Prefix = cmp.Or(c.Prefix, testbed.Prefix)
	if c.Progress == nil {
		c.Progress = func(string) {}
	}
	return c
}

// CheckCases reports the first unknown case name.
func CheckCases(names []string) error {
	for _, n := range names {
		if !slices.Contains(AllCases, n) {
			return fmt.Errorf("unknown case %q (valid: %s)", n, strings.Join(AllCases, ", "))
		}
	}
	return nil
}

// CheckParallel reports whether k concurrent downloads of size bytes in
// all are possible: each needs a byte.
func CheckParallel(k int, size int64) error {
	if k < 1 || k > MaxParallel || int64(k) > size {
		return fmt.Errorf("%d parallel downloads of %d bytes in all: want 1..%d, at most one per byte", k, size, MaxParallel)
	}
	return nil
}

// Run measures every case Reps times, round-robin, and removes everything
// it created; cancelled, it returns the report so far with ctx's error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if os.Geteuid() != 0 {
		return nil, runner.ErrNotRoot
	}
	cfg = cfg.withDefaults()
	if err := cmp.Or(CheckCases(cfg.Cases), CheckParallel(cfg.Parallel, cfg.Size)); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	var uts unix.Utsname
	unix.Uname(&uts)
	_, cpus, _ := ReadSystemCPU()
	rep := &Report{
		Started: time.Now(), Host: host, Kernel: unix.ByteSliceToString(uts.Release[:]), CPUs: cpus,
		Size: cfg.Size, Parallel: cfg.Parallel, Reps: cfg.Reps, CC: cfg.CC, IdleSeconds: max(cfg.Idle, 0).Seconds(),
	}
	for _, n := range AllCases {
		switch {
		case !slices.Contains(cfg.Cases, n):
		case n == CaseWireGuardGo && (cfg.WireGuardGo.Path == "" || cfg.Wg.Path == ""):
			rep.Notes = append(rep.Notes, "wireguard-go left out: wireguard-go or wg is not installed")
		default:
			rep.Cases = append(rep.Cases, CaseResult{Name: n, Label: cases[n].label, Samples: []Sample{}})
		}
	}
	if rep.Case(CaseWireGuardGo) != nil {
		rep.Tools = map[string]Tool{"wireguard-go": cfg.WireGuardGo, "wg": cfg.Wg}
	}
	l, err := newLab(cfg, vethsFor(cfg.Cases))
	if err != nil {
		return nil, err
	}
	defer l.close()
	var runErr error
reps:
	for r := range cfg.Reps {
		for i := range rep.Cases {
			if runErr = ctx.Err(); runErr != nil {
				break reps
			}
			c := &rep.Cases[i]
			s, detail, err := l.runCase(ctx, c.Name, r)
			if runErr = ctx.Err(); runErr != nil {
				break reps
			}
			if err != nil {
				c.Errors = append(c.Errors, fmt.Sprintf("rep %d: %v", r+1, err))
				cfg.Progress(fmt.Sprintf("rep %d/%d %s: error: %v", r+1, cfg.Reps, c.Label, err))
				continue
			}
			c.Detail = cmp.Or(c.Detail, detail)
			c.Samples = append(c.Samples, s)
			cfg.Progress(fmt.Sprintf("rep %d/%d %s: %.0f Mbit/s, system %.2f CPU-s, background %.2f cores", r+1, cfg.Reps, c.Label, s.Mbps, float64(s.CPU.System), s.BackgroundCores))
		}
	}
	rep.Finished = time.Now()
	rep.Summarize()
	return rep, runErr
}
