package noise

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/wire"
)

// pair returns two keypairs sharing keys as after a handshake, without the
// Diffie-Hellman cost.
func pair(window int) (ini, resp *Keypair) {
	var k1, k2 [32]byte
	for i := range k1 {
		k1[i], k2[i] = byte(i), byte(100+i)
	}
	ini = newKeypair(k1, k2, idxCli, idxSrv, true, window, t0)
	resp = newKeypair(k2, k1, idxSrv, idxCli, false, window, t0)
	return
}

func TestSealLayout(t *testing.T) {
	ini, resp := pair(0)
	plain := "hello, multipath"
	if got := resp.MaxRecvCounter(); got != 0 {
		t.Fatalf("MaxRecvCounter before any packet = %d, want 0", got)
	}
	for want := uint64(0); want < 3; want++ {
		if got := ini.SendCounter(); got != want {
			t.Fatalf("SendCounter = %d, want %d", got, want)
		}
		d := sealString(t, ini, plain)
		if len(d) != wire.DataOverhead+len(plain) {
			t.Fatalf("datagram of %d bytes, want %d", len(d), wire.DataOverhead+len(plain))
		}
		if d[0] != wire.TypeData || d[1] != 0 || d[2] != 0 || d[3] != 0 {
			t.Fatalf("header % x", d[:4])
		}
		if r := binary.BigEndian.Uint32(d[4:]); r != idxSrv {
			t.Fatalf("receiver index %#x, want %#x", r, idxSrv)
		}
		if c := binary.BigEndian.Uint64(d[8:]); c != want {
			t.Fatalf("counter %d, want %d", c, want)
		}
		if bytes.Contains(d, []byte(plain)) {
			t.Fatal("plaintext visible in the datagram")
		}
		if c := mustOpen(t, resp, d, plain); c != want {
			t.Fatalf("Open counter %d, want %d", c, want)
		}
		if resp.MaxRecvCounter() != want {
			t.Fatalf("MaxRecvCounter = %d, want %d", resp.MaxRecvCounter(), want)
		}
	}
}

func TestSealOpenSizesBothDirections(t *testing.T) {
	ini, resp := pair(0)
	for _, n := range []int{0, 1, 15, 16, 17, 63, 64, 65, 1400, 9000} {
		p := bytes.Repeat([]byte{byte(n)}, n)
		for _, dir := range [][2]*Keypair{{ini, resp}, {resp, ini}} {
			buf := make([]byte, wire.DataHeaderLen+n, wire.DataOverhead+n+7) // spare cap is fine
			copy(buf[wire.DataHeaderLen:], p)
			d, err := dir[0].Seal(buf, n)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := dir[1].Open(d)
			if err != nil {
				t.Fatalf("n=%d: %v", n, err)
			}
			if !bytes.Equal(got, p) {
				t.Fatalf("n=%d: round trip mismatch", n)
			}
			if n > 0 && &got[0] != &buf[wire.DataHeaderLen] {
				t.Fatal("Open did not decrypt in place")
			}
		}
	}
}

func TestSealBuffer(t *testing.T) {
	ini, _ := pair(0)
	if _, err := ini.Seal(make([]byte, 16, wire.DataOverhead+9), 10); !errors.Is(err, ErrBuffer) {
		t.Fatalf("short cap: err = %v, want ErrBuffer", err)
	}
	if _, err := ini.Seal(make([]byte, 64), -1); !errors.Is(err, ErrBuffer) {
		t.Fatalf("negative n: err = %v, want ErrBuffer", err)
	}
	if ini.SendCounter() != 0 {
		t.Fatal("a refused Seal used a counter")
	}
	// len(buf) may be short as long as cap suffices.
	if _, err := ini.Seal(make([]byte, 0, wire.DataOverhead+10), 10); err != nil {
		t.Fatalf("len 0, enough cap: %v", err)
	}
}

