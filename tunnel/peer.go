package tunnel

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"sync"

	"github.com/braid-vpn/braid/budget"
	"github.com/braid-vpn/braid/cc"
	"github.com/braid-vpn/braid/conn"
	"github.com/braid-vpn/braid/fec"
	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/lanes"
	"github.com/braid-vpn/braid/noise"
	"github.com/braid-vpn/braid/path"
	"github.com/braid-vpn/braid/pmtu"
	"github.com/braid-vpn/braid/recovery"
	"github.com/braid-vpn/braid/reorder"
	"github.com/braid-vpn/braid/sbd"
	"github.com/braid-vpn/braid/sched"
	"github.com/braid-vpn/braid/wire"
)

// maxPaths bounds path ids on both sides (they index fixed arrays).
const maxPaths = 256

// peer is the other end of a session: for a client, the server; for a server, one
// client. Everything under mu is touched per packet.
type peer struct {
	e       *Engine
	name    string
	pub     keys.Key
	psk     keys.Key
	allowed []netip.Prefix
	pinned  Params // server: operator's override of the client's wishes
	isSrv   bool   // this peer is the server (we are the client)

	mu sync.Mutex

	// delivery orders the TUN writes of what the reorder buffer releases
	// (deliver.go); it has its own lock, the writes happen after mu is let go.
	delivery lanes.Order

	params Params
	sched  sched.Scheduler
	cc     *cc.Controller // nil: congestion = "none"
	sbd    *sbd.Detector  // which paths share a bottleneck (bottleneck.go); with cc
	ccq    ccQueue        // packets waiting for window room (see congestion.go)

	// loss recovery (recover.go); store is nil when recovery is off
	rec          recovery.Mode
	recCfg       recovery.Config
	store        *recovery.Store[*packetBuf]
	budget       recovery.Budget
	recHold      time.Duration // the receiver's hold as this side estimates it
	lostQ        []lostRef
	deferred     []deferredLoss
	giveups      []giveUpRef
	recycle      []*packetBuf
	giveupsSent  uint64
	recBudgetOut uint64 // resends refused by the budget
	recEarly     uint64 // losses resent without waiting for a REBUILT report

	// forward error correction (fec.go); nil unless the mode has FEC
	fecEnc     *fec.Encoder
	fecCtl     fec.Controller
	fecDec     *fec.Decoder // created with the first repair received
	fecRateAt  time.Time
	fecNext    int         // the path the next repair goes on (round robin)
	rebuilt    []giveUpRef // rebuilt here: to be reported to the peer
	rebuiltBy  [256]uint64
	rebuiltPos int // ring of packets the peer reported rebuilt: not to be resent
	fecUsed    uint64
	reorder    *reorder.Buffer[*packetBuf]
	reorderCfg reorder.Config
	weights    []float64
	cur, prev  *noise.Keypair
	next       *noise.Keypair // server: answered, waiting for the client's first packet

	// client handshake state
	hs        *noise.Initiation
	hsIndex   uint32
	hsSent    time.Time
	hsRetry   time.Duration
	hsMsg     []byte                  // the pending initiation, without mac2
	srvEpoch  uint64                  // client: the server's boot epoch from the last response
	lastInit  time.Time               // server: when the last initiation was accepted
	pending   pendingSession          // server: what confirming p.next changes
	lastTS    [wire.TimestampLen]byte // server: newest confirmed initiation timestamp
	lastHS    time.Time
	lastRx    time.Time
	lastTx    time.Time
	estab     time.Time
	everEstab bool

	paths  []*pathState // by path id; nil = free
	byKey  map[pathKey]*pathState
	links  map[string]int       // access link → sched.PathInfo.Link (1-based)
	leads  [maxPaths]*pathState // by access link: its path that carries data under "rate" (see electLeads)
	rx     [maxPaths]*rxPath    // by the peer's path id
	rxList []*rxPath            // the same, only those in use: what per-packet loops walk
	flowSq []uint32

	// scratch for the scheduler, reused per batch
	infos []sched.PathInfo
	infoP []*pathState
	picks []int
	// overdue is rescueLate's scratch list of a path's late packet numbers.
	overdue []uint32
	// raw one-way delays by infos index, while refreshInfos finds its reference
	owdRaw, owdMinRaw [maxPaths]uint32
	owdKnown          [maxPaths]bool

	// infoMTU is each scheduler entry's confirmed datagram size, infoMinMTU their
	// minimum; mss4 and mss6 the MSS inner SYNs are clamped to (0: none). See
	// mtu.go.
	infoMTU    [maxPaths]int
	infoMinMTU int
	infoTier   [maxPaths]uint8 // each entry's priority tier
	// infoSuspect: since when each entry's packets have gone unanswered
	// (path.Sender.SuspectSince; zero: it answers), for hideSuspects.
	infoSuspect [maxPaths]time.Time
	// infoLowTier is the lowest tier with a usable entry; infoTiersSpread: usable
	// entries are in more than one tier (refreshInfos, for hideTiers).
	infoLowTier     int
	infoTiersSpread bool
	// infoTierCeil is the highest tier carrying traffic now: infoLowTier, or
	// above while the tiers below are saturated (tiers.go).
	infoTierCeil int
	tiers        tierJoin
	// askedAt: server, by flow bucket, when the client last sent a packet of
	// the flow (ns since e.epoch, +1; 0: never) — see asked (tiers.go).
	askedAt []int64
	// queueMaxAge and queueJudge: the per-peer queue's expiry age and whether
	// CoDel judges now (retuneQueue, once per refreshInfos).
	queueMaxAge time.Duration
	queueJudge  bool
	mss4, mss6  uint16
	mtuWarned   bool

	// meters: a client's budget meters by local path (budget.go).
	meters                map[string]*budget.Meter
	budgetAt, budgetSaved time.Time

	txBytes, rxBytes, txPackets, rxPackets uint64

	// lastData is when the peer last sent or received a DATA frame;
	// released: what releaseIdle gives back is given back (until lastData
	// moves).
	lastData time.Time
	released bool

	logs clientLog // server: the bucket of logClient
}

