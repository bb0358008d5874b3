package noise

import (
	"math"
	"time"

	"github.com/braid-vpn/braid/replay"
)

// Key lifetime limits. The times are WireGuard's, whose reasoning carries over:
// rekeying every two minutes bounds how much traffic a compromised session key
// exposes, and the gap between RekeyAfterTime and RejectAfterTime leaves a
// handshake (with retries every RekeyTimeout) time to finish before the old key
// stops working.
const (
	// RekeyAfterMessages: the sender starts a new handshake after sending this
	// many messages with one key.
	RekeyAfterMessages = uint64(1) << 60
	// RejectAfterMessages: no message with a counter at or above this is sealed
	// or opened. It sits far below 2^64 so that counters never wrap and the
	// replay window (at most replay.MaxSize) never needs counters near the top.
	RejectAfterMessages = math.MaxUint64 - uint64(1)<<32

	// RekeyAfterTime: a key this old should be replaced by a new handshake.
	RekeyAfterTime = 120 * time.Second
	// RejectAfterTime: a key this old must no longer be used in either direction.
	RejectAfterTime = 180 * time.Second
	// RekeyTimeout: a handshake unanswered for this long is retried.
	RekeyTimeout = 5 * time.Second
	// RekeyAttemptTime: give up retrying a handshake after this long.
	RekeyAttemptTime = 90 * time.Second
	// KeepaliveTimeout: send a keepalive after this long without sending anything
	// while receiving, so the peer learns the session still works.
	KeepaliveTimeout = 10 * time.Second
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
