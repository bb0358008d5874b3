package tuntest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/braid-vpn/braid/tundev"
)

func bufs(n, size int) [][]byte {
	b := make([][]byte, n)
	for i := range b {
		b[i] = bytes.Repeat([]byte{0xEE}, size)
	}
	return b
}

func TestInjectRead(t *testing.T) {
	d := NewConfig(Config{MTU: 100, BatchSize: 3})
	for i := byte(1); i <= 5; i++ {
		if err := d.Inject([]byte{0x45, i, i}); err != nil {
			t.Fatal(err)
		}
	}
	b := bufs(8, tundev.Offset+100)
	sizes := make([]int, 8)
	n, err := d.Read(b, sizes, tundev.Offset)
	if err != nil || n != 3 {
		t.Fatalf("Read = %d, %v; want 3 (BatchSize)", n, err)
	}
	for i := 0; i < n; i++ {
		want := []byte{0x45, byte(i + 1), byte(i + 1)}
		if sizes[i] != 3 || !bytes.Equal(b[i][tundev.Offset:tundev.Offset+3], want) {
			t.Fatalf("packet %d = %x (size %d), want %x", i, b[i][tundev.Offset:tundev.Offset+3], sizes[i], want)
		}
		if !bytes.Equal(b[i][:tundev.Offset], bytes.Repeat([]byte{0xEE}, tundev.Offset)) {
			t.Fatalf("packet %d: headroom before offset was written", i)
		}
	}
	n, err = d.Read(b, sizes, 0)
	if err != nil || n != 2 || b[1][1] != 5 {
		t.Fatalf("second Read = %d, %v (%x); want the remaining 2 without blocking", n, err, b[1][:3])
	}
	if err := d.Inject(make([]byte, 101)); err == nil {
		t.Error("Inject beyond MTU accepted")
	}
	d.Inject(make([]byte, 50))
	if _, err := d.Read(bufs(1, 40), []int{0}, 0); err == nil {
		t.Error("Read into a too small buffer: no error")
	}
	if s := d.Stats(); s.Injected != 6 || s.Read != 5 {
		t.Errorf("stats %+v", s)
	}
	if m, _ := d.MTU(); m != 100 {
		t.Errorf("MTU %d", m)
	}
	if d.BatchSize() != 3 {
		t.Errorf("BatchSize %d", d.BatchSize())
	}
}

