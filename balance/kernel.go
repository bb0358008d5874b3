package balance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/braid-vpn/braid/wire"
)

// routeProtocol tags every route the balancer installs (the rtnetlink
// protocol field, like "proto static"), so that Close and a restart after
// a crash find exactly its own routes and no one else's.
const routeProtocol = 98

// Offsets into the UDP datagram as nftables' transport-header base sees it
// (the UDP header is 8 bytes; braid's datagram follows).
const (
	udpHeaderLen = 8
	offType      = udpHeaderLen     // wire: the type byte
	offIndex     = udpHeaderLen + 4 // wire: receiver (data) or sender (initiation) index
)

// initChunk bounds the map elements sent in one netlink batch (a map of
// 2^16 entries would not fit one socket buffer).
const initChunk = 2048

// kernel is the balancer's view of one network namespace: its nftables
// table and maps, its policy rules and routes.
type kernel struct {
	cfg    *Config
	ns     vnetns.NsHandle // -1: the caller's namespace
	nft    *nftables.Conn
	nl     *netlink.Handle
	family int // unix.AF_INET or AF_INET6

	table   *nftables.Table
	dataMap *nftables.Set
	initMap *nftables.Set
	pre     *nftables.Chain
	steer   *nftables.Chain
	idShift uint
	idMask  uint32
	// The init map's key: the top InitBits of the sender index.
	initShift uint
	initMask  uint32
}

func openKernel(cfg *Config, nsPath string) (*kernel, error) {
	k := &kernel{cfg: cfg, ns: -1, family: unix.AF_INET}
	fam := nftables.TableFamilyIPv4
	if cfg.VIP.Is6() {
		k.family, fam = unix.AF_INET6, nftables.TableFamilyIPv6
	}
	k.idShift = uint(32 - cfg.ServerIDBits)
	k.idMask = ^uint32(0) << k.idShift
	k.initShift = uint(32 - cfg.InitBits())
	k.initMask = ^uint32(0) << k.initShift
	var err error
	if nsPath == "" {
		k.nft, err = nftables.New(nftables.AsLasting())
		if err == nil {
			k.nl, err = netlink.NewHandle()
		}
	} else {
		if k.ns, err = vnetns.GetFromPath(nsPath); err != nil {
			return nil, fmt.Errorf("balance: network namespace %s: %w", nsPath, err)
		}
		k.nft, err = nftables.New(nftables.WithNetNSFd(int(k.ns)), nftables.AsLasting())
		if err == nil {
			k.nl, err = netlink.NewHandleAt(k.ns)
		}
	}
	if err != nil {
		k.close()
		return nil, fmt.Errorf("balance: netlink: %w", err)
	}
	k.table = &nftables.Table{Name: cfg.NftTable, Family: fam}
	return k, nil
}

func (k *kernel) close() {
	if k.nft != nil {
		k.nft.CloseLasting()
	}
	if k.nl != nil {
		k.nl.Close()
	}
	if k.ns >= 0 {
		k.ns.Close()
	}
}

// mark is the fwmark that steers to server id, and table the routing table
// its fwmark rule looks up.
func (k *kernel) mark(id uint32) uint32 { return k.cfg.MarkBase + id }
func (k *kernel) rtTable(id uint32) int { return k.cfg.TableBase + int(id) }

// key is the map key of the server-id value v: the index with v in its top
// bits and the rest zero, as the masked payload reads.
func (k *kernel) key(v uint32) []byte { return binaryutil.BigEndian.PutUint32(v << k.idShift) }

// initKey is the init map's key of value v (its top InitBits bits).
func (k *kernel) initKey(v uint32) []byte { return binaryutil.BigEndian.PutUint32(v << k.initShift) }

func (k *kernel) vipPrefix() netip.Prefix { return netip.PrefixFrom(k.cfg.VIP, k.cfg.VIP.BitLen()) }

// install removes what a previous balancer with this config may have left,
// then adds the table, maps, chains and rules (nftables) and the fwmark
// rules and per-server routes (rtnetlink).
func (k *kernel) install(initMap []uint32) error {
	if err := k.checkForwarding(); err != nil {
		return err
	}
	if err := k.remove(); err != nil {
		return err
	}
	if err := k.installNft(initMap); err != nil {
		return fmt.Errorf("balance: nftables: %w", err)
	}
	for _, s := range k.cfg.Servers {
		r := k.rule(s.ID)
		if err := k.nl.RuleAdd(r); err != nil {
			return fmt.Errorf("balance: ip rule fwmark %#x table %d: %w", r.Mark, r.Table, err)
		}
		rt := k.route(k.vipPrefix(), s.Address, k.rtTable(s.ID))
		if err := k.nl.RouteReplace(rt); err != nil {
			return fmt.Errorf("balance: route %v via %v table %d (is %v on a link of the balancer?): %w", rt.Dst, s.Address, rt.Table, s.Address, err)
		}
	}
	return nil
}

