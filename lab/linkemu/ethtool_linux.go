//go:build linux

package linkemu

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/braid-vpn/braid/netns"
)

// offloadFeature matches the kernel names of the segmentation, checksum,
// scatter-gather and receive-coalescing offloads.
var offloadFeature = regexp.MustCompile(`^(tx-checksum-|tx-scatter-gather|tx-gso|rx-gro)|-segmentation$|^rx-(lro|udp-gro-forwarding)$`)

// kernelNames: `ethtool -k` shows a feature that is alone under a legacy
// flag by the flag's name.
var kernelNames = map[string]string{
	"generic-segmentation-offload": "tx-generic-segmentation",
	"generic-receive-offload":      "rx-gro",
	"large-receive-offload":        "rx-lro",
}

func ethtool(ns *netns.Namespace, args ...string) (string, error) {
	if _, err := exec.LookPath("ethtool"); err != nil {
		return "", errors.New("ethtool is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := ns.Run(ctx, "ethtool", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ethtool %s: %w: %s", args[0], err, strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", "; "))
	}
	return string(out), nil
}

// offloads reads `ethtool -k ifname`: the offloads that are on, and the
// ones to switch off (on or requested on, and not fixed). Its lines are
// "name: on", "name: off [fixed]", "name: off [requested on]", and a group
// of features ("tx-checksumming: on") is followed by its members, indented.
func offloads(ns *netns.Namespace, ifname string) (on, change []string, err error) {
	out, err := ethtool(ns, "-k", ifname)
	if err != nil {
		return nil, nil, err
	}
	for line := range strings.Lines(out) {
		name, state, _ := strings.Cut(strings.TrimSpace(line), ": ")
		if name = cmp.Or(kernelNames[name], name); !offloadFeature.MatchString(name) {
			continue
		}
		active := strings.HasPrefix(state, "on")
		if active {
			on = append(on, name)
		}
		if (active || strings.HasSuffix(state, "[requested on]")) && !strings.HasSuffix(state, "[fixed]") {
			change = append(change, name)
		}
	}
	return on, change, nil
}

// DisableOffloads turns off the offloads of interface ifname in ns, so that
// it sends and receives complete frames of at most MTU bytes. Call it on both
// ends of every veth feeding an emulated link; Start does it for its own.
func DisableOffloads(ns *netns.Namespace, ifname string) error {
	on, change, err := offloads(ns, ifname)
	if err == nil && len(change) > 0 {
		args := []string{"-K", ifname}
		for _, f := range change {
			args = append(args, f, "off")
		}
		// ethtool -K fails only if it changed nothing, and a feature the
		// driver keeps on is not changeable: the read-back is the judge.
		if _, err = ethtool(ns, args...); err == nil {
			on, _, err = offloads(ns, ifname)
		}
	}
	if err == nil && len(on) > 0 {
		err = fmt.Errorf("offloads still on (fixed by the driver or refused): %s", strings.Join(on, ", "))
	}
	if err != nil {
		return fmt.Errorf("linkemu: disabling offloads on %s in %s: %w", ifname, ns.Name(), err)
	}
	return nil
}

// ActiveOffloads lists the offloads (as DisableOffloads chooses them) that
// are on for ifname in ns, to check a topology before trusting its numbers.
func ActiveOffloads(ns *netns.Namespace, ifname string) ([]string, error) {
	on, _, err := offloads(ns, ifname)
	if err != nil {
		return nil, fmt.Errorf("linkemu: reading offloads of %s in %s: %w", ifname, ns.Name(), err)
	}
	return on, nil
}
