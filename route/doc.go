// Package route finds disjoint paths through a mesh: the greedy link-,
// node- and zone-disjoint algorithms (LD, ND, ZD) of the seed paper
// (seeds/003, §4, after Meghanathan), and the optimal algorithms greedy
// deletion is known to fall short of — the largest number of link- or
// node-disjoint paths (maximum flow, Menger's theorem) and the k disjoint
// paths of least total cost (Suurballe/Bhandari). It also draws the
// seed's random meshes (§5.2): nodes uniform in a square, a link between
// nodes within radio range, connected layouts only.
//
// The package is the routing half of a mesh experiment: a lab that builds
// one network namespace per node takes a Graph (nodes with positions,
// links), two disjoint Paths (node indices; Graph.IDs for names,
// PathLinks for the hops) and asks ContentionGroups or PathsContend
// which hops share a channel in the "single channel" case.
//
// # Choices
//
// Every choice below is one the seed leaves open; docs/routes.md argues
// them at more length.
//
//   - Graphs are undirected and simple (radio links are symmetric in the
//     disk model; a parallel link would count as an extra link-disjoint
//     path). Weights must be positive and finite.
//   - Shortest paths are minimum-hop by default (HopCount), as in the
//     seed and in Meghanathan's study; EdgeWeight uses the link weights.
//   - Ties: of all cheapest paths, the one with the lexicographically
//     smallest sequence of node indices, read from the source. The search
//     runs backwards from the destination so the walk forward can take,
//     at each node, the lowest-numbered neighbour still on a cheapest
//     path. Node indices are insertion order (the generator numbers nodes
//     in the order drawn, a graph file in the order listed).
//   - Greedy LD deletes the links of each path found; ND deletes its
//     intermediate nodes; ZD deletes its intermediate nodes and all their
//     neighbours, but never the source or the destination (deleting
//     them, or their neighbours as neighbours of the path's ends, would
//     stop the search after one path). Each repeats until the destination
//     is unreachable and returns the paths in the order found.
//   - A direct source–destination link is a one-hop path with no
//     intermediate node. Every algorithm counts it as one path and uses
//     it once: LD deletes it as any link; ND and ZD, having no node to
//     delete, delete the link itself (else they would find it forever);
//     it has an empty zone, so it does not keep ZD from a second path;
//     in the flow networks it is one arc of capacity 1.
//   - Disjointness (CheckDisjoint): link-disjoint paths share no link;
//     node-disjoint paths share no intermediate node and no link (two
//     copies of the direct link are one path); zone-disjoint paths are
//     node-disjoint and no intermediate node of one is a neighbour of an
//     intermediate node of another.
//   - Optimal algorithms: one successive-shortest-path min-cost flow
//     (Dijkstra with potentials) over unit capacities; node-disjointness
//     by splitting every node except the ends into in → out with capacity
//     1. After j augmentations the flow is a cheapest flow of value j, so
//     stopping at k gives the k paths of least total cost (Suurballe for
//     k = 2); running until no augmenting path is left gives the maximum
//     number (Menger), among them a set of least total cost. Paths are
//     read off the flow from the source, lowest-numbered neighbour first,
//     and returned cheapest first (then fewer hops, then node order).
//   - There is no optimal zone-disjoint algorithm: deciding whether two
//     zone-disjoint paths exist amounts to finding an induced cycle
//     through two given nodes, which is NP-complete in general graphs.
//
// # Memory
//
// A Solver keeps the algorithms' scratch memory; after it has grown to
// the largest graph, its methods allocate nothing, and their results live
// in that memory until the next call (ClonePaths to keep them). The
// package-level functions use a fresh Solver and return copies.
package route