// checkForwarding refuses a namespace that does not forward: every steered
// datagram would be dropped silently.
func (k *kernel) checkForwarding() error {
	key := "/proc/sys/net/ipv4/ip_forward"
	if k.family == unix.AF_INET6 {
		key = "/proc/sys/net/ipv6/conf/all/forwarding"
	}
	var v []byte
	err := k.inNetns(func() error {
		var err error
		v, err = os.ReadFile(key)
		return err
	})
	if err != nil {
		return fmt.Errorf("balance: reading %s: %w", key, err)
	}
	if strings.TrimSpace(string(v)) != "1" {
		return fmt.Errorf("balance: %s is %s in the balancer's namespace: it must forward the datagrams it steers (set it to 1)", key, strings.TrimSpace(string(v)))
	}
	return nil
}

func (k *kernel) rule(id uint32) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = k.family
	r.Priority = k.cfg.RulePriority
	r.Mark = k.mark(id)
	mask := ^uint32(0)
	r.Mask = &mask
	r.Table = k.rtTable(id)
	return r
}

func (k *kernel) route(dst netip.Prefix, gw netip.Addr, table int) *netlink.Route {
	return &netlink.Route{
		Family:   k.family,
		Dst:      &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(dst.Bits(), dst.Addr().BitLen())},
		Gw:       gw.AsSlice(),
		Table:    table,
		Protocol: routeProtocol,
	}
}

func (k *kernel) installNft(initMap []uint32) error {
	c := k.nft
	c.AddTable(k.table)
	k.dataMap = &nftables.Set{Table: k.table, Name: "data", IsMap: true, KeyType: nftables.TypeInteger, DataType: nftables.TypeMark, KeyByteOrder: binaryutil.BigEndian}
	var data []nftables.SetElement
	for _, s := range k.cfg.Servers {
		data = append(data, k.elem(s.ID, s.ID))
	}
	if err := c.AddSet(k.dataMap, data); err != nil {
		return err
	}
	k.initMap = &nftables.Set{Table: k.table, Name: "init", IsMap: true, KeyType: nftables.TypeInteger, DataType: nftables.TypeMark, KeyByteOrder: binaryutil.BigEndian}
	if err := c.AddSet(k.initMap, nil); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return err
	}
	if err := k.updateInitMap(nil, initMap); err != nil {
		return err
	}

	accept := nftables.ChainPolicyAccept
	k.pre = c.AddChain(&nftables.Chain{Name: "prerouting", Table: k.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRaw, Policy: &accept})
	k.steer = c.AddChain(&nftables.Chain{Name: "steer", Table: k.table})
	// Datagrams to the service: untracked, then steered.
	c.AddRule(&nftables.Rule{Table: k.table, Chain: k.pre, Exprs: join(
		k.matchService(true), []expr.Any{&expr.Notrack{}, &expr.Counter{},
			&expr.Verdict{Kind: expr.VerdictJump, Chain: k.steer.Name}})})
	// The servers' answers, when they return through the balancer:
	// untracked too, so no state exists in either direction.
	c.AddRule(&nftables.Rule{Table: k.table, Chain: k.pre, Exprs: join(
		k.matchService(false), []expr.Any{&expr.Notrack{}, &expr.Counter{}})})
	c.AddRule(&nftables.Rule{Table: k.table, Chain: k.steer, Exprs: k.steerBy(wire.TypeData, k.dataMap, k.idMask)})
	c.AddRule(&nftables.Rule{Table: k.table, Chain: k.steer, Exprs: k.steerBy(wire.TypeHandshakeInit, k.initMap, k.initMask)})
	// Anything else to the service (a type no client sends there, or data
	// naming no configured server) has nowhere to go.
	c.AddRule(&nftables.Rule{Table: k.table, Chain: k.steer, Exprs: []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}}})
	return c.Flush()
}

func join(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// matchService matches UDP to VIP:port (toService) or from it.
func (k *kernel) matchService(toService bool) []expr.Any {
	addrOff, portOff := uint32(12), uint32(0) // IPv4 saddr, UDP sport
	if k.family == unix.AF_INET6 {
		addrOff = 8
	}
	if toService {
		portOff = 2
		addrOff += uint32(k.cfg.VIP.BitLen() / 8)
	}
	vip := k.cfg.VIP.AsSlice()
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: addrOff, Len: uint32(len(vip))},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: vip},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: portOff, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(k.cfg.Port)},
	}
}

