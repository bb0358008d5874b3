package tunnel

import (
	"errors"
	"net/netip"
	"sync"
	"time"

	"github.com/braid-vpn/braid/conn"
	"github.com/braid-vpn/braid/noise"
	"github.com/braid-vpn/braid/wire"
)

// A server answers initiations on a worker of its own, never on the readers that
// carry data: a Diffie-Hellman costs about as much as a hundred data packets, and a
// flood of initiations must not stall the sessions that already run (wireguard-go
// has the same split).
//
//   - The readers check length and mac1 (one hash) and put the initiation on a
//     bounded queue; when it is full the initiation is dropped and counted.
//   - The worker sorts each initiation by what its source has proved
//     (noise.Proof): nothing (it may be spoofed), a valid mac2, or the endpoint
//     of a validated path.
//   - The server is under load while the queue holds at least an eighth of its
//     capacity or the global budget of Diffie-Hellmans is spent, and for
//     HandshakeLoadHold after. Under load an initiation without a valid mac2 gets
//     a cookie reply and nothing else, so spoofed sources cost no Diffie-Hellman.
//     Clients always have a valid mac2: the server gives each of their paths a
//     cookie inside the session (sendCookie).
//   - A copy of an initiation already answered (the client sends each on every
//     path) is answered from a cache, to its own source: a path whose downlink is
//     dead cannot make the handshake fail while another path works.
//   - Then the global budget, with a part reserved for proven and known sources,
//     and the limiter (noise.Responder), whose buckets for each kind of source
//     are kept apart, bound the Diffie-Hellmans a second. An initiation the
//     limiter refuses gives its budget token back, so one source cannot spend the
//     budget of all; an unproven one gets a cookie reply, so the host that owns
//     its address comes back proven however much a spoofer sends in its name.

// hsJob is one initiation waiting for the worker; it is copied by value so the
// queue needs no buffers of its own.
type hsJob struct {
	cs  *connState
	ep  conn.Endpoint
	n   int
	msg [wire.MaxInitLen]byte
}

// hsWorker is the worker's state; only the worker goroutine touches it.
type hsWorker struct {
	loadUntil time.Time
	tokens    float64 // global Diffie-Hellman budget
	last      time.Time
	cache     map[[wire.MACLen]byte]cachedResponse
	// cookieTokens ration cookie replies (Tunables.CookieReplyRate).
	cookieTokens float64
	cookieLast   time.Time

	// Cookie replies and cached responses of one batch of jobs, sent together
	// (one sendmmsg per socket): under a flood the replies are most of the work.
	out     []hsOut
	replies [hsBatch][wire.CookieReplyLen]byte
	bufs    [][]byte
	eps     []conn.Endpoint
}

// hsOut is one handshake message to send at the end of a batch.
type hsOut struct {
	cs  *connState
	ep  conn.Endpoint
	msg []byte
}

// hsBatch is how many queued initiations the worker takes at once.
const hsBatch = 64

// send queues msg for the end of the batch.
func (hw *hsWorker) send(cs *connState, msg []byte, ep conn.Endpoint) {
	hw.out = append(hw.out, hsOut{cs: cs, ep: ep, msg: msg})
}

// flush sends the batch, one WriteBatch per socket.
func (hw *hsWorker) flush(e *Engine) {
	for len(hw.out) > 0 {
		cs := hw.out[0].cs
		hw.bufs, hw.eps = hw.bufs[:0], hw.eps[:0]
		rest := hw.out[:0]
		for _, o := range hw.out {
			if o.cs == cs {
				hw.bufs = append(hw.bufs, o.msg)
				hw.eps = append(hw.eps, o.ep)
			} else {
				rest = append(rest, o)
			}
		}
		if err := cs.c.WriteBatch(hw.bufs, hw.eps); err != nil {
			e.counters.drop(dropSendError)
		}
		hw.out = rest
	}
	clear(hw.bufs)
}

// cachedResponse is the response to an initiation, kept for its copies.
type cachedResponse struct {
	resp []byte
	at   time.Time
}

