// Package tundev is braid's seam to the TUN device: the Device interface the
// engine reads and writes inner IP packets through, and Create, which makes a
// configured Linux TUN interface.
//
// Device is the subset of golang.zx2c4.com/wireguard/tun.Device the engine
// needs, so wireguard-go's implementation (virtio headers, TSO/USO offloads,
// GRO on write and batched reads) is used as is, and tests substitute the
// in-memory double in tundev/tuntest.
//
// Buffers passed to Read and Write keep Offset bytes of headroom in front of
// every packet: the device needs 10 for its virtio-net header, and the engine
// uses the rest to put its own headers in front of a packet read from the
// TUN without copying it.
//
// Create configures the interface with netlink in the network namespace of
// the calling thread (call it inside netns.Namespace.Do to build it
// elsewhere); the Device keeps a netlink handle in that namespace, so Close
// works from any goroutine. A TUN device that is not persistent disappears
// when its file descriptor is closed, so Close removes the interface with
// its addresses and routes; Close deletes the routes it added explicitly
// first and checks that the link is really gone.
package tundev
