package noise

import (
	"math"
	"time"

	"github.com/braid-vpn/braid/replay"
)

// Key lifetime limits: the one source of these defaults (tunnel.DefaultTunables and
// the config file's [security] defaults refer to them). The times are WireGuard's,
// whose reasoning carries over: rekeying every two minutes bounds how much traffic
// a compromised session key exposes, and the gap between RekeyAfterTime and
// RejectAfterTime leaves a handshake (retried every second or more) time to finish
// before the old key stops working. The package enforces the message limits itself;
// the times need a clock, so the session owner (package tunnel) applies them.
const (
	// RekeyAfterMessages: the sender starts a new handshake after sending this
	// many messages with one key.
	RekeyAfterMessages = uint64(1) << 60
	// DefaultRekeyAfterMessages is what braid rekeys after by default, a backstop
	// behind the 120 s timer: at 10 Gbit/s of 1380-byte packets a session sends
	// about 2^30 packets in 120 s, so 2^32 never fires in normal use but keeps
	// nonces far from the 64-bit counter space even if the timer were disabled by a
	// huge value. RekeyAfterMessages bounds what may be configured.
	DefaultRekeyAfterMessages = uint64(1) << 32
	// RejectAfterMessages: no message with a counter at or above this is sealed
	// or opened. It sits far below 2^64 so that counters never wrap and the
	// replay window (at most replay.MaxSize) never needs counters near the top.
	RejectAfterMessages = math.MaxUint64 - uint64(1)<<32

	// RekeyAfterTime: a key this old should be replaced by a new handshake.
	RekeyAfterTime = 120 * time.Second
	// RejectAfterTime: a key this old must no longer be used in either direction.
	RejectAfterTime = 180 * time.Second
)

// Responder defaults (see ResponderConfig).
const (
	// DefaultRatePerSecond is the initiations per second answered per source.
	DefaultRatePerSecond = 20
	// DefaultBurst is how many initiations a source may send back to back.
	DefaultBurst = 5
	// DefaultLimiterEntries bounds the rate limiter's table of sources.
	DefaultLimiterEntries = 4096
	// DefaultReplayWindow is the replay window of every Keypair.
	DefaultReplayWindow = replay.DefaultSize
)
