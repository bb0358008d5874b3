package noise

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/braid-vpn/braid/keys"
	"github.com/braid-vpn/braid/wire"
)

// Fixed keys and ephemeral seeds make the seed messages reproducible, so the
// fuzz targets can tell "accepted the genuine message" from "accepted something
// else" (which must never happen).
var (
	fzCli   = fixedKey(11)
	fzSrv   = fixedKey(22)
	fzPSK   = fixedKey(33)
	fzSeed  = [32]byte{1, 2, 3, 4, 5, 6, 7, 8}
	fzCfg   = ResponderConfig{RatePerSecond: 0} // unlimited: the fuzzer is one source
	fzParam = []byte{wire.ParamReorder, 4, 'f', 'l', 'o', 'w'}
)

func fzLookup(pub keys.Key) (keys.Key, [12]byte, bool) {
	if pub == fzCli.Public() {
		return fzPSK, [12]byte{}, true
	}
	return keys.Key{}, [12]byte{}, false
}

func fzInitiation(tb testing.TB) ([]byte, *Initiation) {
	msg, st, err := createInitiation(fzCli, fzSrv.Public(), fzPSK, idxCli, fzParam, t0, fzSeed)
	if err != nil {
		tb.Fatal(err)
	}
	return msg, st
}

// constReader yields an endless run of one byte.
type constReader byte

func (c constReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(c)
	}
	return len(p), nil
}

// sameExceptIndex reports whether a and b are equal apart from the 4-byte index
// at offset off and the trailing mac1 (which covers the index).
func sameExceptIndex(a, b []byte, off, macs int) bool {
	if len(a) != len(b) || len(a) < off+4+macs {
		return false
	}
	return bytes.Equal(a[:off], b[:off]) && bytes.Equal(a[off+4:len(a)-macs], b[off+4:len(b)-macs])
}

// FuzzConsumeInitiation feeds arbitrary datagrams to a responder. With fixMAC the
// harness first gives the input a valid mac1, so the fuzzer reaches the Noise
// parsing behind the mac1 gate. Only the genuine initiation may be accepted.
func FuzzConsumeInitiation(f *testing.F) {
	genuine, _ := fzInitiation(f)
	f.Add(genuine, false)
	f.Add(genuine, true)
	f.Add(genuine[:len(genuine)-1], true)
	f.Add(garbageInit(fzSrv.Public()), true)
	f.Add([]byte{wire.TypeHandshakeInit}, false)
	r := NewResponder(fzSrv, fzCfg)
	macKey := mac1Key(fzSrv.Public())
	f.Fuzz(func(t *testing.T, msg []byte, fixMAC bool) {
		msg = bytes.Clone(msg)
		if fixMAC && len(msg) >= 2*wire.MACLen {
			n := len(msg) - 2*wire.MACLen
			m := mac(macKey[:], msg[:n])
			copy(msg[n:], m[:])
		}
		acc, err := r.ConsumeInitiation(msg, srcA, fzLookup, fixedIndex(idxSrv), t0)
		if err != nil {
			return
		}
		// The sender index is a routing hint outside the Noise transcript (as in
		// WireGuard), so with a recomputed mac1 it may differ; every other byte
		// must be the genuine one's.
		// mac2 is not checked by ConsumeInitiation (the caller checks it under load).
		if !sameExceptIndex(msg, genuine, 4, 2*wire.MACLen) {
			t.Fatalf("accepted a non-genuine initiation %x", msg)
		}
		if acc.PeerPublic != fzCli.Public() || !bytes.Equal(acc.Payload, fzParam) {
			t.Fatal("genuine initiation decoded wrongly")
		}
	})
}

// FuzzConsumeResponse feeds arbitrary datagrams to an initiator waiting for
// message 2. Only the genuine response may complete the handshake.
func FuzzConsumeResponse(f *testing.F) {
	msg1, _ := fzInitiation(f)
	// Every fuzz worker process recomputes the genuine response, so the
	// responder's ephemeral key must be the same in all of them.
	r := NewResponder(fzSrv, fzCfg)
	r.random = constReader(0x5a)
	acc, err := r.ConsumeInitiation(msg1, srcA, fzLookup, fixedIndex(idxSrv), t0)
	if err != nil {
		f.Fatal(err)
	}
	genuine := acc.Response
	f.Add(genuine, false)
	f.Add(genuine, true)
	f.Add(make([]byte, wire.MinRespLen), true)
	f.Add([]byte{wire.TypeHandshakeResp}, false)
	macKey := mac1Key(fzCli.Public())
	_, st := fzInitiation(f)
	f.Fuzz(func(t *testing.T, msg []byte, fixMAC bool) {
		msg = bytes.Clone(msg)
		if fixMAC && len(msg) >= wire.MACLen {
			m := mac(macKey[:], msg[:len(msg)-wire.MACLen])
			copy(msg[len(msg)-wire.MACLen:], m[:])
		}
		kp, _, err := st.ConsumeResponse(msg, t0)
		if err != nil {
			return
		}
		if !sameExceptIndex(msg, genuine, 4, wire.MACLen) {
			t.Fatalf("accepted a non-genuine response %x\ngenuine %x", msg, genuine)
		}
		if got := binary.BigEndian.Uint32(msg[4:]); kp.RemoteIndex != got {
			t.Fatalf("RemoteIndex %#x, message says %#x", kp.RemoteIndex, got)
		}
		if bytes.Equal(msg, genuine) {
			// The genuine response must give working keys. (With a rewritten
			// sender index the initiator addresses the wrong session: a denial
			// of service only an on-path attacker can cause.)
			mustOpen(t, acc.Keypair, sealString(t, kp, "fz"), "fz")
			acc.Keypair.window.Reset()
		}
		_, st = fzInitiation(t) // the used one refuses everything from now on
	})
}

// FuzzOpen feeds arbitrary datagrams to a keypair. Only datagrams that were
// really sealed may open.
func FuzzOpen(f *testing.F) {
	ini, _ := pair(0)
	var genuine [][]byte
	for _, s := range []string{"", "a", "a longer plaintext of a few dozen bytes......"} {
		d := sealString(f, ini, s)
		genuine = append(genuine, d)
		f.Add(bytes.Clone(d))
	}
	f.Add([]byte{wire.TypeData})
	f.Add(make([]byte, wire.DataOverhead))
	f.Fuzz(func(t *testing.T, d []byte) {
		_, resp := pair(128) // fresh window each time
		in := bytes.Clone(d)
		p, c, err := resp.Open(in)
		if err != nil {
			if p != nil {
				t.Fatal("error with a plaintext")
			}
			return
		}
		if c >= uint64(len(genuine)) || !bytes.Equal(d, genuine[c]) {
			t.Fatalf("opened a datagram that was never sealed: %x", d)
		}
		if len(p) != len(d)-wire.DataOverhead {
			t.Fatalf("plaintext of %d bytes from a %d-byte datagram", len(p), len(d))
		}
	})
}