// rxPath is our receive state for one of the peer's paths.
type rxPath struct {
	id      uint16 // the peer's path id
	r       *path.Receiver
	arrival *pathState // where its datagrams arrive: acks go back there
}

// pathKey identifies a path by the socket it uses and the remote endpoint (plus, on
// wildcard server sockets, the local address the client targeted).
type pathKey struct {
	conn   int
	remote netip.AddrPort
	local  netip.Addr
}

// pathState is one path we transmit on.
type pathState struct {
	id        uint16
	cs        *connState
	ep        conn.Endpoint
	key       pathKey
	sender    *path.Sender
	validated bool
	chal      [wire.ChallengeLen]byte
	chalSent  time.Time
	chalTries int
	// unvRx and unvTx count the bytes received from and sent to the path while it
	// is unvalidated, and after a move until the new endpoint acks (amp): a
	// server sends such an address at most three times what came from it (RFC
	// 9000 §8), so a spoofed source is no amplifier.
	unvRx, unvTx int
	// Migration (paths.go). ready: an unvalidated path that answered its
	// challenge but waits for the old endpoint of the same client path to
	// answer its own (back) first; lostAt: when it lost to that endpoint (it
	// gets no more challenges and is forgotten after migrationHold).
	ready  bool
	lostAt time.Time
	// back is the challenge of the endpoint this path served before a new
	// source of its client path appeared: if it answers, the path stays there
	// (or comes back).
	back backProbe
	// amp: the path moved to an endpoint that has not acked anything yet; no
	// data goes there, and the rest stays within 3× of unvRx, until an ack
	// covers ampSeq (the first datagram sent there). ccFrom: losses of
	// datagrams sent before it (to the old endpoint) do not reach the fresh
	// congestion state.
	amp    bool
	ampSeq uint32
	ccFrom time.Time
	// cookie is the server's cookie for this path's source (client), received
	// at cookieAt in a COOKIE frame or a cookie reply; zero before the first.
	// cookieResent is the session index of the initiation a cookie reply last
	// made us resend on this path: one resend per initiation and path, so
	// forged replies (an on-path attacker who saw mac1) cannot make us send
	// without bound.
	cookie       noise.Cookie
	cookieAt     time.Time
	cookieResent uint32
	// cookieTo, cookieEpoch and cookieSent say what the last COOKIE frame on
	// this path was made for (server): the endpoint, the cookie secret's epoch,
	// and when it went (sendCookie).
	cookieTo    netip.AddrPort
	cookieEpoch uint64
	cookieSent  time.Time
	// mtu finds the largest datagram the path carries (mtu.go); probeSize is
	// the size of its latest probe (0: decided), sent as packet probeSeq.
	mtu       *pmtu.Search
	probeSeq  uint32
	probeSize int
	// largeLost counts datagrams above the search's base lost in a row since one
	// was acked; smallAcked: a smaller one was acked meanwhile (mtu.go).
	largeLost  int
	smallAcked bool
	peerID     int   // the peer's id for this path's reverse direction; -1 unknown
	weightIdx  int   // client: position in the config's path order (local, server, subflow)
	tier       uint8 // client: the path's tier now (a server uses tierOf)
	baseTier   uint8 // client: the local path's configured tier
	// meter counts the path's bytes against its local path's allowance (nil:
	// unmetered); meteredTx and meteredRx are the counts already added.
	meter                *budget.Meter
	meteredTx, meteredRx uint64
	link                 int // paths over the same access link share a number (see linkOf)
	created              time.Time
	downSince            time.Time
	rxBytes              uint64
	rxPackets            uint64
	cc                   *cc.Path // nil without a congestion controller
	sbdID                int      // the path's flow in peer.sbd; -1 = none
	ccDown               bool     // cc has seen the path go Down (and not come back)
	obs                  pathObs  // the Sender's observer when recovery is on

	retx, retxBytes    uint64 // resends this path carried
	repairs            uint64 // repair packets this path carried
	repairBytes        uint64 // and their frames' bytes
	retxLatencyBytes   uint64 // the part of retxBytes for latency-sensitive (not TCP) flows
	repairLatencyBytes uint64 // the part of repairBytes for them
	recovered          uint64 // losses of this path repaired by a resend that was acked
	rebuilt            uint64 // losses of this path the receiver rebuilt from repairs
	gaveUp             uint64 // losses of this path given up (passed to the inner traffic)
	rescued            uint64 // payloads resent elsewhere while still in flight here (rescueLate)
	rescueNext         uint32 // the first packet number rescueLate has not looked at
}