// steerBy sets the fwmark of a datagram of type typ from the map m, keyed by
// the index at bytes 4..8 under mask, and accepts it.
func (k *kernel) steerBy(typ byte, m *nftables.Set, mask uint32) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: offType, Len: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{typ}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: offIndex, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binaryutil.BigEndian.PutUint32(mask), Xor: make([]byte, 4)},
		&expr.Lookup{SourceRegister: 1, DestRegister: 1, IsDestRegSet: true, SetName: m.Name, SetID: m.ID},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
		&expr.Counter{},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}
}

// elem maps server-id value v to the mark of server id.
func (k *kernel) elem(v, id uint32) nftables.SetElement {
	return nftables.SetElement{Key: k.key(v), Val: k.markVal(id)}
}

// markVal is the map value steering to server id (a mark, host order).
func (k *kernel) markVal(id uint32) []byte { return binaryutil.NativeEndian.PutUint32(k.mark(id)) }

// updateInitMap writes the entries of next that differ from old (all, when
// old is nil). A changed entry is deleted and re-added in one batch, so a
// datagram finds either the old or the new server, never none.
func (k *kernel) updateInitMap(old, next []uint32) error {
	var del, add []nftables.SetElement
	flush := func() error {
		if len(del) > 0 {
			if err := k.nft.SetDeleteElements(k.initMap, del); err != nil {
				return err
			}
		}
		if err := k.nft.SetAddElements(k.initMap, add); err != nil {
			return err
		}
		del, add = del[:0], add[:0]
		return k.nft.Flush()
	}
	for v, id := range next {
		if old != nil && old[v] == id {
			continue
		}
		if old != nil {
			del = append(del, nftables.SetElement{Key: k.initKey(uint32(v))})
		}
		add = append(add, nftables.SetElement{Key: k.initKey(uint32(v)), Val: k.markVal(id)})
		if len(add) == initChunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if len(add) > 0 {
		return flush()
	}
	return nil
}

// setClientRoute routes dst via the server at gw, replacing a route of ours
// to dst but not someone else's (a connected network, a static route);
// delClientRoute removes it.
func (k *kernel) setClientRoute(dst netip.Prefix, gw netip.Addr) error {
	r := k.route(dst, gw, k.cfg.RouteTable)
	have, err := k.nl.RouteListFiltered(k.family, &netlink.Route{Dst: r.Dst, Table: r.Table}, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	if err != nil {
		return err
	}
	for _, h := range have {
		if h.Protocol != routeProtocol {
			return fmt.Errorf("table %d already has a route to %v (protocol %d) that is not the balancer's", r.Table, dst, h.Protocol)
		}
	}
	return k.nl.RouteReplace(r)
}

func (k *kernel) delClientRoute(dst netip.Prefix) error {
	r := k.route(dst, netip.Addr{}, k.cfg.RouteTable)
	r.Gw = nil
	return k.nl.RouteDel(r)
}

// remove deletes the nftables table and every rule and route tagged as the
// balancer's, whether this process or an earlier one installed them. It
// goes on past errors and returns the first.
func (k *kernel) remove() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if t, err := k.nft.ListTableOfFamily(k.table.Name, k.table.Family); err == nil && t != nil {
		k.nft.DelTable(k.table)
		keep(k.nft.Flush())
	}
	rules, err := k.nl.RuleList(k.family)
	keep(err)
	for _, r := range rules {
		if r.Priority == k.cfg.RulePriority && r.Table >= k.cfg.TableBase && r.Table < k.cfg.TableBase+1<<k.cfg.ServerIDBits {
			keep(k.nl.RuleDel(&r))
		}
	}
	tables := []int{k.cfg.RouteTable}
	for _, s := range k.cfg.Servers {
		tables = append(tables, k.rtTable(s.ID))
	}
	for _, t := range tables {
		routes, err := k.nl.RouteListFiltered(k.family, &netlink.Route{Table: t, Protocol: routeProtocol}, netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
		keep(err)
		for _, r := range routes {
			if err := k.nl.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
				keep(err)
			}
		}
	}
	return first
}

// inNetns runs fn on a thread inside the balancer's namespace.
func (k *kernel) inNetns(fn func() error) error {
	if k.ns < 0 {
		return fn()
	}
	runtime.LockOSThread()
	orig, err := vnetns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	if err := vnetns.Set(k.ns); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	ferr := fn()
	if err := vnetns.Set(orig); err != nil {
		// The thread is in the wrong namespace: let it die with the
		// goroutine rather than run other goroutines there.
		return errors.Join(ferr, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// httpClient dials from inside the balancer's namespace (the servers'
// control addresses are reachable from there, not necessarily from the
// caller's), without a proxy, and keeps no idle connection: a health
// check must open a fresh one, as a new client would.
func (k *kernel) httpClient() *http.Client {
	d := &net.Dialer{}
	return &http.Client{Transport: &http.Transport{
		Proxy:             nil,
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			err = k.inNetns(func() error {
				c, err = d.DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	}}
}