func TestWriteOutbound(t *testing.T) {
	d := New(1380)
	pkts := [][]byte{append(make([]byte, tundev.Offset), 1, 2, 3), append(make([]byte, tundev.Offset), 4)}
	n, err := d.Write(pkts, tundev.Offset)
	if err != nil || n != 2 {
		t.Fatalf("Write = %d, %v", n, err)
	}
	pkts[0][tundev.Offset] = 99 // the device must have copied
	if p := <-d.Outbound(); !bytes.Equal(p, []byte{1, 2, 3}) {
		t.Fatalf("first written packet %x", p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if p, err := d.Recv(ctx); err != nil || !bytes.Equal(p, []byte{4}) {
		t.Fatalf("Recv = %x, %v", p, err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel2()
	if _, err := d.Recv(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Recv with nothing written: %v", err)
	}
	if _, err := d.Write([][]byte{{1}}, 4); err == nil {
		t.Error("buffer shorter than offset accepted")
	}
}

func TestWriteDropsWhenNobodyReads(t *testing.T) {
	d := NewConfig(Config{QueueLen: 4})
	for i := 0; i < 10; i++ {
		if _, err := d.Write([][]byte{{byte(i)}}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if s := d.Stats(); s.Written != 4 || s.Dropped != 6 {
		t.Fatalf("stats %+v, want 4 written and 6 dropped", s)
	}
}

func TestClose(t *testing.T) {
	d := New(1380)
	d.Write([][]byte{{7}}, 0)
	errs := make(chan error, 2)
	go func() {
		_, err := d.Read(bufs(1, 100), []int{0}, 0)
		errs <- err
	}()
	full := NewConfig(Config{QueueLen: 1})
	full.Inject([]byte{1})
	go func() { errs <- full.Inject([]byte{2}) }() // blocks: queue full
	time.Sleep(10 * time.Millisecond)
	d.Close()
	full.Close()
	for i := 0; i < 2; i++ {
		select {
		case err := <-errs:
			if !errors.Is(err, os.ErrClosed) {
				t.Fatalf("blocked call after Close: %v, want os.ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not unblock Read/Inject")
		}
	}
	if _, err := d.Write([][]byte{{1}}, 0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Write after Close: %v", err)
	}
	if err := d.Inject([]byte{1}); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Inject after Close: %v", err)
	}
	var got [][]byte
	for p := range d.Outbound() { // closed after what was written
		got = append(got, p)
	}
	if len(got) != 1 || got[0][0] != 7 {
		t.Errorf("Outbound after Close yielded %x", got)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestConcurrent(t *testing.T) {
	d := NewConfig(Config{QueueLen: 64})
	const n = 2000
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // engine: read from TUN, write back
		defer wg.Done()
		b := bufs(d.BatchSize(), 64)
		sizes := make([]int, d.BatchSize())
		for got := 0; got < n; {
			k, err := d.Read(b, sizes, 0)
			if err != nil {
				t.Error(err)
				return
			}
			for i := 0; i < k; i++ {
				if _, err := d.Write([][]byte{b[i][:sizes[i]]}, 0); err != nil {
					t.Error(err)
					return
				}
			}
			got += k
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			d.Inject([]byte{byte(i), byte(i >> 8)})
		}
	}()
	seen := 0
	for seen+int(d.Stats().Dropped) < n {
		select {
		case <-d.Outbound():
			seen++
		case <-time.After(5 * time.Second):
			t.Fatalf("stalled after %d", seen)
		}
	}
	wg.Wait()
	d.Close()
	if s := d.Stats(); s.Injected != n || s.Read != n || s.Written+s.Dropped != n {
		t.Fatalf("stats %+v", s)
	}
}

// segment is a minimal IPv4/TCP segment (ACK, no options) of flow sport→80.
func segment(sport uint16, seq uint32, payload int) []byte {
	p := make([]byte, 40+payload)
	p[0], p[9] = 0x45, 6
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	copy(p[12:], []byte{100, 64, 0, 2, 100, 64, 0, 1})
	binary.BigEndian.PutUint16(p[20:], sport)
	binary.BigEndian.PutUint16(p[22:], 80)
	binary.BigEndian.PutUint32(p[24:], seq)
	p[32], p[33] = 5<<4, 0x10
	return p
}

// A batch comes out of one Read whole, behind single packets queued before it;
// a batch that does not fit a read is refused.
func TestInjectBatch(t *testing.T) {
	d := NewConfig(Config{MTU: 100, BatchSize: 4})
	if err := d.InjectBatch([][]byte{{1}, {2}, {3}, {4}, {5}}); err == nil {
		t.Fatal("a batch of 5 accepted with BatchSize 4")
	}
	d.Inject([]byte{0x45, 0})
	d.InjectBatch([][]byte{{0x45, 1}, {0x45, 2}, {0x45, 3}})
	d.Inject([]byte{0x45, 4})
	b := bufs(4, tundev.Offset+100)
	sizes := make([]int, 4)
	var got []int
	for len(got) < 2 {
		n, err := d.Read(b, sizes, tundev.Offset)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
	}
	// 1 + 3 fit the first read (4); the last one waits for the next.
	if got[0] != 4 || got[1] != 1 {
		t.Errorf("reads returned %v packets, want 4 then 1", got[:2])
	}
	if st := d.Stats(); st.Injected != 5 || st.Read != 5 {
		t.Errorf("stats %+v", st)
	}
}

// Write counts what the real device would coalesce: a run of one flow only
// when its first buffer has the room (tundev.Stager lays it out).
func TestWriteCoalesced(t *testing.T) {
	const off = tundev.Offset
	run := func(stage bool) uint64 {
		d := NewConfig(Config{QueueLen: 64})
		var pkts [][]byte
		for i := range 6 {
			seg := segment(1000, uint32(1+100*i), 100)
			b := make([]byte, off+len(seg))
			copy(b[off:], seg)
			pkts = append(pkts, b)
		}
		pkts = append(pkts, append(make([]byte, off), segment(2000, 1, 100)...)) // another flow
		if stage {
			var s tundev.Stager
			s.Stage(pkts, off)
		}
		if n, err := d.Write(pkts, off); n != 7 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
		return d.Stats().Coalesced
	}
	if got := run(false); got != 0 {
		t.Errorf("buffers without room: %d coalesced, want 0", got)
	}
	if got := run(true); got != 5 {
		t.Errorf("staged: %d coalesced, want 5 (the run of 6 into its first)", got)
	}
}
