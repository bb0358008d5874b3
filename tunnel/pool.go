package tunnel

import "sync"

// packetBuf is one packet buffer. start/end delimit the inner IP packet once a
// datagram has been opened (for TUN writes and the reorder buffer).
type packetBuf struct {
	b          []byte
	start, end int
	flow       uint16 // received: the reorder buffer's flow bucket (its TUN write lane)
}

// bufPool recycles packet buffers so the steady-state data path does not allocate.
type bufPool struct {
	size int
	p    sync.Pool
}

func (bp *bufPool) init(size int) {
	bp.size = size
	bp.p.New = func() any { return &packetBuf{b: make([]byte, size)} }
}

func (bp *bufPool) get() *packetBuf {
	pb := bp.p.Get().(*packetBuf)
	pb.b = pb.b[:cap(pb.b)]
	pb.start, pb.end = 0, 0
	return pb
}

func (bp *bufPool) put(pb *packetBuf) {
	if pb != nil {
		bp.p.Put(pb)
	}
}
