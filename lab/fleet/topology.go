package fleet

import (
	"fmt"
	"net/netip"
)

// The fleet's addresses (docs/lab.md, "Fleet"). Every link is a /30 of
// the benchmarking range: clients' paths in 198.19.0.0/16, servers' in
// 198.18.0.0/24; the backend LAN and the balancer's virtual address sit in
// 198.18.255.0/24 and 198.18.254.0/24. Inside the tunnel every server is
// 100.64.0.1 and client i is 100.64.0.0 + 2 + i, all in TunnelPrefix.
var (
	clientLinks   = netip.MustParsePrefix("198.19.0.0/16")
	serverLinks   = netip.MustParsePrefix("198.18.0.0/24")
	backendLAN    = netip.MustParsePrefix("198.18.255.0/24")
	VIP           = netip.MustParseAddr("198.18.254.1")
	TunnelPrefix  = netip.MustParsePrefix("100.64.0.0/16")
	serverInner   = netip.MustParseAddr("100.64.0.1")
	backendRouter = netip.MustParseAddr("198.18.255.1")
	backendAddr   = netip.MustParseAddr("198.18.255.2")
)

// Limits of the topology's address plan: a /30 per client path in a /16,
// a /30 per server in a /24, an inner address per client in a /16.
const (
	MaxServers     = 1 << (32 - 24 - 2)
	MaxClientPaths = 1 << (32 - 16 - 2)
	MaxClients     = 1<<(32-16) - 3
)

// Interface names: the router's end of client i's path k and of server
// j's link, and the other ends.
func routerClientIf(i, k int) string { return fmt.Sprintf("c%dp%d", i, k) }
func routerServerIf(j int) string    { return fmt.Sprintf("s%d", j) }
func clientIf(k int) string          { return fmt.Sprintf("p%d", k) }

const (
	serverIf = "up"  // a server's link to the router, its shaped uplink
	lanIf    = "lan" // the backend LAN, both ends
)

// link30 is the n-th /30 of block: the router holds its first host
// address, the other end its second.
func link30(block netip.Prefix, n int) (router, end netip.Prefix) {
	base := block.Addr().As4()
	v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	v += uint32(4 * n)
	at := func(off uint32) netip.Prefix {
		x := v + off
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)}), 30)
	}
	return at(1), at(2)
}

// clientPathLink is the /30 of client i's path k (paths per client P).
func clientPathLink(i, k, paths int) (router, client netip.Prefix) {
	return link30(clientLinks, i*paths+k)
}

// serverLink is the /30 between the router and server j.
func serverLink(j int) (router, server netip.Prefix) { return link30(serverLinks, j) }

// clientInner is client i's address inside the tunnel.
func clientInner(i int) netip.Prefix {
	a := TunnelPrefix.Addr().As4()
	n := uint32(a[2])<<8 | uint32(a[3]) + 2 + uint32(i)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{a[0], a[1], byte(n >> 8), byte(n)}), TunnelPrefix.Bits())
}
