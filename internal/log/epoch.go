package log

import "sort"

// epochEntry says leader epoch Epoch started at offset Start.
type epochEntry struct {
	Epoch int32
	Start int64
}

// epochCache is the leader-epoch cache behind OffsetForLeaderEpoch. Entries
// strictly increase in both epoch and start offset. Owned by Log.mu.
type epochCache struct {
	entries []epochEntry
	dirty   bool // changed since last persisted
}

func (c *epochCache) latest() int32 {
	if len(c.entries) == 0 {
		return -1
	}
	return c.entries[len(c.entries)-1].Epoch
}

// assign records that epoch starts at start, if epoch is newer than the
// latest. Entries starting at or after start are dropped first (they
// cannot hold data any more), as Kafka's LeaderEpochFileCache.assign does.
func (c *epochCache) assign(epoch int32, start int64) {
	if epoch < 0 || epoch <= c.latest() {
		return
	}
	for len(c.entries) > 0 && c.entries[len(c.entries)-1].Start >= start {
		c.entries = c.entries[:len(c.entries)-1]
	}
	c.entries = append(c.entries, epochEntry{epoch, start})
	c.dirty = true
}

// truncateFromEnd drops entries starting at or after end (log
// truncation), reporting whether there were any.
func (c *epochCache) truncateFromEnd(end int64) bool {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].Start >= end {
		n--
	}
	if n == len(c.entries) {
		return false
	}
	c.entries = c.entries[:n]
	c.dirty = true
	return true
}

// truncateFromStart drops entries wholly below start; the last entry
// starting below start is kept and moved up to start.
func (c *epochCache) truncateFromStart(start int64) {
	i := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].Start > start })
	if i == 0 {
		return
	}
	if i == 1 && c.entries[0].Start == start {
		return
	}
	e := c.entries[i-1]
	e.Start = start
	c.entries = append([]epochEntry{e}, c.entries[i:]...)
	c.dirty = true
}

// endOffsetFor implements Kafka's semantics: the largest epoch <= epoch and
// the start of the epoch after it (leo for the latest); -1, -1 if epoch is
// undefined, the cache is empty or epoch is above every known epoch.
func (c *epochCache) endOffsetFor(epoch int32, leo int64) (int32, int64) {
	if epoch < 0 || len(c.entries) == 0 {
		return -1, -1
	}
	if epoch == c.latest() {
		return epoch, leo
	}
	// first entry with Epoch > epoch
	i := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].Epoch > epoch })
	if i == len(c.entries) {
		return -1, -1
	}
	if i == 0 {
		return epoch, c.entries[0].Start
	}
	return c.entries[i-1].Epoch, c.entries[i].Start
}

func (c *epochCache) encode() []byte {
	es := make([][2]int64, len(c.entries))
	for i, e := range c.entries {
		es[i] = [2]int64{int64(e.Epoch), e.Start}
	}
	return encodeCheckpoint(es, 2)
}

func decodeEpochs(b []byte) ([]epochEntry, error) {
	es, err := decodeCheckpoint(b, 2)
	if err != nil {
		return nil, err
	}
	out := make([]epochEntry, 0, len(es))
	for i, e := range es {
		if e[0] < 0 || e[0] > 1<<31-1 || e[1] < 0 ||
			i > 0 && (int32(e[0]) <= out[i-1].Epoch || e[1] < out[i-1].Start) {
			return nil, errBadCheckpoint
		}
		out = append(out, epochEntry{int32(e[0]), e[1]})
	}
	return out, nil
}