func TestForgedTagAndCiphertext(t *testing.T) {
	ini, resp := pair(0)
	d := sealString(t, ini, "payload that matters")
	for i := wire.DataHeaderLen; i < len(d); i++ {
		f := bytes.Clone(d)
		f[i] ^= 0x40
		if _, _, err := resp.Open(f); !errors.Is(err, ErrAuth) {
			t.Fatalf("flipped byte %d: err = %v, want ErrAuth", i, err)
		}
	}
	// Failed forgeries must not have marked the counter as seen.
	mustOpen(t, resp, d, "payload that matters")
}

func TestHeaderTampering(t *testing.T) {
	ini, resp := pair(0)
	sealString(t, ini, "a")      // counter 0
	d := sealString(t, ini, "b") // counter 1
	tamper := []struct {
		name string
		f    func([]byte)
		want error
	}{
		{"flags", func(b []byte) { b[1] = 1 }, ErrAuth},
		{"reserved", func(b []byte) { b[3] = 1 }, ErrAuth},
		{"receiver index", func(b []byte) { b[7] ^= 1 }, ErrAuth},
		// Counter 0 passes the replay check, so only the AEAD (nonce and AD) can
		// catch the change.
		{"counter", func(b []byte) { b[15] = 0 }, ErrAuth},
		{"type", func(b []byte) { b[0] = wire.TypeHandshakeInit }, ErrShort},
	}
	for _, c := range tamper {
		f := bytes.Clone(d)
		c.f(f)
		if _, _, err := resp.Open(f); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	mustOpen(t, resp, d, "b")
}

func TestOpenShort(t *testing.T) {
	ini, resp := pair(0)
	d := sealString(t, ini, "")
	for n := 0; n < wire.DataOverhead; n++ {
		if _, _, err := resp.Open(bytes.Clone(d[:n])); !errors.Is(err, ErrShort) {
			t.Fatalf("length %d: err = %v, want ErrShort", n, err)
		}
	}
	if p, _, err := resp.Open(d); err != nil || len(p) != 0 {
		t.Fatalf("empty plaintext: %q, %v", p, err)
	}
}

func TestReplayRejected(t *testing.T) {
	ini, resp := pair(0)
	d := sealString(t, ini, "once")
	mustOpen(t, resp, d, "once")
	if _, _, err := resp.Open(bytes.Clone(d)); !errors.Is(err, ErrReplay) {
		t.Fatalf("replay: err = %v, want ErrReplay", err)
	}
}

func TestOutOfOrderWithinWindow(t *testing.T) {
	ini, resp := pair(128)
	var ds [][]byte
	for i := 0; i < 300; i++ {
		ds = append(ds, sealString(t, ini, string(rune('a'+i%26))))
	}
	// Deliver 172..299 newest first (the whole 128 window), then 0..171.
	for i := 299; i >= 172; i-- {
		if c := mustOpen(t, resp, ds[i], string(rune('a'+i%26))); c != uint64(i) {
			t.Fatalf("counter %d, want %d", c, i)
		}
	}
	for i := 0; i < 172; i++ {
		if _, _, err := resp.Open(bytes.Clone(ds[i])); !errors.Is(err, ErrReplay) {
			t.Fatalf("counter %d, 299-%d behind a 128 window: err = %v, want ErrReplay", i, 299-i, err)
		}
	}
}

func TestCounterLimits(t *testing.T) {
	ini, resp := pair(0)
	ini.sendNext.Store(RejectAfterMessages - 1)
	d := sealString(t, ini, "last")
	if c := mustOpen(t, resp, d, "last"); c != RejectAfterMessages-1 {
		t.Fatalf("counter %d", c)
	}
	buf := make([]byte, 64)
	for i := 0; i < 3; i++ {
		if _, err := ini.Seal(buf, 8); !errors.Is(err, ErrCounterExhausted) {
			t.Fatalf("Seal past the limit: err = %v, want ErrCounterExhausted", err)
		}
	}
	// A datagram at RejectAfterMessages, correctly sealed, is still refused.
	d = make([]byte, wire.DataOverhead)
	wire.PutDataHeader(d, wire.DataHeader{Receiver: idxSrv, Counter: RejectAfterMessages})
	var nonce [12]byte
	binary.LittleEndian.PutUint64(nonce[4:], RejectAfterMessages)
	ini.send.Seal(d[wire.DataHeaderLen:wire.DataHeaderLen], nonce[:], nil, d[:wire.DataHeaderLen])
	if _, _, err := resp.Open(d); !errors.Is(err, ErrReplay) {
		t.Fatalf("counter at RejectAfterMessages: err = %v, want ErrReplay", err)
	}
}

// The nonce layout is fixed by the protocol text (4 zero bytes, counter
// little-endian); check it against a datagram sealed by hand.
func TestNonceLayout(t *testing.T) {
	ini, resp := pair(0)
	ini.sendNext.Store(0x0102030405060708)
	d := sealString(t, ini, "n")
	var nonce [12]byte
	copy(nonce[4:], []byte{8, 7, 6, 5, 4, 3, 2, 1})
	if _, err := resp.recv.Open(nil, nonce[:], d[wire.DataHeaderLen:], d[:wire.DataHeaderLen]); err != nil {
		t.Fatalf("hand-built nonce does not open: %v", err)
	}
}

func TestConfirmedAndLifetime(t *testing.T) {
	ini, resp := pair(0)
	if !ini.Confirmed() || resp.Confirmed() {
		t.Fatalf("Confirmed: initiator %v, responder %v; want true, false", ini.Confirmed(), resp.Confirmed())
	}
	bad := sealString(t, ini, "x")
	bad[len(bad)-1] ^= 1
	resp.Open(bad)
	if resp.Confirmed() {
		t.Fatal("forged datagram confirmed the responder's key")
	}
	mustOpen(t, resp, sealString(t, ini, "y"), "y")
	if !resp.Confirmed() {
		t.Fatal("responder not confirmed after a genuine datagram")
	}
}

// Several goroutines seal and several open the same keypairs; every datagram
// must open exactly once, with a distinct counter.
func TestConcurrentSealOpen(t *testing.T) {
	ini, resp := pair(1 << 14)
	const (
		workers = 4
		per     = 1000
	)
	ch := make(chan []byte, workers*per)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				buf := make([]byte, wire.DataHeaderLen+8, wire.DataOverhead+8)
				d, err := ini.Seal(buf, 8)
				if err != nil {
					t.Error(err)
					return
				}
				ch <- d
				ch <- bytes.Clone(d) // a duplicate, as a path might deliver
			}
		}()
	}
	go func() { wg.Wait(); close(ch) }()
	var mu sync.Mutex
	opened := map[uint64]int{}
	var rw sync.WaitGroup
	for w := 0; w < workers; w++ {
		rw.Add(1)
		go func() {
			defer rw.Done()
			for d := range ch {
				_, c, err := resp.Open(d)
				if err != nil && !errors.Is(err, ErrReplay) {
					t.Error(err)
				}
				if err == nil {
					mu.Lock()
					opened[c]++
					mu.Unlock()
				}
			}
		}()
	}
	rw.Wait()
	if len(opened) != workers*per {
		t.Fatalf("%d distinct counters opened, want %d", len(opened), workers*per)
	}
	for c, n := range opened {
		if n != 1 || c >= workers*per {
			t.Fatalf("counter %d opened %d times", c, n)
		}
	}
}

func TestSealOpenAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race (sync.Pool drops items)")
	}
	ini, resp := pair(0)
	buf := make([]byte, wire.DataOverhead+1400)
	n := testing.AllocsPerRun(200, func() {
		d, err := ini.Seal(buf, 1400)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := resp.Open(d); err != nil {
			t.Fatal(err)
		}
		resp.Open(d) // replay path
	})
	if n != 0 {
		t.Fatalf("%v allocations per Seal+Open", n)
	}
}

func BenchmarkSeal1400(b *testing.B) {
	ini, _ := pair(0)
	buf := make([]byte, wire.DataOverhead+1400)
	b.SetBytes(1400)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ini.Seal(buf, 1400); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen1400(b *testing.B) {
	ini, resp := pair(0)
	// A ring of sealed datagrams; the receiver's window is reset whenever the ring
	// wraps so the same counters open again. Copying back the ciphertext costs a
	// memmove of 1432 bytes, small next to the AEAD.
	const ring = 1024
	sealed := make([][]byte, ring)
	for i := range sealed {
		buf := make([]byte, wire.DataOverhead+1400)
		d, _ := ini.Seal(buf, 1400)
		sealed[i] = d
	}
	work := make([]byte, wire.DataOverhead+1400)
	b.SetBytes(1400)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		j := i % ring
		if j == 0 {
			resp.window.Reset()
		}
		copy(work, sealed[j])
		if _, _, err := resp.Open(work); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpenReplayed(b *testing.B) {
	ini, resp := pair(0)
	d := sealString(b, ini, "x")
	resp.Open(bytes.Clone(d))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := resp.Open(d); !errors.Is(err, ErrReplay) {
			b.Fatal(err)
		}
	}
}

func BenchmarkSealParallel1400(b *testing.B) {
	ini, _ := pair(0)
	b.SetBytes(1400)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, wire.DataOverhead+1400)
		for pb.Next() {
			ini.Seal(buf, 1400)
		}
	})
}

