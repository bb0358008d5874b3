// Package mesh runs the seed's mesh experiment (seeds/003, §5.2.2,
// Fig. 10) on emulated links: a topology from package route with two
// disjoint paths between a source and a destination becomes one network
// namespace per node on either path, and single-path TCP over the shortest
// path is compared with braid over the LD, ND and ZD route pairs, with the
// radios on one channel and on two.
//
// # Topology
//
// Every hop X–Y of a path is X —veth— link node —veth— Y, with a
// linkemu.Link in the link node (offloads off on all four ends). Hop h
// gets the /30 HopSubnet(h) of 198.18.0.0/16: its upstream end (nearer the
// source) .1, its downstream end .2 of the block. The destination holds
// the service address 198.19.0.1 on its loopback; the braid server and
// the web server listen there (braid on every address). Paths must be
// link-disjoint — every hop belongs to one path — but may share nodes, as
// link-disjoint paths do.
//
// # Routing
//
// A path's identity is its address in the source, ClientAddr: the source's
// end of the path's first hop. On every node of path k but the
// destination, a rule "from ClientAddr lookup table 100+k" and, in that
// table, a route to the service address via the next node of path k; on
// every node of it but the source, a main-table route to ClientAddr via
// the previous node (the destination's with the service address as
// preferred source). Forward traffic is steered by its source address,
// replies by their destination, so a node that two paths cross sends each
// path's packets on along its own path. Relays forward; reverse-path
// filtering and IPv6 are off everywhere.
//
// braid's client opens the full mesh of its paths × its servers' addresses.
// The client here lists its paths as addresses (ClientAddr, so each
// daemon path's socket is bound to one and follows that mesh path's rule)
// and the server by the one service address: paths × 1 daemon paths, one
// per mesh path, and none can take a hop of another. (With one server
// address per path, the crossing daemon paths would need the mesh paths to
// meet somewhere.) Plain
// TCP over a path binds the path's address the same way (PathSession).
//
// # Radio model
//
// A hop's two directions serialize on a linkemu.Medium, a capacity shared
// by every hop of its contention group (MediaGroups): "single channel"
// groups the hops of both paths together with route.ContentionGroups
// (hops contend when they share a node or an end of one is within the
// interference range of an end of the other, transitively); "two
// channels" groups each path on its own, so the paths never contend. As
// consecutive hops share a node and both paths share the source and the
// destination, this yields one medium per path with two channels and one
// for everything with one channel: a path of n hops carries at most
// Rate/n, and on one channel the two paths split that airtime. Each hop
// adds its own one-way delay (Config). docs/lab.md ("Mesh lab") lists what
// this leaves out of a real 802.11 mesh.
package mesh
