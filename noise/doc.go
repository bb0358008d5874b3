// Package noise establishes braid sessions and seals their transport messages.
//
// # Handshake
//
// The handshake is Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s (github.com/flynn/noise)
// with prologue "braid v1": the client knows the server's static key in advance
// (IK), so one round trip both authenticates the two static keys and yields fresh
// keys with forward secrecy; the optional preshared key (psk2, zero when none is
// configured) adds a symmetric secret against a future break of Curve25519.
//
// A server is reachable by anyone, so it spends as little as possible on strangers:
//
//  1. Length, type and reserved bits are checked.
//  2. mac1, a keyed BLAKE2s over the message keyed with a hash of the server's
//     public key, is verified before any Diffie-Hellman: datagrams from senders
//     that do not know the server's public key cost one hash.
//  3. Under load the caller requires mac2, made with a cookie bound to the source
//     address (CookieJar, see cookie.go), so spoofed sources get a cookie reply
//     and no Diffie-Hellman; it also keeps a global budget of Diffie-Hellmans
//     (package tunnel's handshake worker, hsqueue.go). The session index is
//     allocated only once step 6 has passed.
//  4. Token buckets (bounded tables, see limiter.go) limit how often one source
//     can make the server do Diffie-Hellman work, by what the caller knows of the
//     source (Proof): one that proved its address and port (mac2, or a validated
//     endpoint) has buckets no spoofer of that address can drain; IPv6 sources
//     also count per /64, /56 and /48.
//  5. Only then does Noise run; an unknown static key ends with ErrUnknownPeer.
//  6. The 12-byte TAI64N timestamp that starts the initiation payload must be
//     newer than the last one accepted from that peer, so a recorded initiation
//     replayed later is refused (ErrReplayedInitiation). The caller stores the
//     accepted timestamp; the Responder itself keeps no per-initiation state, so
//     a flood of initiations cannot fill its memory.
//
// The handshake headers (message type and session indices) are not part of the
// Noise transcript: like WireGuard's indices they are routing hints. Changing
// them in flight can only make the handshake fail, which an on-path attacker can
// do anyway by dropping packets.
//
// # Transport
//
// flynn/noise's CipherState numbers messages implicitly and therefore needs them
// in order, but braid sends one session over several paths and they arrive
// reordered. After the handshake this package takes the two raw keys out of the
// Noise split (one per direction, so the two sides never share a nonce space) and
// uses ChaCha20-Poly1305 directly with the counter carried in the clear header as
// the explicit nonce, as Nebula does. The header is authenticated as associated
// data. The replay window (package replay) is checked before decrypting, so old
// packets cost no AEAD work, and updated only after the tag verified, so forged
// packets cannot move it.
//
// # Key lifetime
//
// The limits (RekeyAfterTime and friends) follow WireGuard's. The package
// enforces the message limits itself (Seal refuses to reuse or exhaust counters,
// Open refuses counters past RejectAfterMessages); the time limits need a clock,
// so the session owner (package tunnel's timers) compares Keypair.Created with
// them.
package noise
