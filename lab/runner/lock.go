package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// LockName is the lock file's name; DefaultLockPath says where it goes.
const LockName = "braid-lab.lock"

// DefaultLockPath is the machine-wide lock of lab runs: /run/braid-lab.lock
// (the lab runs as root), or in the temporary directory where /run is not
// writable.
func DefaultLockPath() string {
	if unix.Access("/run", unix.W_OK) == nil {
		return filepath.Join("/run", LockName)
	}
	return filepath.Join(os.TempDir(), LockName)
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
// command (the command line) written in it for whoever finds it held. The
// file is also flock'ed, so two runs starting together cannot both take it;
// a lock left by a process that is gone (its PID is not alive, or it no
// longer holds the flock) is stale and taken over. A live owner is a
// *BusyError.
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
	// The flock is ours. A PID in the file that is still alive with the
	// command written next to it is a run whose flock went away (the file
	// was removed and made again under it): treat it as held rather than
	// run two campaigns at once. Any other PID is a stale lock.
	if old := readLock(f, path); old.PID > 0 && old.PID != os.Getpid() && lockOwnerAlive(old.PID, old.Command) {
		f.Close()
		return nil, old
	}
	command = strings.ReplaceAll(command, "\n", " ")
	content := fmt.Sprintf("%d\n%s\n%s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339), command)
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("run lock: %w", err)
	}
	if _, err := f.WriteAt([]byte(content), 0); err != nil {
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
	e := &BusyError{Path: path}
	buf := make([]byte, 4096)
	n, _ := f.ReadAt(buf, 0)
	lines := strings.SplitN(string(buf[:n]), "\n", 3)
	e.PID, _ = strconv.Atoi(strings.TrimSpace(lines[0]))
	if len(lines) > 1 {
		e.Since = strings.TrimSpace(lines[1])
	}
	if len(lines) > 2 {
		e.Command = strings.TrimSpace(lines[2])
	}
	return e
}

// lockOwnerAlive reports whether the process pid exists (a process of
// another user counts: EPERM) and, where its command line can be read, is
// still command: a PID reused by another program after a crash is not the
// owner.
func lockOwnerAlive(pid int, command string) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || command == "" {
		return true
	}
	return strings.Join(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), " ") == command
}
