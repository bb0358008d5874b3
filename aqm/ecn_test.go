package aqm

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// checksum computes the IPv4 header checksum from scratch: the one's
// complement of the one's complement sum of the header's 16-bit words, with
// the checksum field taken as zero.
func checksum(hdr []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(hdr); i += 2 {
		if i == 10 {
			continue
		}
		sum += uint32(hdr[i])<<8 | uint32(hdr[i+1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// verifies reports whether the header's stored checksum is correct: the one's
// complement sum of all its words, checksum included, is 0xffff.
func verifies(hdr []byte) bool {
	var sum uint32
	for i := 0; i+1 < len(hdr); i += 2 {
		sum += uint32(hdr[i])<<8 | uint32(hdr[i+1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return sum == 0xffff
}

func storedChecksum(hdr []byte) uint16 { return uint16(hdr[10])<<8 | uint16(hdr[11]) }

// ipv4 returns a UDP-in-IPv4 packet (192.168.0.1 → 192.168.0.199) with the
// given TOS byte, a valid header checksum and 8 bytes of payload.
func ipv4(tos byte) []byte {
	p := []byte{
		0x45, tos, 0x00, 0x1c, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00,
		0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
		0x30, 0x39, 0x00, 0x35, 0x00, 0x08, 0x00, 0x00,
	}
	c := checksum(p[:20])
	p[10], p[11] = byte(c>>8), byte(c)
	return p
}

// ipv6 returns an IPv6 header (plus 8 bytes) with the given Traffic Class
// and flow label 0x5abcd.
func ipv6(tc byte) []byte {
	p := make([]byte, 48)
	p[0] = 0x60 | tc>>4
	p[1] = tc<<4 | 0x5
	p[2], p[3] = 0xab, 0xcd
	p[4], p[5] = 0x00, 0x08 // payload length
	p[6], p[7] = 17, 64     // UDP, hop limit
	for i := 8; i < 40; i++ {
		p[i] = byte(i)
	}
	return p
}

func TestChecksumHelper(t *testing.T) {
	// The well-known example header (192.168.0.1 → 192.168.0.199, total
	// length 0x73, UDP) has checksum 0xb861.
	hdr := []byte{0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61,
		0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7}
	if c := checksum(hdr); c != 0xb861 {
		t.Fatalf("checksum = %#04x, want 0xb861", c)
	}
	if !verifies(hdr) {
		t.Fatal("example header does not verify")
	}
	hdr[11]++
	if verifies(hdr) {
		t.Fatal("corrupted header verifies")
	}
}

func TestMarkCEIPv4(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tos     byte
		wantTOS byte
	}{
		{"ECT(0)", 0x02, 0x03},
		{"ECT(1)", 0x01, 0x03},
		{"EF ECT(0)", 0xba, 0xbb}, // DSCP 46 is kept
		{"EF ECT(1)", 0xb9, 0xbb},
		{"CS1 ECT(0)", 0x22, 0x23},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ipv4(tc.tos)
			orig := bytes.Clone(p)
			if !ECNCapable(p) {
				t.Fatal("ECNCapable = false")
			}
			if !MarkCE(p) {
				t.Fatal("MarkCE = false")
			}
			if p[1] != tc.wantTOS {
				t.Fatalf("TOS %#02x, want %#02x", p[1], tc.wantTOS)
			}
			if !verifies(p[:20]) {
				t.Fatalf("header checksum %#04x does not verify", storedChecksum(p))
			}
			if got, want := storedChecksum(p), checksum(p[:20]); got != want {
				t.Fatalf("incremental checksum %#04x, full recomputation %#04x", got, want)
			}
			// Nothing else changed.
			for i := range p {
				if i != 1 && i != 10 && i != 11 && p[i] != orig[i] {
					t.Fatalf("byte %d changed: %#02x → %#02x", i, orig[i], p[i])
				}
			}
			if !ECNCapable(p) {
				t.Fatal("ECNCapable(CE) = false")
			}
			// Marking again is a no-op that reports true.
			marked := bytes.Clone(p)
			if !MarkCE(p) || !bytes.Equal(p, marked) {
				t.Fatal("MarkCE on CE changed the packet or reported false")
			}
		})
	}
}

func TestMarkCEIPv4HandComputed(t *testing.T) {
	// ipv4(0x02)'s header words are 4502 001c 0000 4000 4011 (checksum)
	// c0a8 0001 c0a8 00c7; they sum to 0x24747, which folds to
	// 0x4747+0x2 = 0x4749, so the checksum is ^0x4749 = 0xb8b6. (The
	// well-known header of TestChecksumHelper differs by TOS +0x02 and total
	// length -0x57: 0x479e+0x02-0x57 = 0x4749.) CE raises the word at bytes
	// 0-1 from 0x4502 to 0x4503, so the sum becomes 0x474a and the checksum
	// 0xb8b5.
	p := ipv4(0x02)
	if c := storedChecksum(p); c != 0xb8b6 {
		t.Fatalf("ipv4(0x02) checksum %#04x, want 0xb8b6", c)
	}
	if !MarkCE(p) || storedChecksum(p) != 0xb8b5 {
		t.Fatalf("after MarkCE checksum %#04x, want 0xb8b5", storedChecksum(p))
	}
}

func TestMarkCEIPv4WithOptions(t *testing.T) {
	// IHL 6: a 24-byte header with one 4-byte option (NOP NOP NOP EOL).
	p := []byte{
		0x46, 0x02, 0x00, 0x18, 0x12, 0x34, 0x00, 0x00, 0x40, 0x06, 0x00, 0x00,
		0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02,
		0x01, 0x01, 0x01, 0x00,
	}
	c := checksum(p)
	p[10], p[11] = byte(c>>8), byte(c)
	if !MarkCE(p) || p[1] != 0x03 || !verifies(p) {
		t.Fatalf("MarkCE with options: TOS %#02x, verifies %v", p[1], verifies(p))
	}
	// The same header cut inside its options is truncated.
	q := bytes.Clone(p[:22])
	q[1] = 0x02
	if MarkCE(q) || ECNCapable(q) || q[1] != 0x02 {
		t.Fatal("header truncated inside its options was accepted")
	}
}

// TestMarkCEIPv4Random checks the incremental update against a full
// recomputation over many pseudo-random headers, which reach the carry and
// 0x0000/0xffff corners of one's complement arithmetic.
func TestMarkCEIPv4Random(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200000 {
		p := make([]byte, 20)
		for j := range p {
			p[j] = byte(r.Uint32())
		}
		p[0] = 0x45
		p[1] = p[1]&^3 | byte(1+i%2) // ECT(1) or ECT(0)
		if i%1000 == 0 {
			p[1] |= 0xfc // DSCP all ones
		}
		c := checksum(p)
		p[10], p[11] = byte(c>>8), byte(c)
		if !MarkCE(p) {
			t.Fatalf("%x: MarkCE = false", p)
		}
		if !verifies(p) || storedChecksum(p) != checksum(p) {
			t.Fatalf("%x: checksum %#04x, recomputed %#04x", p, storedChecksum(p), checksum(p))
		}
	}
}

func TestMarkCEIPv6(t *testing.T) {
	for _, tc := range []struct {
		name         string
		tc           byte
		wantB0, want byte // bytes 0 and 1 after marking
	}{
		// Traffic Class 0xba (EF, ECT(0)): byte 0 = 0x6b, byte 1 = 0xa5;
		// CE makes it 0xbb: byte 0 stays 0x6b, byte 1 becomes 0xb5.
		{"EF ECT(0)", 0xba, 0x6b, 0xb5},
		// 0xb9 (EF, ECT(1)): byte 1 0x95 → 0xb5.
		{"EF ECT(1)", 0xb9, 0x6b, 0xb5},
		// 0x02 (ECT(0)): bytes 0x60 0x25 → 0x60 0x35.
		{"ECT(0)", 0x02, 0x60, 0x35},
		// 0xfd (DSCP all ones, ECT(1)): 0x6f 0xd5 → 0x6f 0xf5.
		{"ones ECT(1)", 0xfd, 0x6f, 0xf5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ipv6(tc.tc)
			orig := bytes.Clone(p)
			if !ECNCapable(p) {
				t.Fatal("ECNCapable = false")
			}
			if !MarkCE(p) {
				t.Fatal("MarkCE = false")
			}
			if p[0] != tc.wantB0 || p[1] != tc.want {
				t.Fatalf("bytes 0-1 %#02x %#02x, want %#02x %#02x", p[0], p[1], tc.wantB0, tc.want)
			}
			if got := p[0]<<4 | p[1]>>4; got != tc.tc|3 {
				t.Fatalf("traffic class %#02x, want %#02x", got, tc.tc|3)
			}
			if !bytes.Equal(p[2:], orig[2:]) || p[1]&0x0f != 0x5 {
				t.Fatal("flow label or later bytes changed")
			}
			marked := bytes.Clone(p)
			if !MarkCE(p) || !bytes.Equal(p, marked) {
				t.Fatal("MarkCE on CE changed the packet or reported false")
			}
		})
	}
}

func TestMarkCENotECT(t *testing.T) {
	for name, p := range map[string][]byte{
		"IPv4 Not-ECT":    ipv4(0x00),
		"IPv4 EF Not-ECT": ipv4(0xb8),
		"IPv6 Not-ECT":    ipv6(0x00),
		"IPv6 EF Not-ECT": ipv6(0xb8),
	} {
		orig := bytes.Clone(p)
		if ECNCapable(p) {
			t.Errorf("%s: ECNCapable = true", name)
		}
		if MarkCE(p) || !bytes.Equal(p, orig) {
			t.Errorf("%s: MarkCE reported true or changed the packet", name)
		}
	}
}

func TestMarkCERejects(t *testing.T) {
	v4, v6 := ipv4(0x02), ipv6(0x02)
	// A version-4 header that claims IHL 4 (16 bytes) is malformed.
	badIHL := ipv4(0x02)
	badIHL[0] = 0x44
	v5 := ipv4(0x02)
	v5[0] = 0x55
	v0 := ipv6(0x02)
	v0[0] &= 0x0f
	for name, p := range map[string][]byte{
		"nil":          nil,
		"empty":        {},
		"one byte v4":  {0x45},
		"IPv4 19":      v4[:19],
		"IPv6 39":      v6[:39],
		"IPv6 2":       v6[:2],
		"IPv4 IHL 4":   badIHL,
		"version 5":    v5,
		"version 0":    v0,
		"IPv6 bytes 1": {0x60},
	} {
		orig := bytes.Clone(p)
		if ECNCapable(p) {
			t.Errorf("%s: ECNCapable = true", name)
		}
		if MarkCE(p) {
			t.Errorf("%s: MarkCE = true", name)
		}
		if !bytes.Equal(p, orig) {
			t.Errorf("%s: packet changed", name)
		}
	}
	// The shortest complete headers are accepted.
	if !MarkCE(bytes.Clone(v4[:20])) || !MarkCE(bytes.Clone(v6[:40])) {
		t.Error("complete headers without payload rejected")
	}
}

func TestECNCapable(t *testing.T) {
	for _, tc := range []struct {
		p    []byte
		want bool
	}{
		{ipv4(0x00), false}, {ipv4(0x01), true}, {ipv4(0x02), true}, {ipv4(0x03), true},
		{ipv4(0xfc), false}, {ipv4(0xfe), true},
		{ipv6(0x00), false}, {ipv6(0x01), true}, {ipv6(0x02), true}, {ipv6(0x03), true},
		{ipv6(0xfc), false}, {ipv6(0xfe), true},
	} {
		if got := ECNCapable(tc.p); got != tc.want {
			t.Errorf("ECNCapable(% x) = %v, want %v", tc.p[:2], got, tc.want)
		}
	}
}
