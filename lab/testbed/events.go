package testbed

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/braid-vpn/braid/lab/linkemu"
	"github.com/braid-vpn/braid/lab/scenario"
)

// The changes a scenario's [[events]] make to a path while a download runs,
// and their undo. Each returns an error naming the path.

func (tb *Testbed) path(name string) (Path, error) {
	if p, ok := tb.Plan.Path(name); ok {
		return p, nil
	}
	return Path{}, fmt.Errorf("testbed: no path %q", name)
}

func (tb *Testbed) emulated(name string) (Emulated, *linkemu.Link, error) {
	for _, e := range tb.Plan.Emulated {
		if e.Link == name {
			if l := tb.links[name]; l != nil {
				return e, l, nil
			}
		}
	}
	return Emulated{}, nil, fmt.Errorf("testbed: cutting path %s needs its userspace emulator (not netem, not a plain link)", name)
}

// Cut makes path name's emulator drop every frame in both directions: a
// failure inside the network that neither end's interface sees.
func (tb *Testbed) Cut(name string) error {
	e, l, err := tb.emulated(name)
	if err != nil {
		return err
	}
	for _, d := range []struct {
		dir linkemu.Direction
		sh  linkemu.Shape
	}{{linkemu.AtoB, e.AtoB}, {linkemu.BtoA, e.BtoA}} {
		sh := d.sh
		sh.Loss = linkemu.UniformLoss(1)
		if err := l.SetShape(d.dir, sh); err != nil {
			return fmt.Errorf("testbed: cut %s: %w", name, err)
		}
	}
	return nil
}

// Restore gives path name's emulator back the scenario's shaping.
func (tb *Testbed) Restore(name string) error {
	e, l, err := tb.emulated(name)
	if err != nil {
		return err
	}
	if err := l.SetShape(linkemu.AtoB, e.AtoB); err != nil {
		return fmt.Errorf("testbed: restore %s: %w", name, err)
	}
	if err := l.SetShape(linkemu.BtoA, e.BtoA); err != nil {
		return fmt.Errorf("testbed: restore %s: %w", name, err)
	}
	return nil
}

// SetPathDown takes the client's interface of path name down.
func (tb *Testbed) SetPathDown(name string) error {
	p, err := tb.path(name)
	if err != nil {
		return err
	}
	return tb.Client().SetDown(p.ClientIf)
}

// SetPathUp brings the client's interface of path name up again, with the
// routes of the path's table that going down flushed.
func (tb *Testbed) SetPathUp(name string) error {
	p, err := tb.path(name)
	if err != nil {
		return err
	}
	if err := tb.Client().SetUp(p.ClientIf); err != nil {
		return err
	}
	return tb.pathRoutes(p)
}

// pathRoutes re-adds the client's routes of path p's own table (the kernel
// drops them when their interface goes down or their source address goes).
func (tb *Testbed) pathRoutes(p Path) error {
	var client string
	for _, n := range tb.Plan.Nodes {
		if n.Role == scenario.RoleClient {
			client = n.Name
		}
	}
	for _, r := range tb.Plan.Routes[client] {
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
	p, err := tb.path(name)
	if err != nil {
		return err
	}
	from, to := netip.PrefixFrom(p.ClientAddr, p.Subnet.Bits()), MovedAddr(p)
	if back {
		from, to = to, from
	}
	c := tb.Client()
	if err := c.DelAddr(p.ClientIf, from); err != nil {
		return err
	}
	if err := c.AddAddr(p.ClientIf, to); err != nil {
		return err
	}
	if back {
		return tb.pathRoutes(p)
	}
	return nil
}
