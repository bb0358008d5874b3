package tunnel

import (
	"runtime"
	"time"

	"github.com/braid-vpn/braid/aqm"
	"github.com/braid-vpn/braid/cc"
	"github.com/braid-vpn/braid/noise"
	"github.com/braid-vpn/braid/path"
	"github.com/braid-vpn/braid/recovery"
	"github.com/braid-vpn/braid/sbd"
)

// Tunables gathers every knob of the engine in one documented place. Tests override
// single fields; DefaultTunables gives what `braid up` runs with.
type Tunables struct {
	// Path holds the per-path measurement and liveness settings.
	Path path.Config

	// ReplayWindow is the replay filter size in packets. Multipath skew means a packet
	// may arrive long after later-numbered ones on a faster path; 65536 covers about
	// 750 ms at 1 Gbit/s of 1400-byte packets.
	ReplayWindow int

	// RekeyAfterTime: the client starts a new handshake when its keys are this old,
	// less up to RekeyJitter of it (a fraction, 0..1) drawn per session: a
	// thousand clients that handshook within seconds (after a server restart)
	// would otherwise rekey in the same burst, every RekeyAfterTime.
	RekeyAfterTime time.Duration
	RekeyJitter    float64
	// RejectAfterTime: keys older than this are never used again (either side).
	RejectAfterTime time.Duration
	// RekeyAfterMessages: the client rekeys when either direction's counter passes
	// this, far below the 2^64 nonce space.
	RekeyAfterMessages uint64

	// HandshakeRetry is the first retransmission interval of an unanswered
	// initiation; it doubles up to HandshakeRetryMax.
	HandshakeRetry, HandshakeRetryMax time.Duration
	// HandshakeQueue is how many initiations wait for the server's handshake
	// worker; more are dropped. The server is under load (cookies required) while
	// at least an eighth of it is used, and for HandshakeLoadHold after.
	HandshakeQueue    int
	HandshakeLoadHold time.Duration
	// HandshakeBudget is how many initiations a second the server runs through
	// Diffie-Hellman, all sources together (0 = no limit): about 25 % of one core
	// of this project's 2-core test machine at 1000. Spending it puts the server
	// under load.
	HandshakeBudget int
	// CookieReplyRate bounds the cookie replies a second (0 = no bound), those
	// sent under load and those to unproven initiations the limiter refuses:
	// each costs a send, most go to spoofed sources, and a client that gets
	// none retries its initiation.
	CookieReplyRate int
	// HandshakeMinInterval: a server accepts at most one new initiation per client
	// this often (copies of one initiation on several paths are answered from a
	// cache and do not count).
	HandshakeMinInterval time.Duration
	// SessionDeadAfter: a client that has heard nothing authenticated from the server
	// for this long (idle paths are probed, so silence means trouble) handshakes again.
	SessionDeadAfter time.Duration
	// SessionSuspectAfter: after this much silence the client rekeys early, to
	// the same server (the rekey's sender index names it). A server that is
	// alive answers and nothing is lost; behind a balancer that has taken a
	// dead server out, the rekey reaches a live one, which starts the session
	// afresh, well before SessionDeadAfter. Above the time an idle path needs
	// to be declared Down (path.Config: ProbeInterval + DownIdle, 1.8 s), so
	// one lost probe never triggers it.
	SessionSuspectAfter time.Duration

	// IdleRelease: a peer this long without data (sent or received) gives back
	// the memory only traffic needs (reorder slots, FEC, retained payloads,
	// queue, sent rings), so an idle client costs the server about 80 KiB
	// instead of about 1 MiB; traffic takes it again from pools.
	IdleRelease time.Duration

	// ChallengeRetry is how often an unanswered path challenge is repeated, and
	// ChallengeTries how many challenges a new source gets before it is forgotten
	// (a spoofed source must not become a reflector).
	ChallengeRetry time.Duration
	ChallengeTries int
	// MaxPathsPerPeer bounds the paths a server keeps for one client (NAT rebinding
	// creates new ones); the oldest dead path is evicted first.
	MaxPathsPerPeer int
	// PathForgetAfter: a server forgets a client path that has been down this long.
	PathForgetAfter time.Duration

	// Tick is the period of the timer goroutine (acks, probes, liveness, reorder).
	Tick time.Duration

	// ReorderFlows is the number of flow buckets of the reorder buffer; part of the
	// protocol in the sense that the sender's flow ids index it.
	ReorderFlows int
	// ReorderMaxHeld bounds packets held for reordering per peer.
	ReorderMaxHeld int
	// ReorderMinHold and ReorderMaxHold bound the adaptive hold time; ReorderFixedHold
	// is the hold of mode "fixed" when the config gives none.
	ReorderMinHold, ReorderMaxHold, ReorderFixedHold time.Duration
	// ReorderMargin is added to the measured delay skew between paths.
	ReorderMargin time.Duration

	// CryptoWorkers is how many goroutines seal and open datagrams beside the
	// goroutines that handle them (fanout): a TUN read's or a socket read's
	// batch is shared with them, so another core does part of the cipher work
	// of one busy path. 0: everything on the handling goroutine. Default:
	// DefaultCryptoWorkers.
	CryptoWorkers int
	// ListenReaders is how many sockets a server binds to each listen address
	// (SO_REUSEPORT), each with its reader goroutine: the kernel keeps each
	// client address and port on one of them, so the clients' datagrams are
	// read and handled on more than one core. Default: DefaultListenReaders.
	ListenReaders int
	// CryptoMinPart is the fewest datagrams worth handing to a worker: the
	// hand-off costs a goroutine wake-up, a few microseconds, about the AEAD
	// of a few full-size datagrams.
	CryptoMinPart int

	// OuterMTU is the largest UDP payload + IP/UDP headers braid builds on purpose
	// (acks are piggybacked only when they fit).
	OuterMTU int

	// CC tunes the per-path congestion controllers (congestion != "none"). A zero
	// MSS is set to the largest datagram the engine builds, a zero MaxWindow to
	// three quarters of Path.RingSize (a window the sent-packet ring cannot track
	// would turn into losses), a zero CapGain to TunnelCapGain and a zero
	// AckAllowance to Path.AckDelay.
	CC cc.Config
	// CCQueuePackets and CCQueueDelay bound the packets that wait for window room
	// when every usable path's congestion window is full: at most CCQueuePackets
	// per peer (more are dropped on arrival, counted as drop_cc_queue_full), each
	// for at most CCQueueDelay (older ones are dropped, drop_cc_queue_expired;
	// scaled up with CoDel's interval on paths of more than 100 ms). CoDel keeps
	// the standing queue short; the expiry is for what it cannot answer in time.
	// CoDel needs an interval to answer an inner slow start, whose last round
	// can overshoot by a whole round trip of queue: an expiry of 100 ms (the
	// interval) dropped that overshoot's tail at once, 100–160 packets, which
	// cost a 100 ms inner flow a third of its goodput; 250 ms leaves CoDel 2.5
	// intervals. 1024 packets of 1380 bytes cover 100 ms at 113 Mbit/s.
	CCQueuePackets int
	CCQueueDelay   time.Duration
	// CoDel manages the queue's bulk ring (target 20 ms, interval 100 ms; both
	// follow the paths' RTT above 67 ms, see peer.retuneQueue): once
	// packets have waited more than the target for a whole interval, ECN-capable
	// ones are marked CE and the others dropped, at a rising rate, so the inner
	// TCP sees its congestion signal at braid with a short queue. The target is
	// four times RFC 8289's 5 ms: with 5 ms one CUBIC flow over two 10 Mbit/s,
	// 40 ms paths got 15.3–15.6 Mbit/s, with 20 ms 16.6–16.7 (lab, latency
	// scenario); packets of flows with nothing queued skip that ring (see
	// queue.go), so a ping's delay does not depend on it. Patient: a drop
	// due while the backlog falls from its peak is put off one gap (see
	// aqm.Config.Patient and docs/congestion.md, "The tunnel's queue").
	CoDel aqm.Config
	// SBD tunes the detection of paths that share a bottleneck, which the
	// controllers then couple (bottleneck.go). Zero fields take
	// sbd.DefaultConfig's values (RFC 8382's).
	SBD sbd.Config

	// Recovery tunes loss recovery (recovery != "off"): resend budget, the
	// receiver's hold margin and cap. Zero fields take recovery.DefaultConfig's
	// values; TimeThreshold, AckDelay and Tick come from Path and Tick.
	Recovery recovery.Config
}

