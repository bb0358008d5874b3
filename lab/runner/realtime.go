package runner

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/braid-vpn/braid/lab/results"
)

// Timing of a real-time repetition.
const (
	// realtimeRetry spaces the client's start requests until the flow's
	// first packet arrives (a request can be lost like any packet);
	// realtimeStartTimeout gives up.
	realtimeRetry        = 250 * time.Millisecond
	realtimeStartTimeout = 3 * time.Second
	// RealtimeDrain is the least time the client waits after the flow's
	// last packet was due, for packets still queued or being recovered
	// (at least twice the deadline: later ones are late anyway).
	RealtimeDrain = time.Second
)

// realtime runs one repetition of the real-time workload: the web server's
// UDP service sends the flow through sess to the client, which records each
// packet's one-way delay; the paths' emulators count the outer bytes.
func (r *runState) realtime(ctx context.Context, sess Session, rep int) (results.Sample, error) {
	rt := r.exp.Realtime
	conn, err := dialUDP(ctx, sess, r.web.Addr)
	if err != nil {
		return results.Sample{}, err
	}
	defer conn.Close()
	before, err := r.countPaths(ctx, sess)
	if err != nil {
		return results.Sample{}, err
	}
	outerBefore := r.perPath(r.tb.Offered)

	count, interval := rt.Packets(), rt.Interval()
	flow := rand.Uint64()
	req := make([]byte, startLen)
	req[0] = udpStart
	binary.BigEndian.PutUint64(req[1:], flow)
	binary.BigEndian.PutUint64(req[9:], uint64(interval))
	binary.BigEndian.PutUint32(req[17:], uint32(count))
	binary.BigEndian.PutUint32(req[21:], uint32(rt.Size))

	var started atomic.Bool
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		t := time.NewTicker(realtimeRetry)
		defer t.Stop()
		for !started.Load() {
			conn.Write(req)
			select {
			case <-t.C:
			case <-rctx.Done():
				return
			}
		}
	}()

	arrivals := make([]Arrival, 0, count)
	buf := make([]byte, udpServiceBuffer)
	end := time.Now().Add(realtimeStartTimeout)
	distinct, seen := 0, make([]bool, count)
	for distinct < count && ctx.Err() == nil {
		conn.SetReadDeadline(end)
		n, err := conn.Read(buf)
		now := clock()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if errors.Is(err, net.ErrClosed) {
			return results.Sample{}, err
		}
		if err != nil {
			continue // an ICMP error queued on the socket, …
		}
		if n < realtimeHeader || buf[0] != udpRealtime || binary.BigEndian.Uint64(buf[1:]) != flow {
			continue
		}
		if !started.Swap(true) {
			end = time.Now().Add(rt.Duration + max(RealtimeDrain, 2*rt.Deadline))
		}
		seq := int(binary.BigEndian.Uint32(buf[9:]))
		arrivals = append(arrivals, Arrival{Seq: seq, OWD: now - time.Duration(binary.BigEndian.Uint64(buf[13:]))})
		if seq < count && !seen[seq] {
			seen[seq] = true
			distinct++
		}
	}
	if err := ctx.Err(); err != nil {
		return results.Sample{}, err
	}
	res, err := RealtimeStats(count, rt.Size, rt.Deadline, arrivals)
	if err != nil {
		return results.Sample{}, err
	}
	_, pathBytes, err := r.since(ctx, sess, before)
	if err != nil {
		return results.Sample{}, err
	}
	outer := r.perPath(r.tb.Offered)
	for k, v := range outer {
		outer[k] = sub(v, outerBefore[k])
	}
	setOuter(&res, outer)
	secs := rt.Duration.Seconds()
	return results.Sample{
		Rep: rep, GoodputMbps: float64(res.PayloadBytes) * 8 / secs / 1e6, Seconds: secs, Bytes: res.PayloadBytes,
		Retransmits: -1, PathBytes: pathBytes, Realtime: &res,
	}, nil
}
