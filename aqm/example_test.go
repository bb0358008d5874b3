package aqm_test

import (
	"fmt"
	"time"

	"github.com/braid-vpn/braid/aqm"
)

// packet is a queued inner IP packet and its enqueue time.
type packet struct {
	data []byte
	at   time.Time
}

// queue is a FIFO that knows its backlog in bytes.
type queue struct {
	pkts  []packet
	bytes int
}

func (q *queue) pop() (packet, bool) {
	if len(q.pkts) == 0 {
		return packet{}, false
	}
	p := q.pkts[0]
	q.pkts = q.pkts[1:]
	q.bytes -= len(p.data)
	return p, true
}

// dequeue is the caller's side of CoDel: a packet CoDel condemns is marked if
// it is ECN-capable and sent, otherwise dropped, and then the next packet is
// asked about.
func dequeue(c *aqm.CoDel, q *queue, now time.Time) (packet, bool) {
	for {
		p, ok := q.pop()
		if !ok {
			c.OnEmpty(now)
			return packet{}, false
		}
		// q.bytes no longer includes p: backlog excludes the packet itself.
		if !c.OnDequeue(now.Sub(p.at), q.bytes, now) || aqm.MarkCE(p.data) {
			return p, true
		}
		fmt.Printf("dropped packet %d at %v\n", id(p), now.Sub(time.Unix(0, 0)))
	}
}

// id is the packet's IPv4 identification.
func id(p packet) int { return int(p.data[4])<<8 | int(p.data[5]) }

func Example() {
	c := aqm.New(aqm.Config{})
	start := time.Unix(0, 0)
	q := &queue{}
	// 400 packets of 1000 bytes, all enqueued at start; odd ones are
	// ECN-capable (IPv4 TOS ECT(0)), even ones are not. Bytes 4-5 (the
	// IPv4 identification) number them.
	for i := range 400 {
		p := make([]byte, 1000)
		p[0] = 0x45
		if i%2 == 1 {
			p[1] = 0x02
		}
		p[4], p[5] = byte(i>>8), byte(i)
		q.pkts = append(q.pkts, packet{p, start})
		q.bytes += len(p)
	}
	// The link drains one packet per millisecond, so packet i waits i ms.
	// Packet 5 is the first to wait Target (5ms); when the sojourn time has
	// stayed at or above it for an Interval, at 105ms, CoDel acts: then
	// again 100ms/sqrt(1) later (205ms) and 100ms/sqrt(2) later
	// (275.71ms, so the packet leaving at 276ms, which is not ECN-capable
	// and is dropped; the next one is sent at once).
	for ms := range 300 {
		now := start.Add(time.Duration(ms) * time.Millisecond)
		p, _ := dequeue(c, q, now)
		if p.data[1] == 0x03 {
			fmt.Printf("marked packet %d at %v\n", id(p), now.Sub(start))
		}
	}
	fmt.Println("count", c.Count())
	// Output:
	// marked packet 105 at 105ms
	// marked packet 205 at 205ms
	// dropped packet 276 at 276ms
	// count 3
}