// TunnelCapGain is the "rate" model's in-flight cap in the tunnel, in BDPs
// (cc.Config.CapGain; raised to 1.25 while a path probes): with cc's 1.25 and
// an allowance of two timer ticks, 40 ms lab paths kept 10–25 ms of standing
// queue whenever a bandwidth estimate ran a little high; with 1 and the ack
// delay alone, 2–5 ms.
const TunnelCapGain = 1.0

// DefaultCryptoWorkers is the crypto workers for a process of procs
// GOMAXPROCS: none up to 2, one fewer than procs up to 4 workers above.
//
// On the 2-core test machine (a virtual machine) a woken worker starts
// 30–100 µs after the hand-off (median 50), about as long as a whole batch
// takes: at 2 Gbit/s it did 10–14 % of the datagrams, and the wake-ups cost
// more than that saved (lab bench, 1 GiB × 3, two rounds each: tunnel CPU per
// GB 15–45 % higher with one worker, throughput lower in every round;
// docs/results/bench). With spare cores a worker is awake sooner and takes a
// real share; that is not measured here, and `braid status` shows the share
// it takes (its "crypto" line).
func DefaultCryptoWorkers(procs int) int {
	if procs <= 2 {
		return 0
	}
	return min(procs-1, 4)
}

// DefaultListenReaders is the sockets per listen address for a process of
// procs GOMAXPROCS: one up to 2, half the cores above (at most 4). A reader
// handles whole datagrams, so this parallelism costs no hand-off; but each
// socket gets a share of the batches (smaller ones, more system calls), and
// on 2 cores the daemon shares them with the rest of the machine.
func DefaultListenReaders(procs int) int {
	if procs <= 2 {
		return 1
	}
	return min(procs/2, 4)
}

