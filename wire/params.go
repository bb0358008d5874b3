package wire

import (
	"fmt"
)

// SessionParams are the client's wishes for how the server runs its side of the
// session, carried (encrypted) in the handshake initiation payload.
type SessionParams struct {
	Scheduler   string
	Reorder     string
	ReorderHold uint32   // µs; 0 = server default
	Weights     []uint16 // per-mille by client path id
	Tiers       []uint8  // priority tier by client path id (ParamTiers)
	Congestion  string
	Recovery    string
	Rekey       bool // ParamRekey
}

// AppendParams encodes p as TLVs: type u8 | len u8 | value.
func AppendParams(b []byte, p SessionParams) ([]byte, error) {
	str := func(t byte, s string) error {
		if len(s) > 255 {
			return fmt.Errorf("wire: parameter %d too long", t)
		}
		if s != "" {
			b = append(b, t, byte(len(s)))
			b = append(b, s...)
		}
		return nil
	}
	if err := str(ParamScheduler, p.Scheduler); err != nil {
		return nil, err
	}
	if err := str(ParamReorder, p.Reorder); err != nil {
		return nil, err
	}
	if err := str(ParamCongestion, p.Congestion); err != nil {
		return nil, err
	}
	if err := str(ParamRecovery, p.Recovery); err != nil {
		return nil, err
	}
	if p.Rekey {
		b = append(b, ParamRekey, 0)
	}
	if p.ReorderHold != 0 {
		b = append(b, ParamReorderHold, 4)
		b = be.AppendUint32(b, p.ReorderHold)
	}
	if len(p.Weights) > 0 {
		if len(p.Weights) > MaxWeights {
			return nil, fmt.Errorf("wire: %d weights, at most %d", len(p.Weights), MaxWeights)
		}
		b = append(b, ParamWeights, byte(2*len(p.Weights)))
		for _, w := range p.Weights {
			b = be.AppendUint16(b, w)
		}
	}
	if len(p.Tiers) > 0 {
		if len(p.Tiers) > MaxWeights {
			return nil, fmt.Errorf("wire: %d tiers, at most %d", len(p.Tiers), MaxWeights)
		}
		b = append(b, ParamTiers, byte(len(p.Tiers)))
		b = append(b, p.Tiers...)
	}
	return b, nil
}

// ParseParams decodes TLVs; unknown types are skipped so later versions can add
// parameters, malformed lengths are errors.
func ParseParams(b []byte) (SessionParams, error) {
	var p SessionParams
	for len(b) > 0 {
		if len(b) < 2 {
			return p, ErrShort
		}
		t, n := b[0], int(b[1])
		if len(b) < 2+n {
			return p, ErrShort
		}
		v := b[2 : 2+n]
		b = b[2+n:]
		switch t {
		case ParamScheduler:
			p.Scheduler = string(v)
		case ParamReorder:
			p.Reorder = string(v)
		case ParamCongestion:
			p.Congestion = string(v)
		case ParamRecovery:
			p.Recovery = string(v)
		case ParamRekey:
			p.Rekey = true
		case ParamReorderHold:
			if n != 4 {
				return p, ErrBadLength
			}
			p.ReorderHold = be.Uint32(v)
		case ParamWeights:
			if n%2 != 0 || n/2 > MaxWeights {
				return p, ErrBadLength
			}
			p.Weights = make([]uint16, n/2)
			for i := range p.Weights {
				p.Weights[i] = be.Uint16(v[2*i:])
			}
		case ParamTiers:
			if n > MaxWeights {
				return p, ErrBadLength
			}
			p.Tiers = append([]uint8(nil), v...)
		}
	}
	return p, nil
}
