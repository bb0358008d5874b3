package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/netns"
)

func TestTailKeepsTheEnd(t *testing.T) {
	var tl tail
	tl.Write([]byte(strings.Repeat("a", TailBytes)))
	tl.Write([]byte("\nlast line\n"))
	s := tl.String()
	if len(s) != TailBytes || !strings.HasSuffix(s, "\nlast line\n") {
		t.Errorf("kept %d bytes ending %q", len(s), s[len(s)-12:])
	}
}

func TestChildLifecycle(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: starts a process in a new network namespace")
	}
	ns, err := netns.New("braid-proct")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	c, err := Start(ns, "echo", exec.Command("sh", "-c", "echo first; echo second"))
	if err != nil {
		t.Fatal(err)
	}
	// Await, never ready, ends early with the last line of the child that
	// exited.
	err = Await(context.Background(), 5*time.Second, 10*time.Millisecond, func() error { return errors.New("never ready") }, c)
	if err == nil || err.Error() != "echo exited: second" {
		t.Errorf("Await on a child that exits: %v", err)
	}
	if !c.Exited() || c.LastLine() != "second" || c.Output() != "first\nsecond\n" {
		t.Errorf("exited %v, last line %q, output %q", c.Exited(), c.LastLine(), c.Output())
	}
	// A child that ignores SIGTERM is killed after the timeout.
	c, err = Start(ns, "sleeper", exec.Command("sh", "-c", "trap '' TERM; exec sleep 30"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	c.Stop(200 * time.Millisecond)
	if !c.Exited() || time.Since(start) > 5*time.Second {
		t.Errorf("Stop returned after %v, exited %v", time.Since(start), c.Exited())
	}
	if c.LastLine() != "(no output)" {
		t.Errorf("last line %q", c.LastLine())
	}
	var none *Child
	none.Stop(time.Second) // no panic
}

// Await returns once ready holds, and with ready's own error after the
// timeout (a child's exit: TestChildLifecycle).
func TestAwait(t *testing.T) {
	ctx := context.Background()
	n := 0
	if err := Await(ctx, 5*time.Second, time.Millisecond, func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || n != 3 {
		t.Errorf("ready on the third poll: %v after %d polls", err, n)
	}
	start := time.Now()
	if err := Await(ctx, 30*time.Millisecond, 5*time.Millisecond, func() error { return errors.New("never ready") }); err == nil || err.Error() != "never ready" || time.Since(start) < 30*time.Millisecond {
		t.Errorf("timeout: %v after %v", err, time.Since(start))
	}
}
