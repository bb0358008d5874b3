package runner

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/braid-vpn/braid/netns"
)

// UDPPort is the lab's UDP service on the web server's address: it echoes
// the latency probes and sends the real-time flows, both through the
// transport under test like the downloads.
const UDPPort = 8082

// Message types of the UDP service (the first byte of every datagram).
const (
	udpEcho     = 'E' // probe: echoed back verbatim
	udpStart    = 'R' // client → service: start a real-time flow to me
	udpRealtime = 'D' // service → client: one real-time packet
)

// Layouts (big endian):
//
//	probe    'E' seq:u32 sent:i64                        (ProbeSize bytes, zero padded)
//	start    'R' flow:u64 interval:i64 count:u32 size:u32
//	realtime 'D' flow:u64 seq:u32 sent:i64               (size bytes, zero padded)
const (
	// ProbeSize is a latency probe's UDP payload: small, like a ping.
	ProbeSize        = 32
	probeHeader      = 1 + 4 + 8
	startLen         = 1 + 8 + 8 + 4 + 4
	realtimeHeader   = 1 + 8 + 4 + 8
	udpServiceBuffer = 2048
)

// clockBase anchors the send times carried in the packets. The service and
// the client are goroutines of this one process (each socket opened in its
// own namespace), so one monotonic clock times both ends of a one-way delay.
var clockBase = time.Now()

// clock is the time since clockBase.
func clock() time.Duration { return time.Since(clockBase) }

// UDPService answers probes and sends real-time flows from the web
// namespace until Close.
type UDPService struct {
	conn   *net.UDPConn
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	flows map[uint64]bool // flows started (a repeated start request is ignored)
}

// StartUDP opens the service's socket on addr:UDPPort inside ns.
func StartUDP(ns *netns.Namespace, addr netip.Addr) (*UDPService, error) {
	var conn *net.UDPConn
	err := ns.Do(func() (err error) {
		conn, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, UDPPort)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("UDP service: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &UDPService{conn: conn, ctx: ctx, cancel: cancel, flows: map[uint64]bool{}}
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

func (s *UDPService) serve() {
	defer s.wg.Done()
	buf := make([]byte, udpServiceBuffer)
	for {
		n, from, err := s.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		switch {
		case n >= probeHeader && buf[0] == udpEcho:
			s.conn.WriteToUDPAddrPort(buf[:n], from)
		case n == startLen && buf[0] == udpStart:
			flow := binary.BigEndian.Uint64(buf[1:])
			interval := time.Duration(binary.BigEndian.Uint64(buf[9:]))
			count := int(binary.BigEndian.Uint32(buf[17:]))
			size := int(binary.BigEndian.Uint32(buf[21:]))
			if interval <= 0 || size < realtimeHeader || size > udpServiceBuffer {
				continue
			}
			s.mu.Lock()
			dup := s.flows[flow]
			s.flows[flow] = true
			s.mu.Unlock()
			if !dup {
				s.wg.Add(1)
				go s.sendFlow(from, flow, interval, count, size)
			}
		}
	}
}

// sendFlow paces count packets of size bytes, one every interval from now.
// Each is due at start + i·interval; a packet that is late (the sender was
// descheduled) goes at once, so the rate holds on average.
func (s *UDPService) sendFlow(to netip.AddrPort, flow uint64, interval time.Duration, count, size int) {
	defer s.wg.Done()
	pkt := make([]byte, size)
	pkt[0] = udpRealtime
	binary.BigEndian.PutUint64(pkt[1:], flow)
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i := range count {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-s.ctx.Done():
				return
			}
		} else if s.ctx.Err() != nil {
			return
		}
		binary.BigEndian.PutUint32(pkt[9:], uint32(i))
		binary.BigEndian.PutUint64(pkt[13:], uint64(clock()))
		s.conn.WriteToUDPAddrPort(pkt, to)
	}
}

// Close stops the flows and the socket.
func (s *UDPService) Close() error {
	if s == nil {
		return nil
	}
	s.cancel()
	err := s.conn.Close()
	s.wg.Wait()
	return err
}

// dialUDP opens the client's UDP socket to the service through sess.
func dialUDP(ctx context.Context, sess Session, web netip.Addr) (*net.UDPConn, error) {
	c, err := sess.Dial(ctx, "udp4", netip.AddrPortFrom(web, UDPPort).String())
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UDPConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("transport dialled %T for UDP", c)
	}
	return uc, nil
}

// Prober sends a latency probe every interval and records each one's RTT.
type prober struct {
	conn     *net.UDPConn
	interval time.Duration
	stop     chan struct{}
	wg       sync.WaitGroup

	mu  sync.Mutex
	rtt []time.Duration // by sequence number; -1 while unanswered
}

func startProber(conn *net.UDPConn, interval time.Duration) *prober {
	p := &prober{conn: conn, interval: interval, stop: make(chan struct{})}
	p.wg.Add(2)
	go p.send()
	go p.receive()
	return p
}

func (p *prober) send() {
	defer p.wg.Done()
	pkt := make([]byte, ProbeSize)
	pkt[0] = udpEcho
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		p.mu.Lock()
		seq := len(p.rtt)
		p.rtt = append(p.rtt, -1)
		p.mu.Unlock()
		binary.BigEndian.PutUint32(pkt[1:], uint32(seq))
		binary.BigEndian.PutUint64(pkt[5:], uint64(clock()))
		p.conn.Write(pkt)
		select {
		case <-t.C:
		case <-p.stop:
			return
		}
	}
}

func (p *prober) receive() {
	defer p.wg.Done()
	buf := make([]byte, udpServiceBuffer)
	for {
		n, err := p.conn.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if n < probeHeader || buf[0] != udpEcho {
			continue
		}
		rtt := clock() - time.Duration(binary.BigEndian.Uint64(buf[5:]))
		seq := int(binary.BigEndian.Uint32(buf[1:]))
		p.mu.Lock()
		if seq < len(p.rtt) && p.rtt[seq] < 0 {
			p.rtt[seq] = rtt
		}
		p.mu.Unlock()
	}
}

// count is the number of probes sent so far: a mark between phases.
func (p *prober) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.rtt)
}

// Bounds on waiting for the last probes' answers after the download: twice
// the largest RTT seen (a deep queue drains for more than a second), within
// these limits.
const (
	probeGraceMin = 500 * time.Millisecond
	probeGraceMax = 5 * time.Second
)

// finish stops sending, waits for outstanding answers and closes the
// socket. It returns every probe's RTT (-1: no answer).
func (p *prober) finish() []time.Duration {
	close(p.stop)
	stopped := time.Now()
	for {
		p.mu.Lock()
		var longest time.Duration
		open := false
		for _, r := range p.rtt {
			longest = max(longest, r)
			open = open || r < 0
		}
		p.mu.Unlock()
		if !open || time.Since(stopped) > min(probeGraceMax, max(probeGraceMin, 2*longest)) {
			break
		}
		time.Sleep(p.interval)
	}
	p.conn.Close()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Duration(nil), p.rtt...)
}