// enqueueInitiation is the reader's part: cheap checks, then the queue.
func (e *Engine) enqueueInitiation(cs *connState, d []byte, ep conn.Endpoint) {
	// A full queue drops at once, without even the hash: under a flood the reader
	// must get back to the socket, where the data is.
	if len(e.hsq) == cap(e.hsq) {
		e.counters.drop(dropHandshakeQueueFull)
		return
	}
	if err := e.responder.CheckInitiation(d); err != nil {
		e.counters.drop(dropHandshakeInvalid)
		return
	}
	var j hsJob
	j.cs, j.ep, j.n = cs, ep, copy(j.msg[:], d)
	select {
	case e.hsq <- j:
	default:
		e.counters.drop(dropHandshakeQueueFull)
	}
}

// routineHandshakes is the server's handshake worker.
func (e *Engine) routineHandshakes() {
	defer e.wg.Done()
	hw := &hsWorker{
		tokens: float64(e.tn.HandshakeBudget),
		cache:  make(map[[wire.MACLen]byte]cachedResponse),
	}
	for {
		select {
		case <-e.closing:
			return
		case j := <-e.hsq:
			now := time.Now()
			e.handleQueued(hw, &j, now)
		batch:
			for n := 1; n < hsBatch; n++ {
				select {
				case j = <-e.hsq:
					e.handleQueued(hw, &j, now)
				default:
					break batch
				}
			}
			hw.flush(e)
		}
	}
}

// handleQueued runs one initiation through the load checks and the cache before
// any Diffie-Hellman.
func (e *Engine) handleQueued(hw *hsWorker, j *hsJob, now time.Time) {
	msg := j.msg[:j.n]
	tn := &e.tn
	if len(e.hsq) >= cap(e.hsq)/8 {
		hw.loadUntil = now.Add(tn.HandshakeLoadHold)
	}
	// What the source has proved: a valid mac2 (one hash; an initiation
	// without a cookie costs none) or the endpoint of a validated path. The
	// limiter keeps the buckets of each kind apart, so a spoofer cannot spend
	// the allowance of the address it claims.
	mac2 := e.cookies.CheckMAC2(msg, j.ep.Remote, now)
	proof := noise.Unproven
	switch {
	case e.knownEndpoint(j.ep.Remote):
		proof = noise.Known
	case mac2:
		proof = noise.Proven
	}
	// Under load every initiation needs a valid mac2, a validated endpoint's
	// too: only mac2 shows that this datagram, not just an earlier one, came
	// from the host at that endpoint. Clients carry one anyway (the server
	// gives them cookies inside their sessions, sendCookie), so their rekeys
	// never wait on the rationed replies.
	if now.Before(hw.loadUntil) && !mac2 {
		e.cookieReply(hw, j, msg, now)
		return
	}
	mac1, _ := noise.InitiationMAC1(msg)
	if c, ok := hw.cache[mac1]; ok {
		if now.Sub(c.at) < tn.HandshakeRetry {
			hw.send(j.cs, c.resp, j.ep)
			return
		}
		delete(hw.cache, mac1)
	}
	// The global budget refills continuously; spending it puts the server under
	// load, so the next initiations must come back with a cookie. Part of it is
	// reserved: unproven sources may not take the last half of the tokens and
	// proven ones not the last quarter, so established clients (known) always
	// find some, and sources that proved themselves find some while a spoofed
	// flood lasts.
	if rate := float64(tn.HandshakeBudget); rate > 0 {
		if !hw.last.IsZero() {
			hw.tokens = min(rate, hw.tokens+now.Sub(hw.last).Seconds()*rate)
		}
		hw.last = now
		if hw.tokens < 1+budgetReserve(proof)*rate {
			hw.loadUntil = now.Add(tn.HandshakeLoadHold)
			e.counters.drop(dropHandshakeBudget)
			if proof == noise.Unproven {
				e.cookieReply(hw, j, msg, now) // come back with the cookie
			}
			return
		}
		hw.tokens--
	}
	p, resp, err := e.handleInitiation(j.cs, msg, j.ep, proof, now)
	if errors.Is(err, noise.ErrRateLimited) {
		hw.tokens++ // refused before any Diffie-Hellman: one source cannot spend the budget
		if proof == noise.Unproven {
			// The buckets of an unproven source may have been drained by a
			// spoofer using its address: the host that really receives there
			// learns its cookie and comes back proven, with buckets of its
			// own. A spoofer never sees the cookie.
			e.cookieReply(hw, j, msg, now)
		}
	}
	if p == nil {
		return
	}
	// The cache holds at most the budget's worth of a retry interval.
	if len(hw.cache) >= cacheSweepAt {
		for k, c := range hw.cache {
			if now.Sub(c.at) >= tn.HandshakeRetry {
				delete(hw.cache, k)
			}
		}
	}
	hw.cache[mac1] = cachedResponse{resp: resp, at: now}
}

