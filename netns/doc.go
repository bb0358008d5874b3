// Package netns builds throw-away network topologies out of Linux network
// namespaces, for tests and for braid's lab.
//
// A Namespace is a named namespace ("prefix-PID-XXXXXX", listed by
// `ip netns`) with a netlink handle bound to it, so links, addresses, routes,
// rules and tbf shaping are configured from any goroutine without switching
// threads. Code that must itself run inside (opening sockets, writing
// /proc/sys) goes through Do, which locks the calling goroutine to its OS
// thread and moves only that thread (setns is per thread); sockets created
// there stay in the namespace after Do returns. Child processes start inside
// with Run/Exec (`ip netns exec`, which also remounts /sys for the namespace,
// the way people start things by hand) or with Start (fork from a thread
// inside the namespace, no iproute2 needed).
//
// Lifetime: Close kills processes still inside, drops the handles and removes
// the name; the kernel then destroys the namespace with every link in it, so
// veth pairs between two namespaces vanish with either of them. Tests should
// `t.Cleanup(ns.Close)` right after New so a failing test leaves nothing.
// The PID in the name lets Cleanup tell leftovers of dead processes from
// namespaces in use: it removes only those whose creator is gone.
//
// Cutting a path: SetDown on a link flushes its routes (and IPv6 addresses
// unless keep_addr_on_down is set), and SetUp does not restore them. To cut a
// path while keeping one side's configuration, take the far end down: the
// near end loses carrier but keeps addresses and routes.
//
// Creating namespaces needs root (CAP_SYS_ADMIN); like `ip netns add`, New
// makes /run/netns a shared mount point so that a removed name disappears
// from every mount namespace.
package netns
