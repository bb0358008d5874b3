// Package conntest is an in-memory network of conn.Conn sockets for engine
// tests: no kernel, no root, no real time needed.
//
// Every ordered pair of addresses (from → to) is a link with its own
// LinkOptions, changeable while traffic flows: one-way Delay, random Loss from
// a seeded per-link generator, Down to cut it, Rate with a FIFO serializer and
// a Queue limit (tail drop), Duplicate. The serializer is the textbook model:
// a datagram of s bytes (UDP payload plus 28/48 bytes of IPv4/IPv6 and UDP
// header) entering at time t leaves at max(t, busy) + 8·s/Rate, where busy is
// when the previous datagram left, and arrives Delay later. The bytes still
// waiting, (busy−t)·Rate/8, are what Queue bounds.
//
// Determinism: the loss and duplication decisions of a link depend only on
// the Config.Seed, the link's addresses and the sequence of datagrams sent on
// that link. Links without Delay and Rate deliver synchronously inside
// WriteBatch. With Config.ManualClock time stands still until Advance, which
// delivers due datagrams in (arrival time, send order) order on the calling
// goroutine, so a test can step through a scenario exactly; otherwise a
// background goroutine delivers on real time.
//
// Inject forges datagrams (spoofed sources, replays) and Capture records what
// conns send (to replay it later); SetFilter drops chosen datagrams.
//
// Sockets can be pinned to named interfaces (AddInterface + ListenOptions) the
// way conn.Listen pins them with SO_BINDTODEVICE, so path-manager code written
// against conn.Options runs unchanged.
package conntest