func (e *Engine) newPeer(name string, pub, psk keys.Key, allowed []netip.Prefix, params Params, isSrv bool) (*peer, error) {
	if pub.IsZero() {
		return nil, fmt.Errorf("tunnel: peer %q has no public key", name)
	}
	if err := pub.CheckPublic(); err != nil {
		return nil, fmt.Errorf("tunnel: peer %q: public key %s: %w", name, pub, err)
	}
	p := &peer{
		e:       e,
		name:    name,
		pub:     pub,
		psk:     psk,
		allowed: allowed,
		isSrv:   isSrv,
		byKey:   make(map[pathKey]*pathState),
		links:   make(map[string]int),
		flowSq:  make([]uint32, e.tn.ReorderFlows),
		// Room for a few paths; more grow it once (a full maxPaths each was
		// 27 KiB per client).
		infos: make([]sched.PathInfo, 0, 4),
		infoP: make([]*pathState, 0, 4),
		picks: make([]int, 0, 4),
	}
	if !isSrv {
		p.pinned = params
		params = Params{}
	}
	if err := p.applyParams(params); err != nil {
		return nil, err
	}
	return p, nil
}

// applyParams sets scheduler, weights and reorder mode. On a server the operator's
// pinned settings win over the client's wishes; empty fields fall back to defaults.
func (p *peer) applyParams(want Params) error {
	if p.pinned.Scheduler != "" {
		want = p.pinned
	}
	if want.Scheduler == "" {
		want.Scheduler = "earliest-arrival"
	}
	if want.Reorder == "" {
		want.Reorder = "adaptive"
	}
	rmode, err := recovery.ParseMode(want.Recovery)
	if err != nil {
		return err
	}
	want.Recovery = rmode.String()
	if want.Congestion == "" || want.Congestion == CongestionAuto {
		// A tunnel that hides its paths' losses must limit what it sends by a
		// loss-tolerant model of each path; without recovery the inner TCP's own
		// congestion control is enough.
		want.Congestion = cc.None
		if rmode != recovery.Off {
			want.Congestion = cc.Rate
		}
	}
	if _, err := cc.New(want.Congestion, cc.Config{}); err != nil {
		return err
	}
	// The scheduler keeps state (virtual queues, round-robin position): a rekey
	// that re-applies the same parameters keeps it.
	s := p.sched
	if s == nil || want.Scheduler != p.params.Scheduler {
		var err error
		if s, err = sched.New(want.Scheduler, sched.Options{}); err != nil {
			return err
		}
	}
	mode, err := reorder.ParseMode(want.Reorder)
	if err != nil {
		return err
	}
	tn := p.e.tn
	hold := min(want.ReorderHold, reorder.MaxHold)
	if hold <= 0 {
		hold = tn.ReorderMaxHold
		if mode == reorder.Fixed {
			hold = tn.ReorderFixedHold
		}
	}
	rcfg := reorder.Config{Mode: mode, Hold: hold, MinHold: min(tn.ReorderMinHold, hold), MaxHeld: tn.ReorderMaxHeld, Flows: tn.ReorderFlows, StartAtZero: true}
	if rmode != recovery.Off {
		rcfg.MaxRecoveryHold = p.e.recoveryConfig().MaxHold
	}
	// Keep the reorder buffer (and its flow positions) unless its settings change:
	// a rekey re-applies the same parameters and must not disturb the flows.
	if p.reorder == nil || rcfg != p.reorderCfg {
		if p.reorder != nil {
			// Packets held by the old buffer go out now rather than being lost; the
			// new one starts every flow at 0, so this is followed by a fresh start
			// of the flow numbering (see resetFlows) only in a new session.
			var out []*packetBuf
			out = p.reorder.Flush(out)
			p.writeLocked(out)
		}
		p.reorder = reorder.New[*packetBuf](rcfg)
		p.reorderCfg = rcfg
	}
	p.sched = s
	p.params = want
	p.setRecovery(rmode)
	p.setFEC(rmode)
	p.resolveWeights()
	return p.setCongestion(want.Congestion, time.Now())
}

