package testbed

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"syscall"

	"github.com/braid-vpn/braid/lab/linkemu"
	"github.com/braid-vpn/braid/lab/scenario"
)

// The changes a scenario's [[events]] make to a path while a download runs,
// and their undo. Each returns an error naming the path.

// onPath runs f on path name.
func (tb *Testbed) onPath(name string, f func(Path) error) error {
	if p, ok := tb.Plan.Path(name); ok {
		return f(p)
	}
	return fmt.Errorf("testbed: no path %q", name)
}

// Cut makes path name's emulator drop every frame in both directions: a
// failure inside the network that neither end's interface sees.
func (tb *Testbed) Cut(name string) error { return tb.reshape(name, "cut") }

// Restore gives path name's emulator back the scenario's shaping.
func (tb *Testbed) Restore(name string) error { return tb.reshape(name, "restore") }

func (tb *Testbed) reshape(name, verb string) error {
	l := tb.links[name]
	i := slices.IndexFunc(tb.Plan.Emulated, func(e Emulated) bool { return e.Link == name })
	if l == nil || i < 0 {
		return fmt.Errorf("testbed: cutting path %s needs its userspace emulator (not netem, not a plain link)", name)
	}
	e := tb.Plan.Emulated[i]
	for d, sh := range []linkemu.Shape{e.AtoB, e.BtoA} {
		if verb == "cut" {
			sh.Loss = linkemu.UniformLoss(1)
		}
		if err := l.SetShape(linkemu.Direction(d), sh); err != nil {
			return fmt.Errorf("testbed: %s %s: %w", verb, name, err)
		}
	}
	return nil
}

// SetPathDown takes the client's interface of path name down.
func (tb *Testbed) SetPathDown(name string) error {
	return tb.onPath(name, func(p Path) error { return tb.Client().SetDown(p.ClientIf) })
}

// SetPathUp brings the client's interface of path name up again, with the
// routes of the path's table that going down flushed.
func (tb *Testbed) SetPathUp(name string) error {
	return tb.onPath(name, func(p Path) error {
		if err := tb.Client().SetUp(p.ClientIf); err != nil {
			return err
		}
		return tb.pathRoutes(p)
	})
}

// pathRoutes re-adds the client's routes of path p's own table (the kernel
// drops them when their interface goes down or their source address goes).
func (tb *Testbed) pathRoutes(p Path) error {
	for _, r := range tb.Plan.Routes[tb.node(scenario.RoleClient)] {
		if r.Table != p.Table {
			continue
		}
		if err := tb.Client().AddRoute(r); err != nil && !errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("testbed: path %s: %w", p.Name, err)
		}
	}
	return nil
}

// MovedAddr is the address Readdress gives path p's client end: a host of
// its subnet that neither end has.
func MovedAddr(p Path) netip.Prefix {
	return netip.PrefixFrom(p.ServerAddr.Next().Next().Next(), p.Subnet.Bits())
}

// Readdress moves the client's address on path name from its own to
// MovedAddr (the old one out first, so that the new one is not a secondary
// address removed with it), as a new DHCP lease does; back undoes it.
func (tb *Testbed) Readdress(name string, back bool) error {
	return tb.onPath(name, func(p Path) error {
		from, to := netip.PrefixFrom(p.ClientAddr, p.Subnet.Bits()), MovedAddr(p)
		if back {
			from, to = to, from
		}
		if err := tb.Client().DelAddr(p.ClientIf, from); err != nil {
			return err
		}
		if err := tb.Client().AddAddr(p.ClientIf, to); err != nil || !back {
			return err
		}
		return tb.pathRoutes(p)
	})
}
