package share

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// TestGroupRecordBytes pins the byte layout of the records against
// Kafka's schemas.
func TestGroupRecordBytes(t *testing.T) {
	rack := "r"
	m := &groupMember{id: "m", rackID: &rack, clientID: "c", clientHost: "h", topics: []string{"t"},
		epoch: 3, prevEpoch: 2, assigned: GroupAssignment{groupFakeID("t"): {1}}}
	tid := groupFakeID("t")
	for _, c := range []struct {
		name       string
		rec        GroupRecord
		key, value []byte
	}{
		{"metadata", groupEpochRecord("g", 5, 7),
			[]byte{0, 11, 0, 1, 'g'},
			[]byte{0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 7, 0}},
		{"target metadata", groupTargetEpochRecord("g", 5),
			[]byte{0, 12, 0, 1, 'g'},
			[]byte{0, 0, 0, 0, 0, 5, 0}},
		{"member", groupMemberRecord("g", m),
			[]byte{0, 10, 0, 1, 'g', 0, 1, 'm'},
			[]byte{0, 0, 2, 'r', 2, 'c', 2, 'h', 2, 2, 't', 0}},
		{"target", groupTargetRecord("g", "m", m.assigned),
			[]byte{0, 13, 0, 1, 'g', 0, 1, 'm'},
			append(append([]byte{0, 0, 2}, tid[:]...), 2, 0, 0, 0, 1, 0, 0)},
		{"current", groupCurrentRecord("g", m),
			[]byte{0, 14, 0, 1, 'g', 0, 1, 'm'},
			append(append([]byte{0, 0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 2}, tid[:]...), 2, 0, 0, 0, 1, 0, 0)},
	} {
		if !bytes.Equal(c.rec.Key, c.key) {
			t.Errorf("%s key: %v, want %v", c.name, c.rec.Key, c.key)
		}
		if !bytes.Equal(c.rec.Value, c.value) {
			t.Errorf("%s value: %v, want %v", c.name, c.rec.Value, c.value)
		}
		if !IsGroupRecordKey(c.rec.Key) {
			t.Errorf("%s: not a share group key", c.name)
		}
		if id, err := GroupRecordGroupID(c.rec.Key); err != nil || id != "g" {
			t.Errorf("%s: group id %q, %v", c.name, id, err)
		}
	}
	if IsGroupRecordKey([]byte{0, 3, 0, 1, 'g'}) || IsGroupRecordKey([]byte{0, 1}) || IsGroupRecordKey(nil) {
		t.Error("consumer group and offset keys taken for share group keys")
	}
}

// TestGroupRecordCorrupt: every truncation of a valid value is refused
// with ErrCorruptGroupRecord, as are trailing bytes.
func TestGroupRecordCorrupt(t *testing.T) {
	m := &groupMember{id: "m", clientID: "c", topics: []string{"t", "u"}, assigned: GroupAssignment{groupFakeID("t"): {0, 1}}}
	for _, r := range []GroupRecord{
		groupEpochRecord("g", 1, 2), groupTargetEpochRecord("g", 1), groupMemberRecord("g", m),
		groupTargetRecord("g", "m", m.assigned), groupCurrentRecord("g", m),
	} {
		for n := range len(r.Value) {
			l := NewGroupLoader()
			if err := l.Add(GroupRecord{Key: r.Key, Value: r.Value[:n]}); !errors.Is(err, ErrCorruptGroupRecord) {
				t.Fatalf("key %v value cut at %d: %v", r.Key, n, err)
			}
		}
		l := NewGroupLoader()
		if err := l.Add(GroupRecord{Key: r.Key, Value: append(bytes.Clone(r.Value), 0)}); !errors.Is(err, ErrCorruptGroupRecord) {
			t.Fatalf("key %v with a trailing byte: %v", r.Key, err)
		}
		for n := range len(r.Key) {
			if err := l.Add(GroupRecord{Key: r.Key[:n], Value: r.Value}); !errors.Is(err, ErrCorruptGroupRecord) {
				t.Fatalf("key %v cut at %d: %v", r.Key, n, err)
			}
		}
	}
}

// FuzzGroupLoader: no input makes the loader panic, and whatever it
// loads describes.
func FuzzGroupLoader(f *testing.F) {
	m := &groupMember{id: "m", clientID: "c", topics: []string{"t"}, assigned: GroupAssignment{groupFakeID("t"): {0}}}
	for _, r := range []GroupRecord{
		groupEpochRecord("g", 1, 2), groupTargetEpochRecord("g", 1), groupMemberRecord("g", m),
		groupTargetRecord("g", "m", m.assigned), groupCurrentRecord("g", m),
	} {
		f.Add(r.Key, r.Value)
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		l := NewGroupLoader()
		_ = l.Add(groupEpochRecord("g", 1, 0))
		_ = l.Add(GroupRecord{Key: key, Value: value})
		for _, g := range l.Finish(DefaultGroupConfig(), groupFakeTopics{"t": 2}, time.Unix(0, 0)) {
			g.Describe()
			g.Snapshot()
		}
	})
}
