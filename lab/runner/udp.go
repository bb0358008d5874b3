package runner

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/netns"
)

// UDPPort is the web server's UDP service of latency probes and real-time
// flows (docs/lab.md).
const UDPPort = 8082

// The service's datagrams, big endian: a probe (dataMsg of type udpEcho in
// ProbeSize bytes) is echoed back; a start request asks for a real-time
// flow of Count dataMsgs of type udpRealtime in Size bytes, one every
// Interval, to its sender. Sent is clock() at sending.
type (
	dataMsg struct {
		Type byte
		Flow uint64
		Seq  uint32
		Sent int64
	}
	startMsg struct {
		Type        byte // udpStart
		Flow        uint64
		Interval    int64
		Count, Size uint32
	}
)

const (
	udpEcho, udpStart, udpRealtime = 'E', 'R', 'D'
	ProbeSize                      = 32 // a latency probe's UDP payload: small, like a ping
	udpServiceBuffer               = 2048
	// The wait for the last probes' answers: 2 × the largest RTT, bounded.
	probeGraceMin = 500 * time.Millisecond
	probeGraceMax = 5 * time.Second
	// The start request is repeated every realtimeRetry until the flow's
	// first packet, for realtimeStartTimeout at most; after the flow the
	// client waits max(RealtimeDrain, 2 × deadline).
	realtimeRetry        = 250 * time.Millisecond
	realtimeStartTimeout = 3 * time.Second
	RealtimeDrain        = time.Second
)

var (
	be                = binary.BigEndian
	dataLen, startLen = binary.Size(dataMsg{}), binary.Size(startMsg{})
	// clockBase anchors clock(): the service and the client are goroutines
	// of this one process, so one monotonic clock times a one-way delay.
	clockBase = time.Now()
)

func clock() time.Duration { return time.Since(clockBase) }

