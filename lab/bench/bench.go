// Package bench is `braid lab bench`: bulk TCP throughput and its CPU cost
// through braid on one, two and four paths, measured in the same run as plain
// kernel TCP (the ceiling) and wireguard-go (the single-path userspace
// tunnel braid is built from and compared with).
//
// The network is as plain as it gets: a client and a server namespace
// joined by two to four unshaped veth pairs (no link emulator, no tbf), so that the
// tunnels' own cost, not a link, limits the rate. The HTTP server is a child
// process (`braid lab serve`) in the server namespace; the client is this
// process. Cases run round-robin, one repetition of each in turn, so that
// the machine's other load drifts over all of them alike; every tunnel is
// started afresh for each repetition and warmed up by a small download
// before the timed one.
//
// CPU is read from /proc: each tunnel daemon's and each workload process's
// utime+stime (/proc/PID/stat), and the machine-wide busy time
// (/proc/stat), which alone includes the kernel's softirq packet work. A
// short idle window before each download measures the machine's background
// load, so that a reader can tell a tunnel's cost from a neighbour's.
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

// Case names, in the order a repetition runs them.
const (
	CaseKernel      = "kernel"
	CaseBraid1      = "braid-1path"
	CaseBraid2      = "braid-2paths"
	CaseBraid4      = "braid-4paths"
	CaseWireGuardGo = "wireguard-go"
)

// AllCases is every case, in run order.
var AllCases = []string{CaseKernel, CaseBraid1, CaseBraid2, CaseBraid4, CaseWireGuardGo}

var caseLabels = map[string]string{
	CaseKernel:      "kernel TCP, 1 veth",
	CaseBraid1:      "braid, 1 path",
	CaseBraid2:      "braid, 2 paths",
	CaseBraid4:      "braid, 4 paths",
	CaseWireGuardGo: "wireguard-go, 1 veth",
}

// braidPaths is the number of client paths (veths) of each braid case;
// the other cases use the first veth only.
var braidPaths = map[string]int{CaseBraid1: 1, CaseBraid2: 2, CaseBraid4: 4}

// vethsFor is how many veth pairs the cases need: always the first two,
// so that the second shows a single-veth case keeping off it, and more
// only for a braid case with more paths.
func vethsFor(cases []string) int {
	n := 2
	for _, c := range cases {
		n = max(n, braidPaths[c])
	}
	return n
}

// Defaults of Config.
const (
	// DefaultSize is large enough that a multi-Gbit/s transfer lasts
	// seconds, so that tick-sampled CPU times (USER_HZ = 100) are counted
	// in hundreds of ticks.
	DefaultSize = 1 << 30
	DefaultReps = 3
	// DefaultCC is the papers' congestion control, set per socket (this
	// host's default is bbr).
	DefaultCC = "cubic"
	// DefaultIdle is the background window before each download.
	DefaultIdle = time.Second
	// MinTimeoutRate sizes the default download timeout: a transfer slower
	// than this (bit/s) on an unshaped veth is broken, not slow.
	MinTimeoutRate = 20e6
	// MaxParallel bounds Config.Parallel, as a guard against typos: a few
	// streams already fill every CPU of a test machine.
	MaxParallel = 64
	// MinTimeout is the least default download timeout.
	MinTimeout = time.Minute
	// WarmupSize is the untimed download before each timed one: it makes
	// the tunnel's handshake and the first slow start happen off the clock.
	WarmupSize = 1 << 20
	// WebPort is the HTTP server's port in the server namespace.
	WebPort = 8080
	// WireGuardPort is wireguard-go's listening port in the server.
	WireGuardPort = 51820
	// stopTimeout is how long a child gets to exit on SIGTERM.
	stopTimeout = 5 * time.Second
	// readyTimeout bounds waiting for the HTTP server and wireguard-go.
	readyTimeout = 10 * time.Second
)

// Config of a bench run. Zero fields take the defaults above.
type Config struct {
	// Size is the bytes of one timed download, split over Parallel
	// concurrent HTTP downloads (of Size/Parallel bytes each).
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
	// Congestion and Recovery set braid's options of those names ("":
	// braid's defaults), to see what each costs at full speed.
	Congestion, Recovery string
	// CryptoWorkers sets braid's crypto_workers (nil: braid's default).
	CryptoWorkers *int
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

func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// Run builds the namespaces, measures every case Reps times and removes
// everything it created, also on error and on ctx's cancellation (then it
// returns the report so far with ctx's error).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if os.Geteuid() != 0 {
		return nil, runner.ErrNotRoot
	}
	cfg = cfg.withDefaults()
	if err := CheckCases(cfg.Cases); err != nil {
		return nil, err
	}
	if err := CheckParallel(cfg.Parallel, cfg.Size); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	rep := &Report{
		Started: time.Now(), Host: host, Kernel: kernelRelease(),
		Size: cfg.Size, Parallel: cfg.Parallel, Reps: cfg.Reps, CC: cfg.CC, IdleSeconds: max(cfg.Idle, 0).Seconds(),
		Tools: map[string]Tool{},
	}
	if sys, err := ReadSystemCPU(); err == nil {
		rep.CPUs = sys.CPUs
	}
	var cases []string
	for _, n := range AllCases {
		if !slices.Contains(cfg.Cases, n) {
			continue
		}
		if n == CaseWireGuardGo && (cfg.WireGuardGo.Path == "" || cfg.Wg.Path == "") {
			rep.Notes = append(rep.Notes, "wireguard-go left out: wireguard-go or wg is not installed")
			continue
		}
		cases = append(cases, n)
		rep.Cases = append(rep.Cases, CaseResult{Name: n, Label: caseLabels[n], Samples: []Sample{}})
	}
	if slices.Contains(cases, CaseWireGuardGo) {
		rep.Tools["wireguard-go"] = cfg.WireGuardGo
		rep.Tools["wg"] = cfg.Wg
	}
	finish := func() {
		rep.Finished = time.Now()
		for i := range rep.Cases {
			rep.Cases[i].Summarize()
		}
		rep.ComputeRatios()
	}

	l, err := newLab(cfg, vethsFor(cases))
	if err != nil {
		return nil, err
	}
	defer l.close()

	var runErr error
reps:
	for r := 0; r < cfg.Reps; r++ {
		for i, name := range cases {
			if runErr = ctx.Err(); runErr != nil {
				break reps
			}
			c := &rep.Cases[i]
			s, detail, err := l.runCase(ctx, name, r)
			if ctx.Err() != nil {
				runErr = ctx.Err()
				break reps
			}
			if err != nil {
				c.Errors = append(c.Errors, fmt.Sprintf("rep %d: %v", r+1, err))
				l.progress("rep %d/%d %s: error: %v", r+1, cfg.Reps, c.Label, err)
				continue
			}
			c.Detail = cmp.Or(c.Detail, detail)
			c.Samples = append(c.Samples, s)
			l.progress("rep %d/%d %s: %.0f Mbit/s, system %.2f CPU-s, background %.2f cores", r+1, cfg.Reps, c.Label, s.Mbps, float64(s.CPU.System), s.BackgroundCores)
		}
	}
	finish()
	return rep, runErr
}
