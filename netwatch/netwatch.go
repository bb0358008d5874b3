// Package netwatch reports interfaces that come, go or change address, from the
// kernel's netlink notifications (RTNLGRP_LINK and the IPv4/IPv6 address groups),
// as tunnel.LinkEvents: a client follows its paths' interfaces with it.
package netwatch

import "github.com/braid-vpn/braid/tunnel"

// Event is what the watcher reports; it is the engine's event type.
type Event = tunnel.LinkEvent
