package testbed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/netns"
)

// The link emulator backends (Options.Emulator, `--emulator`).
const (
	EmulatorUserspace = "userspace" // lab/linkemu: works on any kernel
	EmulatorNetem     = "netem"     // the link node bridges its ends, each direction leaves by a netem qdisc
	EmulatorAuto      = "auto"      // netem where the kernel has it, userspace otherwise
)

// ResolveEmulator turns a backend choice into the backend to use ("" is
// auto). Asking for netem on a kernel without it is an error that says so.
func ResolveEmulator(choice string) (string, error) {
	switch choice {
	case EmulatorUserspace:
		return choice, nil
	case EmulatorNetem:
		if err := NetemAvailable(); err != nil {
			return "", fmt.Errorf("--emulator netem: %w; use --emulator userspace (or auto)", err)
		}
		return choice, nil
	case "", EmulatorAuto:
		if NetemAvailable() == nil {
			return EmulatorNetem, nil
		}
		return EmulatorUserspace, nil
	}
	return "", fmt.Errorf("--emulator: unknown emulator %q (valid: %s, %s, %s)", choice, EmulatorAuto, EmulatorUserspace, EmulatorNetem)
}

// NetemAvailable tries a netem qdisc on the loopback of a throwaway
// namespace: the kernel loads sch_netem on demand, a config file may lie.
func NetemAvailable() error {
	if _, err := exec.LookPath("tc"); err != nil {
		return errors.New("tc (iproute2) is not installed")
	}
	ns, err := netns.New(Prefix)
	if err != nil {
		return err
	}
	defer ns.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := ns.Exec(ctx, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"); err != nil {
		return fmt.Errorf("this kernel has no netem qdisc (sch_netem): %w", err)
	}
	return nil
}

// NetemArgs is the tc command line that shapes one direction of a link on
// the interface it leaves by. netem's limit also counts delayed frames, so
// it is the scenario's queue limit plus the frames in flight.
func NetemArgs(dev string, s scenario.Shaping) []string {
	limit := s.QueueLimit
	if limit <= 0 {
		limit = 1000 // netem's default
	}
	if s.Rate > 0 {
		inFlight := float64(s.Rate) / 8 * (s.Delay + s.Jitter).Seconds() / 1514
		limit += int(math.Ceil(inFlight)) + 1
	}
	args := []string{"qdisc", "replace", "dev", dev, "root", "netem", "limit", strconv.Itoa(limit)}
	if s.Delay > 0 || s.Jitter > 0 {
		args = append(args, "delay", usec(s.Delay))
		if s.Jitter > 0 {
			args = append(args, usec(s.Jitter))
		}
	}
	switch l := s.Loss; l.Model {
	case scenario.LossUniform:
		args = append(args, "loss", "random", pct(l.Percent))
	case scenario.LossGE:
		args = append(args, "loss", "gemodel", pct(l.P), pct(l.R), pct(l.OneMinusH), pct(l.OneMinusK))
	}
	if s.Rate > 0 {
		args = append(args, "rate", strconv.FormatUint(uint64(s.Rate), 10)+"bit")
	}
	return args
}

func usec(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) + "us" }
func pct(p float64) string        { return strconv.FormatFloat(p, 'f', -1, 64) + "%" }

// startNetem bridges link node e.Node's two interfaces (the userspace
// emulator forwards at layer 2 too) and shapes each direction on its way out.
func startNetem(ns *netns.Namespace, e Emulated) error {
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br-" + e.Link}} // at most 13 bytes
	nl := ns.Netlink()
	if err := nl.LinkAdd(br); err != nil {
		return fmt.Errorf("bridge %s: %w", br.Name, err)
	}
	for _, ifn := range []string{e.A, e.B} {
		l, err := nl.LinkByName(ifn)
		if err != nil {
			return err
		}
		if err := nl.LinkSetMaster(l, br); err != nil {
			return fmt.Errorf("%s into bridge %s: %w", ifn, br.Name, err)
		}
	}
	if err := ns.SetUp(br.Name); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, dev := range []string{e.B, e.A} { // A→B leaves by B
		if _, err := ns.Exec(ctx, "tc", NetemArgs(dev, e.Spec[i])...); err != nil {
			return err
		}
	}
	return nil
}
