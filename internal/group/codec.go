package group

// The pieces of Kafka's flexible group record values (in
// __consumer_offsets) that consumer groups (consumer_records.go) and
// share groups (share_records.go) both write and read: tag buffers,
// string arrays and []TopicPartitions assignments.

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
)

// appendTags appends an empty tag buffer.
func appendTags(b []byte) []byte { return kbin.AppendUvarint(b, 0) }

// appendCompactStrings appends a compact array of compact strings.
func appendCompactStrings(b []byte, ss []string) []byte {
	b = kbin.AppendCompactArrayLen(b, len(ss))
	for _, s := range ss {
		b = kbin.AppendCompactString(b, s)
	}
	return b
}

// appendTopicPartitions appends an assignment as Kafka's []TopicPartitions,
// topics in id order.
func appendTopicPartitions(b []byte, a map[[16]byte][]int32) []byte {
	ids := slices.SortedFunc(maps.Keys(a), func(x, y [16]byte) int { return slices.Compare(x[:], y[:]) })
	b = kbin.AppendCompactArrayLen(b, len(ids))
	for _, id := range ids {
		b = kbin.AppendUuid(b, id)
		ps := a[id]
		b = kbin.AppendCompactArrayLen(b, len(ps))
		for _, p := range ps {
			b = kbin.AppendInt32(b, p)
		}
		b = appendTags(b)
	}
	return b
}

// flexReader reads a flexible value.
type flexReader struct{ kbin.Reader }

// SkipTags skips a tag buffer (fields Kafka added after version 0).
func (r *flexReader) SkipTags() {
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		r.Uvarint() // tag
		r.Span(int(r.Uvarint()))
	}
}

// CompactStrings reads a compact array of compact strings (nil for null).
func (r *flexReader) CompactStrings() []string {
	n := r.CompactArrayLen()
	if n < 0 {
		return nil
	}
	out := make([]string, 0, min(n, 1024))
	for i := int32(0); i < n && r.Ok(); i++ {
		out = append(out, r.CompactString())
	}
	return out
}

// TopicPartitions reads []TopicPartitions; each topic's partitions come
// back sorted and without duplicates, topics named twice merged.
func (r *flexReader) TopicPartitions() map[[16]byte][]int32 {
	a := make(map[[16]byte][]int32)
	n := r.CompactArrayLen()
	for i := int32(0); i < n && r.Ok(); i++ {
		id := r.Uuid()
		np := r.CompactArrayLen()
		ps := make([]int32, 0, min(max(np, 0), 1024))
		for j := int32(0); j < np && r.Ok(); j++ {
			ps = append(ps, r.Int32())
		}
		r.SkipTags()
		if len(ps) > 0 {
			slices.Sort(ps)
			a[id] = slices.Compact(append(a[id], ps...))
		}
	}
	return a
}
