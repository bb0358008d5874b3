package mesh

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/braid-vpn/braid/httpbench"
	"github.com/braid-vpn/braid/lab/linkemu"
	"github.com/braid-vpn/braid/netns"
)

// Options of Build.
type Options struct {
	// Prefix names the namespaces; "" = Prefix. Stale namespaces with
	// this prefix (their creator is dead) are removed first.
	Prefix string
	// Channels is the radio model the links start with (default
	// TwoChannels); SetChannels changes it.
	Channels Channels
}

// Mesh is a plan running in network namespaces. Close removes it.
type Mesh struct {
	Plan *Plan

	nodes  map[int]*netns.Namespace
	linkNS []*netns.Namespace
	links  []*linkemu.Link

	mu       sync.Mutex
	channels Channels
	groups   [][]int
	media    []*linkemu.Medium
	undo     []func() error
}

// Build creates one namespace per node of the plan and one link node per
// hop, the veths, addresses, emulators, routes and rules. On error
// everything already created is removed.
func Build(plan *Plan, opt Options) (m *Mesh, err error) {
	prefix := opt.Prefix
	if prefix == "" {
		prefix = Prefix
	}
	ch := opt.Channels
	if ch == 0 {
		ch = TwoChannels
	}
	groups, err := plan.MediaGroups(ch)
	if err != nil {
		return nil, err
	}
	if _, err := netns.Cleanup(prefix); err != nil {
		return nil, fmt.Errorf("mesh: removing stale namespaces: %w", err)
	}
	m = &Mesh{Plan: plan, nodes: map[int]*netns.Namespace{}}
	defer func() {
		if err != nil {
			m.Close()
			m = nil
		}
	}()
	g := plan.Graph
	for _, v := range plan.Nodes {
		ns, err := netns.New(prefix)
		if err != nil {
			return m, fmt.Errorf("mesh: node %s: %w", g.ID(v), err)
		}
		m.onClose(ns.Close)
		m.nodes[v] = ns
		for _, s := range plan.Sysctls[v] {
			if err := setSysctl(ns, s); err != nil {
				return m, fmt.Errorf("mesh: node %s: %w", g.ID(v), err)
			}
		}
	}
	for h := range plan.Hops {
		ns, err := netns.New(prefix)
		if err != nil {
			return m, fmt.Errorf("mesh: link node of hop %d: %w", h, err)
		}
		m.onClose(ns.Close)
		m.linkNS = append(m.linkNS, ns)
		for _, s := range LinkNodeSysctls {
			if err := setSysctl(ns, s); err != nil {
				return m, fmt.Errorf("mesh: link node of hop %d: %w", h, err)
			}
		}
	}
	for h, hop := range plan.Hops {
		ln := m.linkNS[h]
		from := netns.VethEnd{NS: m.nodes[hop.From], Name: hop.FromIf, Addrs: []netip.Prefix{netip.PrefixFrom(hop.FromAddr, 30)}}
		to := netns.VethEnd{NS: m.nodes[hop.To], Name: hop.ToIf, Addrs: []netip.Prefix{netip.PrefixFrom(hop.ToAddr, 30)}}
		a := netns.VethEnd{NS: ln, Name: hop.LinkA}
		b := netns.VethEnd{NS: ln, Name: hop.LinkB}
		// Veths go with either namespace: closing them undoes this.
		for _, pair := range [][2]netns.VethEnd{{from, a}, {b, to}} {
			if err := netns.AddVeth(pair[0], pair[1]); err != nil {
				return m, fmt.Errorf("mesh: hop %d (%s–%s): %w", h, g.ID(hop.From), g.ID(hop.To), err)
			}
			// Everything feeding an emulator must send plain frames.
			for _, e := range pair {
				if err := linkemu.DisableOffloads(e.NS, e.Name); err != nil {
					return m, fmt.Errorf("mesh: hop %d: %w", h, err)
				}
			}
		}
	}
	if err := m.nodes[plan.Dst].AddAddr("lo", netip.PrefixFrom(plan.Service, 32)); err != nil {
		return m, fmt.Errorf("mesh: service address: %w", err)
	}
	media := newMedia(plan, groups)
	for h, hop := range plan.Hops {
		ab, ba := hopShapes(plan, h, groups, media)
		l, err := linkemu.Start(linkemu.Config{NS: m.linkNS[h], A: hop.LinkA, B: hop.LinkB, AtoB: ab, BtoA: ba})
		if err != nil {
			return m, fmt.Errorf("mesh: emulator of hop %d: %w", h, err)
		}
		// Emulators close before the namespaces (undo runs backwards).
		m.onClose(l.Close)
		m.links = append(m.links, l)
	}
	m.channels, m.groups, m.media = ch, groups, media
	for _, v := range plan.Nodes {
		ns := m.nodes[v]
		for _, r := range plan.Routes[v] {
			if err := ns.AddRoute(r); err != nil {
				return m, fmt.Errorf("mesh: node %s: %w", g.ID(v), err)
			}
		}
		for _, r := range plan.Rules[v] {
			if err := ns.AddRule(r); err != nil {
				return m, fmt.Errorf("mesh: node %s: %w", g.ID(v), err)
			}
		}
	}
	return m, nil
}

// setSysctl writes s; a key the kernel lacks is fine only for IPv6
// settings (a kernel without IPv6 has nothing to switch off).
func setSysctl(ns *netns.Namespace, s Sysctl) error {
	err := ns.SetSysctl(s.Key, s.Value)
	if err != nil && errors.Is(err, fs.ErrNotExist) && strings.HasPrefix(s.Key, "net.ipv6.") {
		return nil
	}
	return err
}

