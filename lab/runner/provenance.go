package runner

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
)

// What a run records about the machine (results.Provenance).
const (
	// LoadInterval is how often the load average is sampled during a run.
	LoadInterval = 5 * time.Second
	// HighLoadPerCPU is the 1-minute load average per CPU above which a
	// run that starts is warned about: other work then competes with the
	// emulators, daemons and downloads for the CPUs.
	HighLoadPerCPU = 0.5
)

// loadavgFile is where the load averages are read (a test may point it
// elsewhere).
var loadavgFile = "/proc/loadavg"

// ReadLoad returns the 1-minute load average of the machine.
func ReadLoad() (float64, error) {
	data, err := os.ReadFile(loadavgFile)
	if err != nil {
		return 0, err
	}
	return parseLoadavg(string(data))
}

// parseLoadavg reads the first field of /proc/loadavg ("0.52 0.58 0.59
// 1/389 12345").
func parseLoadavg(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, errors.New("loadavg: empty")
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("loadavg: %w", err)
	}
	return v, nil
}

// HighLoadWarning is the warning for a run that starts at load (1-minute
// average) on cpus CPUs, or "" when the machine was quiet enough.
func HighLoadWarning(load float64, cpus int) string {
	if cpus < 1 || load <= HighLoadPerCPU*float64(cpus) {
		return ""
	}
	return fmt.Sprintf("THE MACHINE WAS BUSY: its 1-minute load average was %.2f on %d CPUs when the run started (above %.1f per CPU). "+
		"Other work competed with the emulators, daemons and downloads; goodputs may be low and spread wide. Re-run on an idle machine.",
		load, cpus, HighLoadPerCPU)
}

// loadMonitor samples the load average every interval until stopped and
// keeps the highest value.
type loadMonitor struct {
	start float64
	mu    sync.Mutex
	max   float64
	stop  chan struct{}
	done  chan struct{}
}

func startLoadMonitor(interval time.Duration) *loadMonitor {
	m := &loadMonitor{stop: make(chan struct{}), done: make(chan struct{})}
	m.start, _ = ReadLoad()
	m.max = m.start
	go func() {
		defer close(m.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				m.sample()
			}
		}
	}()
	return m
}

func (m *loadMonitor) sample() {
	if v, err := ReadLoad(); err == nil {
		m.mu.Lock()
		m.max = max(m.max, v)
		m.mu.Unlock()
	}
}

// finish takes a last sample, stops the sampling and returns the highest
// load seen (the start included).
func (m *loadMonitor) finish() float64 {
	close(m.stop)
	<-m.done
	m.sample()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.max
}

// NewSeed returns a random campaign seed, small enough to type back
// (1 to 2³²-1).
func NewSeed() uint64 { return rand.Uint64N(1<<32-1) + 1 }

// SourceCommit returns the git commit of the code that runs: the binary's
// build information when `go build` recorded it (from "build"), else `git
// rev-parse HEAD` in the working directory (from "git"); dirty tells that
// the tree had uncommitted changes. All empty when neither is available.
func SourceCommit() (commit, from string, dirty bool) {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if commit != "" {
			return commit, "build", dirty
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "", "", false
	}
	commit = strings.TrimSpace(string(out))
	st, err := exec.CommandContext(ctx, "git", "status", "--porcelain").Output()
	return commit, "git", err == nil && len(strings.TrimSpace(string(st))) > 0
}