// resolveWeights turns the configured weights into weights by path id. A client's
// are written in its config's path order (local path, server, subflow); a server's
// arrive from the client already by the client's path ids.
func (p *peer) resolveWeights() {
	if !p.isSrv {
		p.weights = p.params.Weights
		return
	}
	p.weights = p.weights[:0]
	for _, ps := range p.paths {
		if ps == nil {
			continue
		}
		for len(p.weights) <= int(ps.id) {
			p.weights = append(p.weights, 0)
		}
		if ps.weightIdx < len(p.params.Weights) {
			p.weights[ps.id] = p.params.Weights[ps.weightIdx]
		}
	}
}

// resetFlows starts the session's flow numbering afresh on both sides: our sending
// flows from 0, our reorder buffer expecting 0. Caller holds p.mu.
func (p *peer) resetFlows() {
	clear(p.flowSq)
	p.dropRetained()
	p.fecReset()
	if p.reorder != nil {
		var out []*packetBuf
		out = p.reorder.Reset(out)
		p.writeLocked(out)
	}
}

// rxFor returns the receive state of the peer's path id, creating it on first use.
func (p *peer) rxFor(id uint16) *rxPath {
	if int(id) >= maxPaths {
		return nil
	}
	r := p.rx[id]
	if r == nil {
		r = &rxPath{id: id, r: path.NewReceiver(p.e.tn.Path)}
		p.rx[id] = r
		p.rxList = append(p.rxList, r)
	}
	return r
}

// weightOf returns a path's weight from the weights by client path id: a server
// uses the client's id for the path (learnt from its datagrams).
// tierOf returns a path's priority tier: a client's own, or on a server the one
// the client gave its path id in the handshake.
func (p *peer) tierOf(ps *pathState) uint8 {
	if p.isSrv {
		return ps.tier
	}
	if ps.peerID < 0 || ps.peerID >= len(p.params.Tiers) {
		return 0
	}
	return p.params.Tiers[ps.peerID]
}

func (p *peer) weightOf(ps *pathState) float64 {
	id := int(ps.id)
	if !p.isSrv {
		id = ps.peerID
	}
	if id < 0 || id >= len(p.weights) {
		return 0
	}
	return p.weights[id]
}

