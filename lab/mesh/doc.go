// Package mesh runs the seed's mesh experiment (seeds/003, §5.2.2,
// Fig. 10) on emulated links: a topology from package route with two
// link-disjoint paths between a source and a destination becomes one
// network namespace per node on either path (and a link node with a
// linkemu.Link per hop), and single-path TCP over the shortest path is
// compared with braid over the LD, ND and ZD route pairs, with the radios
// on one channel and on two. docs/lab.md ("Mesh lab") describes the
// addresses, the per-path policy routing, how braid's paths map onto the
// mesh paths, the radio model and what it leaves out.
package mesh
