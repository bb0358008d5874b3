package tunnel

import "net/netip"

// allowedIPs maps inner prefixes to peers with longest-prefix match (cryptokey
// routing). A binary trie per address family keeps lookups O(address bits) however
// many clients a server has; lookups do not allocate.
type allowedIPs struct {
	v4, v6 *trieNode
}

type trieNode struct {
	child [2]*trieNode
	peer  *peer // non-nil when a prefix ends here
}

func (a *allowedIPs) root(addr netip.Addr) **trieNode {
	if addr.Is4() {
		return &a.v4
	}
	return &a.v6
}

func bitAt(b []byte, i int) int { return int(b[i/8]>>(7-uint(i%8))) & 1 }

// insert adds prefix → p, replacing an existing entry for exactly that prefix.
func (a *allowedIPs) insert(pfx netip.Prefix, p *peer) {
	if !pfx.IsValid() || pfx.Addr().Is4In6() {
		// The zero prefix is no prefix (not ::/0), and an IPv4-mapped one is
		// refused by the config (write the IPv4 prefix): neither is routed.
		return
	}
	pfx = pfx.Masked()
	addr, bits := pfx.Addr(), pfx.Bits()
	n := a.root(addr)
	if *n == nil {
		*n = &trieNode{}
	}
	node := *n
	raw := addr.AsSlice()
	for i := 0; i < bits; i++ {
		b := bitAt(raw, i)
		if node.child[b] == nil {
			node.child[b] = &trieNode{}
		}
		node = node.child[b]
	}
	node.peer = p
}

// lastLookup is one goroutine's last answer of a table: inner packets come in
// runs of one flow, and the trie walks a node per address bit (1.5 % of a
// daemon's cycles at a gigabit, asked once per packet).
type lastLookup struct {
	table *allowedIPs
	addr  netip.Addr
	peer  *peer
}

// lookup is a.lookup(addr), answered from the last question when it was the
// same one of the same table (a reload builds a new table).
func (c *lastLookup) lookup(a *allowedIPs, addr netip.Addr) *peer {
	if c.table == a && c.addr == addr {
		return c.peer
	}
	p := a.lookup(addr)
	*c = lastLookup{table: a, addr: addr, peer: p}
	return p
}

// lookup returns the peer owning the longest prefix containing addr.
func (a *allowedIPs) lookup(addr netip.Addr) *peer {
	addr = addr.Unmap()
	node := *a.root(addr)
	var best *peer
	var raw [16]byte
	var n int
	if addr.Is4() {
		v := addr.As4()
		n = copy(raw[:], v[:])
	} else {
		v := addr.As16()
		n = copy(raw[:], v[:])
	}
	for i := 0; node != nil; i++ {
		if node.peer != nil {
			best = node.peer
		}
		if i == n*8 {
			break
		}
		node = node.child[bitAt(raw[:n], i)]
	}
	return best
}

// buildAllowedIPs makes a new trie of every peer's prefixes. Reloads build a new one
// and swap it in (Engine.allowed is an atomic pointer), so the per-packet lookups
// never lock and never see a half-built trie.
func buildAllowedIPs(peers []*peer) *allowedIPs {
	a := &allowedIPs{}
	for _, p := range peers {
		for _, pfx := range p.allowed {
			a.insert(pfx, p)
		}
	}
	return a
}