// refreshInfos fills the scheduler's view of the usable paths. One-way delays are
// made relative to the smallest base delay among paths, since only differences
// between paths of a session are meaningful; the raw values are kept from the one
// Stats snapshot per path until that reference is known.
func (p *peer) refreshInfos(now time.Time) {
	p.infos = p.infos[:0]
	p.infoP = p.infoP[:0]
	p.electLeads(now)
	var ref uint32
	haveRef := false
	for _, ps := range p.paths {
		if ps == nil || !ps.validated {
			continue
		}
		st := ps.sender.Stats()
		k := len(p.infos)
		p.owdRaw[k], p.owdMinRaw[k], p.owdKnown[k] = st.OWDRaw, st.OWDMinRaw, !st.LastAck.IsZero()
		if p.owdKnown[k] && (!haveRef || int32(st.OWDMinRaw-ref) < 0) {
			ref, haveRef = st.OWDMinRaw, true
		}
		room := -1
		if ps.cc != nil {
			room = p.roomOf(ps, st.InFlight, now)
		}
		p.infos = append(p.infos, sched.PathInfo{
			ID:       int(ps.id),
			Usable:   ps.sender.Usable() && !ps.amp, // no data to an endpoint that has not acked
			Degraded: st.State == path.Degraded,
			SRTT:     st.SRTT,
			MinRTT:   st.MinRTT,
			OWD:      st.SRTT / 2, // until an ack gives the one-way delay
			BaseOWD:  st.MinRTT / 2,
			Rate:     st.DeliveryRate,
			InFlight: st.InFlight,
			CwndRoom: room,
			Weight:   p.weightOf(ps),
			Link:     ps.link,
		})
		p.infoP = append(p.infoP, ps)
		p.infoMTU[len(p.infoP)-1] = ps.datagramLimit()
		p.infoTier[len(p.infoP)-1] = p.tierOf(ps)
		p.infoSuspect[len(p.infoP)-1], _ = ps.sender.SuspectSince(now)
	}
	p.hideSuspects()
	p.infoMinMTU = int(^uint(0) >> 1)
	p.infoLowTier, p.infoTiersSpread = -1, false
	var maxSRTT time.Duration
	startup, contending := false, false
	for k := range p.infos {
		if !p.infos[k].Usable {
			continue
		}
		p.infoMinMTU = min(p.infoMinMTU, p.infoMTU[k])
		c := p.infoP[k].cc.Contending()
		contending = contending || c
		maxSRTT = max(maxSRTT, flowRTT(p.infos[k].SRTT, p.infos[k].MinRTT, c))
		startup = startup || p.infos[k].CwndRoom == 0 && p.infoP[k].cc.StartingUp() && !p.standby(p.infoP[k])
		t := int(p.infoTier[k])
		if p.infoLowTier >= 0 && t != p.infoLowTier {
			p.infoTiersSpread = true
		}
		if p.infoLowTier < 0 || t < p.infoLowTier {
			p.infoLowTier = t
		}
	}
	p.joinTiers(now)
	for k := range p.infos {
		p.infoP[k].sender.SetStandby(p.infoTiersSpread && int(p.infoTier[k]) > p.infoTierCeil)
	}
	p.retuneQueue(maxSRTT, startup, contending)
	if haveRef {
		for k := range p.infos {
			if p.owdKnown[k] {
				p.infos[k].OWD = time.Duration(int32(p.owdRaw[k]-ref)) * time.Microsecond
				p.infos[k].BaseOWD = time.Duration(int32(p.owdMinRaw[k]-ref)) * time.Microsecond
			}
		}
	}
	if p.store != nil {
		p.recHold = p.recCfg.Hold(p.infos)
		if p.rec.Has(recovery.FEC) && p.recHold > 0 {
			// A resend may first wait for the receiver's REBUILT report.
			p.recHold = min(p.recHold+p.fecWaitMax(), p.recCfg.MaxHold)
		}
	}
}