func newMedia(plan *Plan, groups [][]int) []*linkemu.Medium {
	media := make([]*linkemu.Medium, len(groups))
	for i := range groups {
		media[i] = linkemu.NewMedium(plan.Config.Rate, plan.Config.QueuePackets)
	}
	return media
}

// hopShapes are hop h's two directions: the hop's delay, serialized on
// its group's medium.
func hopShapes(plan *Plan, h int, groups [][]int, media []*linkemu.Medium) (ab, ba linkemu.Shape) {
	var med *linkemu.Medium
	for i, grp := range groups {
		for _, x := range grp {
			if x == h {
				med = media[i]
			}
		}
	}
	s := linkemu.Shape{Delay: plan.Hops[h].Delay, Medium: med}
	if med == nil {
		// Not reachable for a plan's own groups (every hop is in one);
		// a hop outside every group gets a channel of its own.
		s.Rate, s.QueuePackets = plan.Config.Rate, plan.Config.QueuePackets
	}
	return s, s
}

// SetChannels switches the radio model while the mesh runs: fresh media
// (idle, empty) for ch's groups, every hop's directions moved onto them.
// Frames already scheduled keep their send times.
func (m *Mesh) SetChannels(ch Channels) error {
	groups, err := m.Plan.MediaGroups(ch)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	media := newMedia(m.Plan, groups)
	for h, l := range m.links {
		ab, ba := hopShapes(m.Plan, h, groups, media)
		if err := l.SetShape(linkemu.AtoB, ab); err != nil {
			return err
		}
		if err := l.SetShape(linkemu.BtoA, ba); err != nil {
			return err
		}
	}
	m.channels, m.groups, m.media = ch, groups, media
	return nil
}

// Channels is the current radio model.
func (m *Mesh) Channels() Channels {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.channels
}

// Groups returns the current media as hop indices (see MediaGroups).
func (m *Mesh) Groups() [][]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.groups
}

// Medium returns the medium hop h serializes on now.
func (m *Mesh) Medium(h int) *linkemu.Medium {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, grp := range m.groups {
		for _, x := range grp {
			if x == h {
				return m.media[i]
			}
		}
	}
	return nil
}

// Node returns graph node v's namespace (nil if v is on no path).
func (m *Mesh) Node(v int) *netns.Namespace { return m.nodes[v] }

// Source and Destination are the two ends' namespaces.
func (m *Mesh) Source() *netns.Namespace      { return m.nodes[m.Plan.Src] }
func (m *Mesh) Destination() *netns.Namespace { return m.nodes[m.Plan.Dst] }

// LinkNode returns hop h's link node.
func (m *Mesh) LinkNode(h int) *netns.Namespace { return m.linkNS[h] }

// Link returns hop h's emulator.
func (m *Mesh) Link(h int) *linkemu.Link { return m.links[h] }

// HopBytes is what hop h has forwarded since the mesh was built: towards
// the destination (AtoB) and towards the source (BtoA).
func (m *Mesh) HopBytes(h int) (toDst, toSrc uint64) {
	l := m.links[h]
	return l.Stats(linkemu.AtoB).BytesForwarded, l.Stats(linkemu.BtoA).BytesForwarded
}

// Delivered is what path k has delivered to the source (its first hop,
// towards the source) since the mesh was built: a download's bytes on
// that path, with their headers.
func (m *Mesh) Delivered(k int) uint64 {
	_, toSrc := m.HopBytes(m.Plan.Paths[k].Hops[0])
	return toSrc
}

// Lateness is the emulators' worst timing error so far: the largest mean
// and the largest 99th percentile over every hop and direction (see
// linkemu.Stats.Lateness).
func (m *Mesh) Lateness() (mean, p99 time.Duration) {
	for _, l := range m.links {
		for _, d := range []linkemu.Direction{linkemu.AtoB, linkemu.BtoA} {
			st := l.Stats(d).Lateness
			mean, p99 = max(mean, st.Mean), max(p99, st.P99)
		}
	}
	return mean, p99
}

// Dropped counts the frames every medium tail-dropped since the radio
// model was last set.
func (m *Mesh) Dropped() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n uint64
	for _, med := range m.media {
		n += med.Stats().Dropped
	}
	return n
}

// DialPath returns a dialer that opens TCP connections in the source from
// path k's address, so that the path's rule sends them along path k only;
// cc is the connection's congestion control ("" = the system's).
func (m *Mesh) DialPath(k int, cc string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	local := m.Plan.Paths[k].ClientAddr
	src := m.Source()
	return func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		d := net.Dialer{Control: httpbench.Control(cc), LocalAddr: &net.TCPAddr{IP: local.AsSlice()}}
		err = src.Do(func() error {
			c, err = d.DialContext(ctx, "tcp4", addr)
			return err
		})
		return c, err
	}
}

func (m *Mesh) onClose(f func() error) {
	m.mu.Lock()
	m.undo = append(m.undo, f)
	m.mu.Unlock()
}

// Close stops the emulators and removes every namespace with its links
// and processes. It is idempotent and returns the first error.
func (m *Mesh) Close() error {
	m.mu.Lock()
	undo := m.undo
	m.undo = nil
	m.mu.Unlock()
	var first error
	for i := len(undo) - 1; i >= 0; i-- {
		if err := undo[i](); err != nil && first == nil {
			first = err
		}
	}
	return first
}
