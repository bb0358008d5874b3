package fec

// store remembers the most recent source payloads, as source symbols
// (LenPrefix | payload), in a fixed number of slots reused first in, first out, with
// an open-addressing index from SourceID to slot (linear probing, deletion by
// backward shift, so no tombstones build up). Nothing allocates after newStore.
type store struct {
	ids   []SourceID
	used  []bool
	data  [][]byte // per slot, capacity LenPrefix+maxPayload
	next  int      // slot to fill next (the oldest when full)
	tab   []int32  // slot+1, 0 = empty
	mask  uint64
	shift uint
}

func newStore(slots, maxPayload int) *store {
	// The slots are source symbols the decoder hands to the codec: symbolBufs.
	s := &store{ids: make([]SourceID, slots), used: make([]bool, slots), data: symbolBufs(slots, LenPrefix+maxPayload)}
	bits := uint(1)
	for 1<<bits < 2*slots {
		bits++
	}
	s.tab = make([]int32, 1<<bits)
	s.mask = 1<<bits - 1
	s.shift = 64 - bits
	return s
}

func (s *store) home(id SourceID) uint64 {
	return (uint64(id.Flow)<<32 | uint64(id.Seq)) * 0x9E3779B97F4A7C15 >> s.shift
}

// pos returns the index position of id, or -1.
func (s *store) pos(id SourceID) int {
	for i := s.home(id); ; i = (i + 1) & s.mask {
		v := s.tab[i]
		if v == 0 {
			return -1
		}
		if s.ids[v-1] == id {
			return int(i)
		}
	}
}

// get returns the slot holding id, or -1.
func (s *store) get(id SourceID) int {
	p := s.pos(id)
	if p < 0 {
		return -1
	}
	return int(s.tab[p] - 1)
}

// put stores payload as id, evicting the oldest slot if all are used, and returns
// the slot; if id is already stored it keeps the first copy.
func (s *store) put(id SourceID, payload []byte) int {
	if sl := s.get(id); sl >= 0 {
		return sl
	}
	sl := s.next
	s.next++
	if s.next == len(s.ids) {
		s.next = 0
	}
	if s.used[sl] {
		s.del(s.pos(s.ids[sl]))
	}
	s.ids[sl], s.used[sl] = id, true
	d := s.data[sl][:LenPrefix+len(payload)]
	be.PutUint16(d, uint16(len(payload)))
	copy(d[LenPrefix:], payload)
	s.data[sl] = d
	i := s.home(id)
	for s.tab[i] != 0 {
		i = (i + 1) & s.mask
	}
	s.tab[i] = int32(sl + 1)
	return sl
}

// del empties index position p and shifts back the entries of its probe chain.
func (s *store) del(p int) {
	i := uint64(p)
	s.tab[i] = 0
	for j := (i + 1) & s.mask; s.tab[j] != 0; j = (j + 1) & s.mask {
		h := s.home(s.ids[s.tab[j]-1])
		// The entry at j may move to the hole at i unless its home lies
		// cyclically in (i, j].
		if (j-h)&s.mask >= (j-i)&s.mask {
			s.tab[i], s.tab[j] = s.tab[j], 0
			i = j
		}
	}
}

// payload returns the payload stored in slot sl.
func (s *store) payload(sl int) []byte { return s.data[sl][LenPrefix:] }

func (s *store) reset() {
	clear(s.used)
	clear(s.tab)
	s.next = 0
}
