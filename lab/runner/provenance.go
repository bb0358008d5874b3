package runner

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The machine's load (results.Provenance, docs/lab.md): sampled every
// LoadInterval; above HighLoadPerCPU per CPU at the start, a warning.
const (
	LoadInterval   = 5 * time.Second
	HighLoadPerCPU = 0.5
)

// readLoad returns the machine's 1-minute load average: the first field of
// /proc/loadavg ("0.52 0.58 0.59 1/389 12345"). Tests replace it.
var readLoad = func() (v float64, err error) {
	data, err := os.ReadFile("/proc/loadavg")
	if err == nil {
		_, err = fmt.Sscan(string(data), &v)
	}
	return v, err
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

// watchLoad samples the load average every interval until finish, which
// takes a last sample and returns the highest value seen (start included).
func watchLoad(interval time.Duration) (start float64, finish func() float64) {
	start, _ = readLoad()
	peak, stop, done := start, make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for stopped := false; !stopped; {
			select {
			case <-stop:
				stopped = true
			case <-t.C:
			}
			if v, err := readLoad(); err == nil {
				peak = max(peak, v)
			}
		}
	}()
	return start, func() float64 {
		close(stop)
		<-done
		return peak
	}
}

// NewSeed returns a random campaign seed, small enough to type back
// (1 to 2³²-1).
func NewSeed() uint64 { return rand.Uint64N(1<<32-1) + 1 }

// SourceCommit returns the git commit of the code that runs, from the
// binary's build information ("build") or `git rev-parse HEAD` ("git"),
// and whether the tree had uncommitted changes (gitDirty).
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
	st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=all").Output()
	return strings.TrimSpace(string(out)), "git", err == nil && gitDirty(string(st))
}

// gitDirty reports whether `git status --porcelain` shows a change to a
// tracked file or an untracked Go file. Other untracked files do not count:
// they are mostly the results of earlier runs, which would otherwise mark
// the second of two campaigns run back to back as dirty.
func gitDirty(status string) bool {
	for line := range strings.Lines(status) {
		path, untracked := strings.CutPrefix(strings.TrimRight(line, "\n"), "?? ")
		if !untracked || strings.HasSuffix(strings.Trim(path, `"`), ".go") {
			return true
		}
	}
	return false
}

// DefaultLockPath is the machine-wide lock of lab runs: in /run, or in the
// temporary directory where /run is not writable.
func DefaultLockPath() string {
	dir := "/run"
	if unix.Access(dir, unix.W_OK) != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "braid-lab.lock")
}

// Lock is a held run lock: the file holds the owner's PID, its start time
// and command on three lines.
type Lock struct {
	f *os.File
}

// BusyError is returned by AcquireLock when another live process holds the
// lock.
type BusyError struct {
	Path    string
	PID     int
	Since   string // RFC 3339, as the owner wrote it
	Command string
}

func (e *BusyError) Error() string {
	who := "pid " + strconv.Itoa(e.PID)
	if e.Since != "" {
		who += " since " + e.Since
	}
	if e.Command != "" {
		who += ": " + e.Command
	}
	return fmt.Sprintf("another lab run is active (%s; lock %s): wait for it to finish, or pass --force to run alongside it", who, e.Path)
}

// AcquireLock takes the machine's run lock at path for this process, with
// command (the command line) written in it. The file is also flock'ed, so
// two runs starting together cannot both take it; a lock whose owner is
// gone is taken over. A live owner is a *BusyError.
func AcquireLock(path, command string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("run lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		busy := readLock(f, path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, busy
		}
		return nil, fmt.Errorf("run lock %s: %w", path, err)
	}
	// The flock is ours; an owner still alive lost its flock to a file
	// removed and made again under it: the lock is still held.
	if old := readLock(f, path); old.PID > 0 && old.PID != os.Getpid() && lockOwnerAlive(old.PID, old.Command) {
		f.Close()
		return nil, old
	}
	content := fmt.Sprintf("%d\n%s\n%s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339), strings.ReplaceAll(command, "\n", " "))
	if err = f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(content), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("run lock: %w", err)
	}
	return &Lock{f: f}, nil
}

// Release empties the lock file and lets it go. The file stays: removing
// it would let a run that opened it just before take a lock nobody else
// sees.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	l.f.Truncate(0)
	err := l.f.Close() // drops the flock
	l.f = nil
	return err
}

// readLock reads the owner written in a lock file.
func readLock(f *os.File, path string) *BusyError {
	buf := make([]byte, 4096)
	n, _ := f.ReadAt(buf, 0)
	lines := append(strings.SplitN(string(buf[:n]), "\n", 3), "", "")
	pid, _ := strconv.Atoi(strings.TrimSpace(lines[0]))
	return &BusyError{Path: path, PID: pid, Since: strings.TrimSpace(lines[1]), Command: strings.TrimSpace(lines[2])}
}

// lockOwnerAlive reports whether the process pid exists (EPERM counts)
// and, where its command line can be read, is still command (not a PID
// reused after a crash).
func lockOwnerAlive(pid int, command string) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || command == "" {
		return true
	}
	return strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ") == command
}