func BenchmarkHandshake(b *testing.B) {
	cli, srv := fixedKey(1), fixedKey(2)
	r := NewResponder(srv, ResponderConfig{})
	lookup := func(keys.Key) (keys.Key, [12]byte, bool) { return keys.Key{}, [12]byte{}, true }
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now := t0.Add(time.Duration(i))
		msg1, st, err := CreateInitiation(cli, srv.Public(), noPSK, idxCli, nil, now)
		if err != nil {
			b.Fatal(err)
		}
		acc, err := r.ConsumeInitiation(msg1, srcA, lookup, fixedIndex(idxSrv), now)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := st.ConsumeResponse(acc.Response, now); err != nil {
			b.Fatal(err)
		}
	}
}

// SealHeader takes counters in call order; SealBody may run later, in any order
// and on any goroutine, and gives what Seal gives.
func TestSealSplit(t *testing.T) {
	ini, resp := pair(0)
	ref, _ := pair(0)
	msgs := []string{"first", "second, longer", "", "fourth"}
	dgrams := make([][]byte, len(msgs))
	counters := make([]uint64, len(msgs))
	for i, m := range msgs {
		buf := make([]byte, wire.DataHeaderLen+len(m), wire.DataOverhead+len(m))
		copy(buf[wire.DataHeaderLen:], m)
		d, c, err := ini.SealHeader(buf, len(m))
		if err != nil || c != uint64(i) || len(d) != wire.DataOverhead+len(m) {
			t.Fatalf("SealHeader %d: counter %d, %d bytes, %v", i, c, len(d), err)
		}
		dgrams[i], counters[i] = d, c
	}
	var wg sync.WaitGroup
	for i := len(msgs) - 1; i >= 0; i-- {
		wg.Add(1)
		go func() { defer wg.Done(); ini.SealBody(dgrams[i], counters[i]) }()
	}
	wg.Wait()
	for i, m := range msgs {
		if want := sealString(t, ref, m); !bytes.Equal(dgrams[i], want) {
			t.Fatalf("datagram %d differs from Seal's", i)
		}
		mustOpen(t, resp, dgrams[i], m)
	}
	if _, _, err := ini.SealHeader(make([]byte, 0, 10), 1); !errors.Is(err, ErrBuffer) {
		t.Fatalf("short buffer: %v", err)
	}
}
