package group

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestOffsetRecordRoundTrip(t *testing.T) {
	for _, o := range []offset{
		{offset: 42, leaderEpoch: 7, metadata: "m", commitMillis: 1700000000000},
		{offset: 0, leaderEpoch: -1, metadata: "", commitMillis: 1},
		{offset: 9, leaderEpoch: -1, commitMillis: 5, expireMillis: 3600005}, // written as value v1
	} {
		r := offsetRecord("g", topicPartition{"t", 3}, o)
		k, err := decodeKey(r.Key)
		if err != nil {
			t.Fatal(err)
		}
		if !k.isOffset || k.group != "g" || k.tp != (topicPartition{"t", 3}) {
			t.Fatalf("key: %+v", k)
		}
		got, err := decodeOffsetValue(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if got != o {
			t.Fatalf("got %+v, want %+v", got, o)
		}
		if tomb := offsetTombstone("g", topicPartition{"t", 3}); tomb.Value != nil || !bytes.Equal(tomb.Key, r.Key) {
			t.Fatalf("tombstone %+v", tomb)
		}
	}
}

// Kafka's key layout: int16 version, string group, string topic, int32
// partition; version 1 is what Kafka writes.
func TestOffsetKeyBytes(t *testing.T) {
	want := []byte{0, 1, 0, 1, 'g', 0, 1, 't', 0, 0, 0, 3}
	if got := offsetKey("g", "t", 3); !bytes.Equal(got, want) {
		t.Fatalf("got %x, want %x", got, want)
	}
	if got := groupKey("g"); !bytes.Equal(got, []byte{0, 2, 0, 1, 'g'}) {
		t.Fatalf("group key %x", got)
	}
}

// Older value versions, as Kafka before 2.1 wrote them, still load.
func TestOffsetValueOldVersions(t *testing.T) {
	for v := int16(0); v <= 3; v++ {
		val := kmsg.OffsetCommitValue{Version: v, Offset: 10, LeaderEpoch: 4, Metadata: "x", CommitTimestamp: 99, ExpireTimestamp: 1000}
		o, err := decodeOffsetValue(val.AppendTo(nil))
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		want := offset{offset: 10, leaderEpoch: -1, metadata: "x", commitMillis: 99}
		if v == 1 {
			want.expireMillis = 1000
		}
		if v >= 3 {
			want.leaderEpoch = 4
		}
		if o != want {
			t.Fatalf("v%d: got %+v, want %+v", v, o, want)
		}
	}
	// key version 0 decodes like 1
	k := kmsg.OffsetCommitKey{Version: 0, Group: "g", Topic: "t", Partition: 1}
	dk, err := decodeKey(k.AppendTo(nil))
	if err != nil || !dk.isOffset || dk.tp.partition != 1 {
		t.Fatalf("key v0: %+v %v", dk, err)
	}
}

func TestGroupRecordRoundTrip(t *testing.T) {
	inst := "i"
	g := newGroup("g", 0, epoch)
	g.protocolType, g.protocol, g.generation = "consumer", "range", 5
	g.add(&member{id: "a-1", clientID: "a", clientHost: "/h", instanceID: &inst, protocolType: "consumer",
		sessionTimeout: 10e9, rebalanceTimeout: 30e9, protocols: []protocol{{"range", []byte("sub")}}, assignment: []byte("asg")})
	g.add(&member{id: "b-2", clientID: "b", clientHost: "/h", protocolType: "consumer",
		sessionTimeout: 10e9, rebalanceTimeout: 30e9, protocols: []protocol{{"range", []byte("sub2")}}})
	g.state = stateStable
	v := g.groupValue(nil)
	b := v.AppendTo(nil)
	got, err := decodeGroupValue(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("got %+v\nwant %+v", got, v)
	}
	lg := &loadingGroup{meta: got, offsets: map[topicPartition]offset{}}
	back := loadGroup("g", 0, lg, epoch)
	if back.state != stateStable || back.leader != "a-1" || back.generation != 5 || back.protocol != "range" ||
		len(back.members) != 2 || string(back.members["a-1"].assignment) != "asg" || *back.members["a-1"].instanceID != "i" ||
		back.static["i"] != "a-1" || string(back.members["b-2"].metadataFor("range")) != "sub2" {
		t.Fatalf("loaded %+v", back)
	}
	// Every value version Kafka has written decodes.
	for ver := int16(0); ver <= 3; ver++ {
		v.Version = ver
		if _, err := decodeGroupValue(v.AppendTo(nil)); err != nil {
			t.Fatalf("v%d: %v", ver, err)
		}
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	if _, err := decodeKey([]byte{0}); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("short key: %v", err)
	}
	if _, err := decodeKey([]byte{0, 1, 0, 9, 'g'}); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("truncated key: %v", err)
	}
	if _, err := decodeKey([]byte{0, 16, 0, 0}); !errors.Is(err, errSkipRecord) {
		t.Fatalf("regular expression key: %v", err)
	}
	if _, err := decodeKey([]byte{0, 5, 0, 1, 'g'}); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("member key without a member: %v", err)
	}
	if _, err := decodeOffsetValue([]byte{0, 3, 0}); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("short value: %v", err)
	}
	if _, err := decodeGroupValue([]byte{0, 3}); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("short group value: %v", err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(offsetKey("g", "t", 1), offsetRecord("g", topicPartition{"t", 1}, offset{offset: 1}).Value)
	g := newGroup("g", 0, epoch)
	f.Add(groupKey("g"), g.groupValue(nil).AppendTo(nil))
	var id [16]byte
	cur := currentValue{epoch: 2, prevEpoch: 1, assigned: assignment{id: {0, 1}}, revoking: assignment{}}
	f.Add(consumerMemberKey(recConsumerCurrent, "g", "m"), cur.appendTo(nil))
	f.Add(consumerMemberKey(recConsumerTarget, "g", "m"), targetValue(assignment{id: {2}}))
	mm := memberMetaValue{clientID: "c", topics: []string{"t"}}
	f.Add(consumerMemberKey(recConsumerMember, "g", "m"), mm.appendTo(nil))
	f.Add(consumerGroupKey(recConsumerMetadata, "g"), epochValue(3))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		c := New(Config{Logger: quietLogger()}, nil, nil)
		c.BeginLoad(0)
		c.LoadRecord(0, key, value)
		c.FinishLoad(0)
		c.Groups()
		c.Committed()
	})
}
