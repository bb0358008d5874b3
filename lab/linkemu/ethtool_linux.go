//go:build linux

package linkemu

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/safchain/ethtool"

	"github.com/braid-vpn/braid/netns"
)

// Offloads are read and switched through the kernel's ethtool interface
// (SIOCETHTOOL, via github.com/safchain/ethtool) rather than the ethtool
// program, which a fresh machine lacks. The feature names the kernel reports
// (its ETH_SS_FEATURES strings) are the ones `ethtool -k` prints for the
// members of a legacy flag, so the match below sees every offload under one
// name, whether or not the flag has other members.

// offloadFeature matches the kernel names of the segmentation, checksum,
// scatter-gather and receive-coalescing offloads.
var offloadFeature = regexp.MustCompile(`^(tx-checksum-|tx-scatter-gather|tx-gso|rx-gro)|-segmentation$|^rx-(lro|udp-gro-forwarding)$`)

// pickOffloads sorts the offloads among an interface's features: those
// that are on, and those to switch off (on or requested on, and not fixed).
// Fixed is what `ethtool -k` prints as "[fixed]": the driver offers no
// switch for the feature (not available), or the kernel never lets it
// change; asking for those would only be refused.
func pickOffloads(features map[string]ethtool.FeatureState) (on, change []string) {
	for name, s := range features {
		if !offloadFeature.MatchString(name) {
			continue
		}
		if s.Active {
			on = append(on, name)
		}
		if (s.Active || s.Requested) && s.Available && !s.NeverChanged {
			change = append(change, name)
		}
	}
	// Map order is random; sorted lists make errors and logs comparable.
	slices.Sort(on)
	slices.Sort(change)
	return on, change
}

// inNamespace runs fn with an ethtool socket opened inside ns: the kernel
// looks interface names up in the namespace of the socket the ioctl goes
// through, so the socket must be created on a thread that is inside (Do).
func inNamespace(ns *netns.Namespace, fn func(e *ethtool.Ethtool) error) error {
	return ns.Do(func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return fmt.Errorf("opening an ethtool socket: %w", err)
		}
		defer e.Close()
		return fn(e)
	})
}

// offloads reads the offloads of ifname (see pickOffloads).
func offloads(e *ethtool.Ethtool, ifname string) (on, change []string, err error) {
	features, err := e.FeaturesWithState(ifname)
	if err != nil {
		return nil, nil, fmt.Errorf("reading features: %w", err)
	}
	on, change = pickOffloads(features)
	return on, change, nil
}

// DisableOffloads turns off the offloads of interface ifname in ns, so that
// it sends and receives complete frames of at most MTU bytes. Call it on both
// ends of every veth feeding an emulated link; Start does it for its own.
func DisableOffloads(ns *netns.Namespace, ifname string) error {
	err := inNamespace(ns, func(e *ethtool.Ethtool) error {
		on, change, err := offloads(e, ifname)
		if err != nil {
			return err
		}
		if len(change) > 0 {
			off := make(map[string]bool, len(change))
			for _, f := range change {
				off[f] = false
			}
			// Like `ethtool -K`, the kernel applies what it can and fails
			// only on a malformed request: a feature the driver keeps on
			// (or turns back on, as a dependency of another) comes back as
			// a flag, not an error. The read-back is the judge.
			if err := e.Change(ifname, off); err != nil {
				return fmt.Errorf("switching off %s: %w", strings.Join(change, ", "), err)
			}
			if on, _, err = offloads(e, ifname); err != nil {
				return err
			}
		}
		// On but not changeable (fixed) counts too: the frames are wrong
		// either way.
		if len(on) > 0 {
			return fmt.Errorf("offloads still on (fixed by the driver or refused): %s", strings.Join(on, ", "))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("linkemu: disabling offloads on %s in %s: %w", ifname, ns.Name(), err)
	}
	return nil
}

// ActiveOffloads lists the offloads (as DisableOffloads chooses them) that
// are on for ifname in ns, to check a topology before trusting its numbers.
func ActiveOffloads(ns *netns.Namespace, ifname string) ([]string, error) {
	var on []string
	err := inNamespace(ns, func(e *ethtool.Ethtool) (err error) {
		on, _, err = offloads(e, ifname)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("linkemu: reading offloads of %s in %s: %w", ifname, ns.Name(), err)
	}
	return on, nil
}