// hideSuspects takes out of the schedule the usable entries whose path went
// suspect (path.Sender.SuspectSince), with the entries that share its access link
// and have not been answered since, as long as an entry of the same tier or a
// lower one still answers. A path that stopped delivering is Down only 200–350ms
// later; until then every packet scheduled there is lost, and when those are the
// inner TCP's acks or its retransmissions the inner flow waits for its own
// retransmission timeout. When every path is suspect, none is hidden: one of them
// may just be slow. Probes (OnTimer) and the rescue of late packets
// (rescueLate) go on regardless, and the first ack of a later packet clears the
// suspicion. The redundant scheduler keeps them: it sends every packet on every
// path, so hiding one saves nothing from loss and takes away the copy that
// arrives should the suspicion be wrong.
func (p *peer) hideSuspects() {
	if p.sched != nil && p.sched.Name() == sched.Redundant {
		return
	}
	n := len(p.infos)
	var hide [maxPaths]bool
	any := false
	for k := 0; k < n; k++ {
		since := p.infoSuspect[k]
		if since.IsZero() || !p.infos[k].Usable {
			continue
		}
		hide[k], any = true, true
		if p.infos[k].Link == 0 {
			continue
		}
		for j := 0; j < n; j++ {
			// A sibling that got an ack for a packet sent after the trouble began
			// shows the link works.
			if j != k && p.infos[j].Link == p.infos[k].Link && p.infoP[j].sender.LastAck().Before(since.Add(p.infos[j].SRTT)) {
				hide[j] = true
			}
		}
	}
	if !any {
		return
	}
	for k := 0; k < n; k++ {
		if !hide[k] || !p.infos[k].Usable {
			continue
		}
		for j := 0; j < n; j++ {
			if p.infos[j].Usable && !hide[j] && p.infoTier[j] <= p.infoTier[k] {
				p.infos[k].Usable = false
				break
			}
		}
	}
}

// Lines about a client's paths and parameters (server side) are things an
// authenticated client can make happen as often as it likes: paths validated,
// moved or gone, unusable parameters. Each client gets a token bucket of its own
// for them: logBurst lines at once, then one per logEvery. A line that gets
// through after some were left out says how many ("suppressed").
const (
	logBurst = 20
	logEvery = 10 * time.Second
)

// clientLog is a peer's bucket for logClient.
type clientLog struct {
	tokens     float64
	at         time.Time // last refill
	suppressed int
}

// logClient logs a line about a client's paths or parameters, within the
// client's log bucket on a server (a client logs what its server does freely).
// Caller holds p.mu or owns p.
func (p *peer) logClient(now time.Time, level slog.Level, msg string, args ...any) {
	args = append([]any{"peer", p.name}, args...)
	if !p.isSrv {
		b := &p.logs
		if b.at.IsZero() {
			b.tokens = logBurst
		} else if d := now.Sub(b.at); d > 0 {
			b.tokens = min(b.tokens+float64(d)/float64(logEvery), logBurst)
		}
		b.at = now
		if b.tokens < 1 {
			b.suppressed++
			return
		}
		b.tokens--
		if b.suppressed > 0 {
			args = append(args, "suppressed", b.suppressed)
			b.suppressed = 0
		}
	}
	p.e.log.Log(context.Background(), level, msg, args...)
}

// releaseIdle gives back, once the peer has been IdleRelease without data, the
// memory only a busy peer needs: the reorder buffer's flow tables and slots,
// the FEC encoder's symbols and the decoder, the rings of retained payloads,
// the per-peer queue, and the paths' sent rings beyond their smallest size;
// after askedFor, the flows' asked times too. Each is taken again (from the
// pools the released ones go to) when traffic needs it; the per-packet path
// pays one store (lastData) per DATA frame sent or received. The timer calls
// it; caller holds p.mu.
func (p *peer) releaseIdle(now time.Time) {
	idle := now.Sub(p.lastData)
	if idle >= askedFor {
		// Every flow's "asked" has expired with the last data received: the
		// times (32 KiB) go, markAsked makes them anew.
		p.askedAt = nil
	}
	if p.released || idle < p.e.tn.IdleRelease {
		return
	}
	done := p.reorder == nil || p.reorder.Release()
	if p.fecEnc != nil {
		done = p.fecEnc.Release() && done
	}
	if p.fecDec != nil {
		p.fecDec.Reset()
		putDecoder(p.fecDec, p.e.pool.size)
		p.fecDec = nil
	}
	if p.store != nil {
		done = p.store.Release() && done
	}
	p.ccq.release()
	done = done && p.ccq.mem == nil
	for _, ps := range p.paths {
		if ps != nil {
			done = ps.sender.Shrink() && done
		}
	}
	// Paths still with packets in flight shrink at a later tick; anything
	// sent or received meanwhile makes the peer busy again.
	p.released = done
}
