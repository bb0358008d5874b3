package mesh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/braid-vpn/braid/config"
	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/lab/linkemu"
	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/lab/testbed"
	"github.com/braid-vpn/braid/netns"
)

// Mesh is a plan running in network namespaces. Close removes it.
type Mesh struct {
	Plan *Plan

	tb    *testbed.Testbed
	media []*linkemu.Medium // one per contention group of the radio model
}

// Build starts plan.Testbed with testbed.Start, naming the namespaces by
// prefix ("" = Prefix; a dead process's are removed first), on
// TwoChannels' media. On error it removes everything it made.
func Build(plan *Plan, prefix string) (*Mesh, error) {
	tp := plan.Testbed
	tb, err := testbed.Start(&tp, testbed.Options{Prefix: cmp.Or(prefix, Prefix)})
	if err != nil {
		return nil, fmt.Errorf("mesh: %w", err)
	}
	m := &Mesh{Plan: plan, tb: tb}
	if err := m.SetChannels(TwoChannels); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// The testbed names of hop h's link node and emulated link (graph nodes
// go by their IDs).
func linkNodeName(h int) string { return fmt.Sprintf("link node of hop %d", h) }
func hopName(h int) string      { return fmt.Sprintf("hop %d", h) }

// SetChannels switches the radio model while the mesh runs: fresh media
// (idle, empty) for ch's groups, every hop's directions moved onto them.
// Frames already scheduled keep their send times.
func (m *Mesh) SetChannels(ch Channels) error {
	groups, err := m.Plan.MediaGroups(ch)
	if err != nil {
		return err
	}
	m.media = nil
	for _, grp := range groups {
		med := linkemu.NewMedium(m.Plan.Config.Rate, m.Plan.Config.QueuePackets)
		m.media = append(m.media, med)
		for _, h := range grp {
			sh := linkemu.Shape{Delay: m.Plan.Hops[h].Delay, Medium: med}
			l := m.tb.LinkEmulator(hopName(h))
			if err := errors.Join(l.SetShape(linkemu.AtoB, sh), l.SetShape(linkemu.BtoA, sh)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Source and Destination are the two ends' namespaces.
func (m *Mesh) Source() *netns.Namespace      { return m.tb.NS(m.Plan.Graph.ID(m.Plan.Src)) }
func (m *Mesh) Destination() *netns.Namespace { return m.tb.NS(m.Plan.Graph.ID(m.Plan.Dst)) }

// Delivered is what each path has delivered to the source (its first
// hop towards the source) since the mesh was built: a download's bytes on
// it, with their headers.
func (m *Mesh) Delivered() []uint64 {
	var out []uint64
	for _, pp := range m.Plan.Paths {
		out = append(out, m.tb.Delivered(hopName(pp.Hops[0])))
	}
	return out
}

// Dropped counts the frames every medium tail-dropped since the radio
// model was last set.
func (m *Mesh) Dropped() uint64 {
	var n uint64
	for _, med := range m.media {
		n += med.Stats().Dropped
	}
	return n
}

// PathSession is TCP from the source to the service over path k only:
// from the path's address, which the path's rule sends along it; cc is the
// connection's congestion control ("" = the system's).
func (m *Mesh) PathSession(k int, cc string) runner.Session {
	return &runner.BaseSession{
		Dialer: runner.Dialer{NS: m.Source(), From: m.Plan.Paths[k].ClientAddr, CC: cc},
		To:     netip.AddrPortFrom(m.Plan.Service, runner.WebPort).String(),
	}
}

// StartBraid starts a braid server (on every address) in the destination
// and a client in the source, keys and configs in dir, and waits for a
// usable daemon path on every mesh path, told apart by local address. The
// client's paths are the mesh paths' addresses and its one server address
// the service address: one daemon path per mesh path (docs/lab.md, "Mesh
// lab"). scheduler "" keeps braid's default. Delivered counts the bytes.
func (m *Mesh) StartBraid(ctx context.Context, bc runner.BraidCommand, dir, scheduler, cc string) (runner.Session, error) {
	var paths []string
	for _, pp := range m.Plan.Paths {
		paths = append(paths, pp.ClientAddr.String())
	}
	server := []string{netip.AddrPortFrom(m.Plan.Service, runner.BraidPort).String()}
	return runner.StartBraid(ctx, runner.BraidSpec{
		Command: bc, Dir: dir, Server: m.Destination(), Client: m.Source(),
		Configs: func(srvKey, cliKey keys.Key, srvSock, cliSock string) (*config.File, *config.File) {
			cli := runner.BraidClientFile(srvKey, cliSock, server, paths)
			cli.Client.Scheduler = scheduler
			return runner.BraidServerConfig("mesh", cliKey, srvSock), cli
		},
		Want: len(m.Plan.Paths),
		Usable: func(st control.Status) int {
			return runner.UsableOn(st, len(m.Plan.Paths), func(ps control.PathStatus, k int) bool {
				ap, err := netip.ParseAddrPort(ps.Local)
				return err == nil && ap.Addr().Unmap() == m.Plan.Paths[k].ClientAddr
			})
		},
		Target: netip.AddrPortFrom(runner.BraidServerAddr.Addr(), runner.WebPort).String(), CC: cc,
	})
}

// Close stops the emulators and removes every namespace with its links
// and processes. It is idempotent and returns the first error.
func (m *Mesh) Close() error { return m.tb.Close() }
