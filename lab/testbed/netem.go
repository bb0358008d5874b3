package testbed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/netns"
)

// The link emulator backends (Options.Emulator, `--emulator`).
const (
	// EmulatorUserspace is lab/linkemu: frames forwarded between a link
	// node's interfaces by an AF_PACKET process. Works on any kernel.
	EmulatorUserspace = "userspace"
	// EmulatorNetem bridges the link node's interfaces and shapes each
	// direction with the kernel's netem qdisc.
	EmulatorNetem = "netem"
	// EmulatorAuto is netem where the kernel has it, userspace otherwise.
	EmulatorAuto = "auto"
)

// Emulators lists the valid backend names.
var Emulators = []string{EmulatorAuto, EmulatorUserspace, EmulatorNetem}

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
	return "", fmt.Errorf("--emulator: unknown emulator %q (valid: %s)", choice, strings.Join(Emulators, ", "))
}

// NetemAvailable tries a netem qdisc on the loopback of a throwaway
// namespace: the only reliable test, since the kernel loads sch_netem on
// demand and a config file may be absent or lie.
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
// the interface it leaves by. netem's limit counts every frame it holds,
// the delayed ones included, while the scenario's queue limit counts frames
// waiting to be serialized (as the userspace emulator does); so the limit
// grows by what the link holds in flight at its rate and delay.
func NetemArgs(dev string, s scenario.Shaping) []string {
	args := []string{"qdisc", "replace", "dev", dev, "root", "netem"}
	limit := s.QueueLimit
	if limit <= 0 {
		limit = 1000 // netem's default
	}
	if s.Rate > 0 {
		inFlight := float64(s.Rate) / 8 * (s.Delay + s.Jitter).Seconds() / 1514
		limit += int(math.Ceil(inFlight)) + 1
	}
	args = append(args, "limit", strconv.Itoa(limit))
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

// bridgeName is the link node's bridge for a link (the kernel's limit is 15
// bytes; link names are at most 10).
func bridgeName(link string) string { return "br-" + link }

// startNetem makes link node e.Node forward frames between its two
// interfaces (a bridge, as the userspace emulator forwards at layer 2) and
// shapes each direction on its way out: A→B leaves by e.B, B→A by e.A.
func startNetem(ns *netns.Namespace, e Emulated) error {
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridgeName(e.Link)}}
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
	for _, d := range []struct {
		dev  string
		spec scenario.Shaping
	}{{e.B, e.Spec[0]}, {e.A, e.Spec[1]}} {
		if _, err := ns.Exec(ctx, "tc", NetemArgs(d.dev, d.spec)...); err != nil {
			return err
		}
	}
	return nil
}

// netemForwarded is what link node interface ifn sent: with netem the
// bytes a direction delivered are its egress interface's transmit counter.
func netemForwarded(ns *netns.Namespace, ifn string) uint64 {
	l, err := ns.Netlink().LinkByName(ifn)
	if err != nil || l.Attrs().Statistics == nil {
		return 0
	}
	return l.Attrs().Statistics.TxBytes
}