// UDPService answers probes and sends real-time flows from the web
// namespace until Close.
type UDPService struct {
	conn   *net.UDPConn
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// StartUDP opens the service's socket on addr:UDPPort inside ns.
func StartUDP(ns *netns.Namespace, addr netip.Addr) (*UDPService, error) {
	s := &UDPService{}
	if err := ns.Do(func() (err error) {
		s.conn, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, UDPPort)))
		return err
	}); err != nil {
		return nil, fmt.Errorf("UDP service: %w", err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Go(s.serve)
	return s, nil
}

func (s *UDPService) serve() {
	buf := make([]byte, udpServiceBuffer)
	flows := map[uint64]bool{} // flows started: a repeated start request is ignored
	for {
		n, from, err := s.conn.ReadFromUDPAddrPort(buf)
		var m startMsg
		switch {
		case errors.Is(err, net.ErrClosed):
			return
		case err != nil:
		case n >= dataLen && buf[0] == udpEcho:
			s.conn.WriteToUDPAddrPort(buf[:n], from)
		case n == startLen && buf[0] == udpStart:
			binary.Decode(buf, be, &m)
			if m.Interval > 0 && int(m.Size) >= dataLen && m.Size <= udpServiceBuffer && !flows[m.Flow] {
				flows[m.Flow] = true
				s.wg.Go(func() { s.sendFlow(from, m) })
			}
		}
	}
}

// sendFlow paces m.Count packets, one every m.Interval from now. Each is
// due at start + i·interval; a packet that is late (the sender was
// descheduled) goes at once, so the rate holds on average.
func (s *UDPService) sendFlow(to netip.AddrPort, m startMsg) {
	pkt := make([]byte, m.Size)
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i := range m.Count {
		timer.Reset(time.Until(start.Add(time.Duration(i) * time.Duration(m.Interval))))
		select {
		case <-timer.C:
		case <-s.ctx.Done():
			return
		}
		binary.Encode(pkt, be, dataMsg{udpRealtime, m.Flow, i, int64(clock())})
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
func dialUDP(ctx context.Context, sess Session, web netip.Addr) (net.Conn, error) {
	return sess.Dial(ctx, "udp4", netip.AddrPortFrom(web, UDPPort).String())
}

// startProber sends a latency probe on conn every interval until finish,
// recording each probe's clock() at sending and its RTT (-1: no answer).
// finish waits for the answers still due (2 × the largest RTT, bounded),
// closes conn and returns both.
func startProber(conn net.Conn, interval time.Duration) (finish func() (sent, rtt []time.Duration)) {
	var sent, rtt []time.Duration
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		pkt, buf := make([]byte, ProbeSize), make([]byte, udpServiceBuffer)
		answered, longest := 0, time.Duration(0)
		receive := func(until time.Time) {
			conn.SetReadDeadline(until)
			var m dataMsg
			if n, err := conn.Read(buf); err == nil && n >= dataLen && buf[0] == udpEcho {
				binary.Decode(buf, be, &m)
				if d := clock() - time.Duration(m.Sent); int(m.Seq) < len(rtt) && rtt[m.Seq] < 0 {
					rtt[m.Seq], answered, longest = d, answered+1, max(longest, d)
				}
			}
		}
		for next := time.Now(); ; {
			select {
			case <-stop: // the answers still due
				grace := func() time.Duration { return min(probeGraceMax, max(probeGraceMin, 2*longest)) }
				for stopped := time.Now(); answered < len(sent) && time.Since(stopped) < grace(); {
					receive(stopped.Add(grace()))
				}
				return
			default:
			}
			if now := time.Now(); !now.Before(next) {
				t := clock()
				binary.Encode(pkt, be, dataMsg{udpEcho, 0, uint32(len(sent)), int64(t)})
				sent, rtt = append(sent, t), append(rtt, -1)
				conn.Write(pkt)
				next = next.Add((now.Sub(next)/interval + 1) * interval) // a late probe skips the ticks it missed
			}
			receive(next)
		}
	}()
	return func() ([]time.Duration, []time.Duration) {
		close(stop)
		<-done
		conn.Close()
		return sent, rtt
	}
}

// realtime runs one repetition of the real-time workload (docs/lab.md).
func (r *runState) realtime(ctx context.Context, sess Session, rep int) (results.Sample, error) {
	rt := r.exp.Realtime
	conn, err := dialUDP(ctx, sess, r.web.Addr)
	if err != nil {
		return results.Sample{}, err
	}
	defer conn.Close()
	before, err := r.counters(ctx, sess)
	if err != nil {
		return results.Sample{}, err
	}
	outerBefore := r.perPath(r.tb.Offered)

	count, flow := rt.Packets(), rand.Uint64()
	req, _ := binary.Append(nil, be, startMsg{udpStart, flow, int64(rt.Interval()), uint32(count), uint32(rt.Size)})
	owd, got := slices.Repeat([]time.Duration{-1}, count), 0 // by sequence number; -1: not arrived
	buf := make([]byte, udpServiceBuffer)
	end, asked := time.Now().Add(realtimeStartTimeout), time.Time{}
	for got < count && ctx.Err() == nil {
		deadline := end
		if got == 0 { // not started: ask every realtimeRetry
			if time.Since(asked) >= realtimeRetry {
				conn.Write(req)
				asked = time.Now()
			}
			if next := asked.Add(realtimeRetry); next.Before(end) {
				deadline = next
			}
		}
		conn.SetReadDeadline(deadline)
		n, err := conn.Read(buf)
		now := clock()
		var m dataMsg
		if errors.Is(err, os.ErrDeadlineExceeded) && deadline.Equal(end) {
			break
		} else if errors.Is(err, net.ErrClosed) {
			return results.Sample{}, err
		} else if err != nil || n < dataLen || buf[0] != udpRealtime {
			continue // time to ask again, an ICMP error queued on the socket, …
		}
		if binary.Decode(buf, be, &m); m.Flow != flow {
			continue
		}
		if got == 0 {
			end = time.Now().Add(rt.Duration + max(RealtimeDrain, 2*rt.Deadline))
		}
		if seq := int(m.Seq); seq < count && owd[seq] < 0 { // a duplicate keeps the first one's delay
			owd[seq] = now - time.Duration(m.Sent)
			got++
		}
	}
	if err := ctx.Err(); err != nil {
		return results.Sample{}, err
	}
	res, err := RealtimeStats(rt.Size, rt.Deadline, owd)
	if err != nil {
		return results.Sample{}, err
	}
	after, err := r.counters(ctx, sess)
	if err != nil {
		return results.Sample{}, err
	}
	setOuter(&res, since(r.perPath(r.tb.Offered), outerBefore))
	secs := rt.Duration.Seconds()
	return results.Sample{
		Rep: rep, GoodputMbps: float64(res.PayloadBytes) * 8 / secs / 1e6, Seconds: secs, Bytes: res.PayloadBytes,
		Retransmits: -1, PathBytes: since(after.PathBytes, before.PathBytes), Realtime: &res,
	}, nil
}