// DefaultTunables returns the defaults used by `braid up`.
func DefaultTunables() Tunables {
	return Tunables{
		Path:                 path.DefaultConfig(),
		ReplayWindow:         noise.DefaultReplayWindow,
		RekeyAfterTime:       noise.RekeyAfterTime,
		RekeyJitter:          0.1,
		RejectAfterTime:      noise.RejectAfterTime,
		RekeyAfterMessages:   noise.DefaultRekeyAfterMessages,
		HandshakeRetry:       time.Second,
		HandshakeRetryMax:    8 * time.Second,
		SessionDeadAfter:     5 * time.Second,
		SessionSuspectAfter:  2 * time.Second,
		IdleRelease:          5 * time.Second,
		HandshakeQueue:       1024,
		HandshakeLoadHold:    time.Second,
		HandshakeBudget:      1000,
		CookieReplyRate:      10000,
		HandshakeMinInterval: 20 * time.Millisecond,
		ChallengeRetry:       250 * time.Millisecond,
		ChallengeTries:       8,
		MaxPathsPerPeer:      64,
		PathForgetAfter:      60 * time.Second,
		Tick:                 5 * time.Millisecond,
		ReorderFlows:         4096,
		ReorderMaxHeld:       4096,
		ReorderMinHold:       10 * time.Millisecond,
		ReorderMaxHold:       200 * time.Millisecond,
		ReorderFixedHold:     50 * time.Millisecond,
		ReorderMargin:        3 * time.Millisecond,
		OuterMTU:             1500,
		CryptoWorkers:        DefaultCryptoWorkers(runtime.GOMAXPROCS(0)),
		CryptoMinPart:        8,
		ListenReaders:        DefaultListenReaders(runtime.GOMAXPROCS(0)),
		CCQueuePackets:       1024,
		CCQueueDelay:         250 * time.Millisecond,
		CoDel:                aqm.Config{Target: 20 * time.Millisecond, Interval: aqm.DefaultInterval, MinBytes: aqm.DefaultMinBytes, Patient: true},
	}
}
