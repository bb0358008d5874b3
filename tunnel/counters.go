package tunnel

import "sync/atomic"

// drop reasons: every datagram or packet the engine discards is counted under one.
type dropReason int

const (
	dropMalformed dropReason = iota
	dropOversized
	dropUnknownIndex
	dropForged
	dropReplayed
	dropHandshakeInvalid
	dropHandshakeRateLimited
	dropHandshakeUnknownPeer
	dropHandshakeReplayed
	dropHandshakeStale
	dropSpoofedSource
	dropNoRoute
	dropNoSession
	dropBadInner
	dropNoPath
	dropSendError
	dropTUNWriteError
	dropUnvalidatedPath
	dropCCQueueFull
	dropCCQueueExpired
	dropCoDel
	dropHandshakeQueueFull
	dropHandshakeCookie
	dropHandshakeBudget
	dropHandshakeTooSoon
	dropChallengeUnanswered
	dropHandshakeCookieRationed
	dropWrongServer
	numDropReasons
)

var dropNames = [numDropReasons]string{
	dropMalformed:               "malformed",
	dropOversized:               "oversized",
	dropUnknownIndex:            "unknown_index",
	dropForged:                  "forged",
	dropReplayed:                "replayed",
	dropHandshakeInvalid:        "handshake_invalid",
	dropHandshakeRateLimited:    "handshake_rate_limited",
	dropHandshakeUnknownPeer:    "handshake_unknown_peer",
	dropHandshakeReplayed:       "handshake_replayed",
	dropHandshakeStale:          "handshake_stale",
	dropSpoofedSource:           "spoofed_source",
	dropNoRoute:                 "no_route",
	dropNoSession:               "no_session",
	dropBadInner:                "bad_inner_packet",
	dropNoPath:                  "no_usable_path",
	dropSendError:               "send_error",
	dropTUNWriteError:           "tun_write_error",
	dropUnvalidatedPath:         "unvalidated_path",
	dropCCQueueFull:             "cc_queue_full",
	dropCCQueueExpired:          "cc_queue_expired",
	dropCoDel:                   "codel",
	dropHandshakeQueueFull:      "handshake_queue_full",
	dropHandshakeCookie:         "handshake_cookie_sent",
	dropHandshakeBudget:         "handshake_budget",
	dropHandshakeTooSoon:        "handshake_too_soon",
	dropChallengeUnanswered:     "challenge_not_answered",
	dropHandshakeCookieRationed: "handshake_cookie_rationed",
	dropWrongServer:             "wrong_server",
}

type counters struct {
	drops [numDropReasons]atomic.Uint64
	// TUN batches: reads and the packets they gave (a super-packet the
	// device splits counts as its segments), writes and the packets handed
	// to them (the device coalesces TCP segments within one write). Packets
	// per batch show whether the device's offloads are in effect.
	tunReads, tunReadPkts   atomic.Uint64
	tunWrites, tunWritePkts atomic.Uint64
	// tunRuns, tunRunPkts: runs of one flow in TUN writes given room to
	// coalesce (tundev.Stager), and the packets in them.
	tunRuns, tunRunPkts atomic.Uint64
}

func (c *counters) drop(r dropReason) { c.drops[r].Add(1) }

// Drops returns the drop counters by name (zero ones included, so dashboards and
// tests see every reason).
func (e *Engine) Drops() map[string]uint64 {
	m := make(map[string]uint64, numDropReasons)
	for i := range e.counters.drops {
		m[dropNames[i]] = e.counters.drops[i].Load()
	}
	return m
}
