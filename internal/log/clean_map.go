package log

import "hash/maphash"

// offsetMap maps a record key to the latest offset seen for it, in a fixed
// amount of memory, like Kafka's SkimpyOffsetMap: an open-addressing table
// of 24-byte slots holding a 128-bit hash of the key (never the key itself)
// and the offset. The hash is two 64-bit maphash values under independent
// random seeds, so the odds that two keys of one clean collide, which would
// drop the older key's latest record, are about n²/2^129: nil in practice
// for any n the memory bound allows, and no producer can aim for a
// collision without knowing the per-process seeds.
//
// The table is filled to at most mapLoadFactor (Kafka's
// log.cleaner.io.buffer.load.factor default), which keeps linear probing
// short and guarantees a probe always meets an empty slot.
type offsetMap struct {
	seed1, seed2 maphash.Seed
	slots        []mapSlot
	n            int // used slots
	limit        int // most slots that may be used
}

// mapSlot is empty when off is 0; otherwise it holds offset off-1.
type mapSlot struct {
	h1, h2 uint64
	off    int64
}

const (
	mapSlotSize   = 24
	mapLoadFactor = 0.9
)

// newOffsetMap sizes the table to memBytes, or to fewer slots when at most
// maxKeys keys can come (the number of offsets in the dirty section): small
// logs do not pay for the whole budget.
func newOffsetMap(memBytes, maxKeys int64) *offsetMap {
	n := memBytes / mapSlotSize
	if want := int64(float64(maxKeys)/mapLoadFactor) + 2; maxKeys >= 0 && want < n {
		n = want
	}
	n = max(n, 2)
	return &offsetMap{
		seed1: maphash.MakeSeed(),
		seed2: maphash.MakeSeed(),
		slots: make([]mapSlot, n),
		limit: max(int(float64(n)*mapLoadFactor), 1),
	}
}

type keyHash struct{ h1, h2 uint64 }

func (m *offsetMap) hash(key []byte) keyHash {
	return keyHash{maphash.Bytes(m.seed1, key), maphash.Bytes(m.seed2, key)}
}

// find returns the slot holding h, or the empty slot where it would go.
func (m *offsetMap) find(h keyHash) (int, bool) {
	n := uint64(len(m.slots))
	for i := h.h1 % n; ; i = (i + 1) % n {
		s := &m.slots[i]
		if s.off == 0 {
			return int(i), false
		}
		if s.h1 == h.h1 && s.h2 == h.h2 {
			return int(i), true
		}
	}
}

// get returns the latest offset recorded for the key hashed to h.
func (m *offsetMap) get(h keyHash) (int64, bool) {
	i, ok := m.find(h)
	if !ok {
		return -1, false
	}
	return m.slots[i].off - 1, true
}

// has reports whether h is in the map.
func (m *offsetMap) has(h keyHash) bool {
	_, ok := m.find(h)
	return ok
}

// room is how many new keys still fit.
func (m *offsetMap) room() int { return m.limit - m.n }

// put records off as the latest offset for h. The caller checks room
// first; put panics rather than overfill the table.
func (m *offsetMap) put(h keyHash, off int64) {
	i, ok := m.find(h)
	if !ok {
		if m.n >= m.limit {
			panic("log: offset map overfilled")
		}
		m.n++
		m.slots[i].h1, m.slots[i].h2 = h.h1, h.h2
	}
	m.slots[i].off = off + 1
}
