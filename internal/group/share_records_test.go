package group

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// TestShareRecordBytes pins the byte layout of the records against
// Kafka's schemas.
func TestShareRecordBytes(t *testing.T) {
	rack := "r"
	m := &shareMember{id: "m", rackID: &rack, clientID: "c", clientHost: "h", topics: []string{"t"},
		epoch: 3, prevEpoch: 2, assigned: shareAssignment{shareFakeID("t"): {1}}}
	tid := shareFakeID("t")
	for _, c := range []struct {
		name       string
		rec        Record
		key, value []byte
	}{
		{"metadata", shareEpochRecord("g", 5, 7),
			[]byte{0, 11, 0, 1, 'g'},
			[]byte{0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 7, 0}},
		{"target metadata", shareTargetEpochRecord("g", 5),
			[]byte{0, 12, 0, 1, 'g'},
			[]byte{0, 0, 0, 0, 0, 5, 0}},
		{"member", shareMemberRecord("g", m),
			[]byte{0, 10, 0, 1, 'g', 0, 1, 'm'},
			[]byte{0, 0, 2, 'r', 2, 'c', 2, 'h', 2, 2, 't', 0}},
		{"target", shareTargetRecord("g", "m", m.assigned),
			[]byte{0, 13, 0, 1, 'g', 0, 1, 'm'},
			append(append([]byte{0, 0, 2}, tid[:]...), 2, 0, 0, 0, 1, 0, 0)},
		{"current", shareCurrentRecord("g", m),
			[]byte{0, 14, 0, 1, 'g', 0, 1, 'm'},
			append(append([]byte{0, 0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 2}, tid[:]...), 2, 0, 0, 0, 1, 0, 0)},
	} {
		if !bytes.Equal(c.rec.Key, c.key) {
			t.Errorf("%s key: %v, want %v", c.name, c.rec.Key, c.key)
		}
		if !bytes.Equal(c.rec.Value, c.value) {
			t.Errorf("%s value: %v, want %v", c.name, c.rec.Value, c.value)
		}
		if !isShareRecordKey(c.rec.Key) {
			t.Errorf("%s: not a share group key", c.name)
		}
		if id, err := shareRecordGroupID(c.rec.Key); err != nil || id != "g" {
			t.Errorf("%s: group id %q, %v", c.name, id, err)
		}
	}
	if isShareRecordKey([]byte{0, 3, 0, 1, 'g'}) || isShareRecordKey([]byte{0, 1}) || isShareRecordKey(nil) {
		t.Error("consumer group and offset keys taken for share group keys")
	}
}

// TestShareRecordCorrupt: every truncation of a valid value is refused
// with errCorruptShareRecord, as are trailing bytes.
func TestShareRecordCorrupt(t *testing.T) {
	m := &shareMember{id: "m", clientID: "c", topics: []string{"t", "u"}, assigned: shareAssignment{shareFakeID("t"): {0, 1}}}
	for _, r := range []Record{
		shareEpochRecord("g", 1, 2), shareTargetEpochRecord("g", 1), shareMemberRecord("g", m),
		shareTargetRecord("g", "m", m.assigned), shareCurrentRecord("g", m),
	} {
		for n := range len(r.Value) {
			l := newShareLoader()
			if err := l.Add(Record{Key: r.Key, Value: r.Value[:n]}); !errors.Is(err, errCorruptShareRecord) {
				t.Fatalf("key %v value cut at %d: %v", r.Key, n, err)
			}
		}
		l := newShareLoader()
		if err := l.Add(Record{Key: r.Key, Value: append(bytes.Clone(r.Value), 0)}); !errors.Is(err, errCorruptShareRecord) {
			t.Fatalf("key %v with a trailing byte: %v", r.Key, err)
		}
		for n := range len(r.Key) {
			if err := l.Add(Record{Key: r.Key[:n], Value: r.Value}); !errors.Is(err, errCorruptShareRecord) {
				t.Fatalf("key %v cut at %d: %v", r.Key, n, err)
			}
		}
	}
}

// FuzzShareLoader: no input makes the loader panic, and whatever it
// loads describes.
func FuzzShareLoader(f *testing.F) {
	m := &shareMember{id: "m", clientID: "c", topics: []string{"t"}, assigned: shareAssignment{shareFakeID("t"): {0}}}
	for _, r := range []Record{
		shareEpochRecord("g", 1, 2), shareTargetEpochRecord("g", 1), shareMemberRecord("g", m),
		shareTargetRecord("g", "m", m.assigned), shareCurrentRecord("g", m),
	} {
		f.Add(r.Key, r.Value)
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		l := newShareLoader()
		_ = l.Add(shareEpochRecord("g", 1, 0))
		_ = l.Add(Record{Key: key, Value: value})
		for _, g := range l.Finish(defaultShareGroupConfig(), shareFakeTopics{"t": 2}, time.Unix(0, 0)) {
			g.Describe()
			g.Snapshot()
		}
	})
}
