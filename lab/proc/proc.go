// Package proc runs the lab's long-lived child processes (tunnel daemons, the
// HTTP server, OpenVPN, wireguard-go) inside network namespaces, keeping the
// tail of their output for error messages.
package proc

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/braid-vpn/braid/netns"
)

// TailBytes is how much of a child's output is kept.
const TailBytes = 16 << 10

// Child is a process started inside a namespace.
type Child struct {
	// Name says what the child is in error messages ("braid server").
	Name string
	cmd  *exec.Cmd
	out  tail
	done chan struct{}
}

// Start starts cmd inside ns (its stdout and stderr are kept) and reaps it
// when it exits.
func Start(ns *netns.Namespace, name string, cmd *exec.Cmd) (*Child, error) {
	c := &Child{Name: name, cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &c.out, &c.out
	// A grandchild holding the output pipe must not keep Wait (and Stop)
	// from returning once the child itself is gone.
	cmd.WaitDelay = time.Second
	if err := ns.Start(cmd); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { cmd.Wait(); close(c.done) }()
	return c, nil
}

// Exited reports whether the child has ended.
func (c *Child) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// PID is the child's process id.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// Stop asks the child to exit (SIGTERM) and kills it after timeout. A nil
// Child is a no-op, so cleanup paths need no checks.
func (c *Child) Stop(timeout time.Duration) {
	if c == nil {
		return
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(timeout):
		c.cmd.Process.Kill()
		<-c.done
	}
}

// Await polls ready every interval until it returns nil, failing early
// when one of children exits (its last line says why) or ctx ends, and
// after timeout with ready's last error, which is why that error names
// the timeout itself.
func Await(ctx context.Context, timeout, interval time.Duration, ready func() error, children ...*Child) error {
	deadline := time.Now().Add(timeout)
	for {
		for _, c := range children {
			if c.Exited() {
				return fmt.Errorf("%s exited: %s", c.Name, c.LastLine())
			}
		}
		err := ready()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// Output is the kept tail of the child's output.
func (c *Child) Output() string { return c.out.String() }

// LastLine is the child's last line of output, "(no output)" if none.
func (c *Child) LastLine() string {
	s := strings.TrimSpace(c.out.String())
	return cmp.Or(s[strings.LastIndexByte(s, '\n')+1:], "(no output)")
}

// tail keeps the last TailBytes written to it.
type tail struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	t.b.Next(max(t.b.Len()-TailBytes, 0))
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