// budgetReserve is the part of the global budget an initiation with proof may
// not take (see handleQueued).
func budgetReserve(proof noise.Proof) float64 {
	switch proof {
	case noise.Unproven:
		return 0.5
	case noise.Proven:
		return 0.25
	}
	return 0
}

// cookieReply answers an initiation with a cookie reply, within the ration of
// Tunables.CookieReplyRate: under a flood most go to spoofed sources, and each
// costs a send; a client that gets none retries.
func (e *Engine) cookieReply(hw *hsWorker, j *hsJob, msg []byte, now time.Time) {
	if r := float64(e.tn.CookieReplyRate); r > 0 {
		// A tenth of a second's worth may go at once.
		if hw.cookieLast.IsZero() {
			hw.cookieTokens = r / 10
		} else {
			hw.cookieTokens = min(r/10, hw.cookieTokens+now.Sub(hw.cookieLast).Seconds()*r)
		}
		hw.cookieLast = now
		if hw.cookieTokens < 1 {
			e.counters.drop(dropHandshakeCookieRationed)
			return
		}
		hw.cookieTokens--
	}
	reply, err := e.cookies.AppendReply(hw.replies[len(hw.out)%hsBatch][:0], msg, j.ep.Remote, now)
	if err == nil {
		hw.send(j.cs, reply, j.ep)
		e.counters.drop(dropHandshakeCookie)
	}
}

// cacheSweepAt is the size of the response cache above which expired entries are
// swept before adding one.
const cacheSweepAt = 64

// knownEndpoint reports whether addr is the remote end of a validated path of some
// client (server).
func (e *Engine) knownEndpoint(addr netip.AddrPort) bool {
	return e.validated.has(addr)
}

// endpointSet is the set of remote endpoints of validated paths, counted: two
// paths may share a remote endpoint (one client socket that sends to two server
// addresses, or two clients behind one address and port), and the endpoint stays
// known until the last of them leaves. Every add is matched by one remove (a
// path's validated endpoint, when it leaves or moves).
type endpointSet struct {
	mu sync.RWMutex
	n  map[netip.AddrPort]int
}

func (s *endpointSet) add(a netip.AddrPort) {
	s.mu.Lock()
	if s.n == nil {
		s.n = make(map[netip.AddrPort]int)
	}
	s.n[a]++
	s.mu.Unlock()
}

func (s *endpointSet) remove(a netip.AddrPort) {
	s.mu.Lock()
	if s.n[a] <= 1 {
		delete(s.n, a)
	} else {
		s.n[a]--
	}
	s.mu.Unlock()
}

func (s *endpointSet) has(a netip.AddrPort) bool {
	s.mu.RLock()
	_, ok := s.n[a]
	s.mu.RUnlock()
	return ok
}

// sendHandshake sends one handshake message (a response or a cookie reply).
func (e *Engine) sendHandshake(cs *connState, msg []byte, ep conn.Endpoint) {
	if err := cs.c.WriteBatch([][]byte{msg}, []conn.Endpoint{ep}); err != nil {
		e.counters.drop(dropSendError)
	}
}
