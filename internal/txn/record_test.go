package txn

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
)

func sampleTxn() *Txn {
	return &Txn{
		ID: "tx-1", ProducerID: 12, ProducerEpoch: 2, PrevProducerID: 11, NextProducerID: 10,
		LastProducerEpoch: 1, TimeoutMs: 60000, Status: PrepareCommit,
		Partitions: []TopicPartition{{"__consumer_offsets", 7}, {"topic1", 0}, {"topic1", 1}, {"topic2", 5}},
		Groups:     []string{"g"}, StartMs: 100, LastUpdateMs: 123, ClientVersion: TV2,
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, want := range []*Txn{
		sampleTxn(),
		{ID: "e", ProducerID: 1, ProducerEpoch: 0, PrevProducerID: NoProducerID, NextProducerID: NoProducerID,
			LastProducerEpoch: NoEpoch, TimeoutMs: 1000, Status: Empty, StartMs: -1, LastUpdateMs: 5},
	} {
		r := record(want)
		id, err := DecodeKey(r.Key)
		if err != nil || id != want.ID {
			t.Fatalf("key: %q %v", id, err)
		}
		got, err := DecodeValue(id, r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip:\ngot  %+v\nwant %+v", got, want)
		}
	}
}

// TestRecordKafkaBytes checks the layout against bytes built field by
// field from Kafka's TransactionLogKey and TransactionLogValue schemas.
func TestRecordKafkaBytes(t *testing.T) {
	key := []byte{0, 0, 0, 4, 't', 'x', '-', '1'}
	if got := AppendKey(nil, "tx-1"); !bytes.Equal(got, key) {
		t.Fatalf("key % x", got)
	}

	// Version 0, as Kafka writes it for transaction versions 0 and 1.
	v0 := kbin.AppendInt16(nil, 0)
	v0 = kbin.AppendInt64(v0, 12)
	v0 = kbin.AppendInt16(v0, 2)
	v0 = kbin.AppendInt32(v0, 60000)
	v0 = kbin.AppendInt8(v0, 1) // Ongoing
	v0 = kbin.AppendArrayLen(v0, 2)
	v0 = kbin.AppendString(v0, "b")
	v0 = kbin.AppendArrayLen(v0, 1)
	v0 = kbin.AppendInt32(v0, 3)
	v0 = kbin.AppendString(v0, "a")
	v0 = kbin.AppendArrayLen(v0, 2)
	v0 = kbin.AppendInt32(v0, 1)
	v0 = kbin.AppendInt32(v0, 0)
	v0 = kbin.AppendInt64(v0, 123)
	v0 = kbin.AppendInt64(v0, 100)
	got, err := DecodeValue("x", v0)
	if err != nil {
		t.Fatal(err)
	}
	want := &Txn{ID: "x", ProducerID: 12, ProducerEpoch: 2, PrevProducerID: NoProducerID, NextProducerID: NoProducerID,
		LastProducerEpoch: NoEpoch, TimeoutMs: 60000, Status: Ongoing,
		Partitions: []TopicPartition{{"a", 0}, {"a", 1}, {"b", 3}}, StartMs: 100, LastUpdateMs: 123}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("v0:\ngot  %+v\nwant %+v", got, want)
	}

	// Version 1 with Kafka's tags 0-2 and Berth's 1000-1001.
	v1 := kbin.AppendInt16(nil, 1)
	v1 = kbin.AppendInt64(v1, 12)
	v1 = kbin.AppendInt16(v1, 2)
	v1 = kbin.AppendInt32(v1, 60000)
	v1 = kbin.AppendInt8(v1, 2)
	v1 = kbin.AppendCompactArrayLen(v1, 3)
	v1 = kbin.AppendCompactString(v1, "__consumer_offsets")
	v1 = kbin.AppendCompactArrayLen(v1, 1)
	v1 = kbin.AppendInt32(v1, 7)
	v1 = kbin.AppendUvarint(v1, 0)
	v1 = kbin.AppendCompactString(v1, "topic1")
	v1 = kbin.AppendCompactArrayLen(v1, 2)
	v1 = kbin.AppendInt32(v1, 0)
	v1 = kbin.AppendInt32(v1, 1)
	v1 = kbin.AppendUvarint(v1, 0)
	v1 = kbin.AppendCompactString(v1, "topic2")
	v1 = kbin.AppendCompactArrayLen(v1, 1)
	v1 = kbin.AppendInt32(v1, 5)
	v1 = kbin.AppendUvarint(v1, 0)
	v1 = kbin.AppendInt64(v1, 123)
	v1 = kbin.AppendInt64(v1, 100)
	v1 = kbin.AppendUvarint(v1, 5)
	v1 = append(v1, 0, 8)
	v1 = kbin.AppendInt64(v1, 11)
	v1 = append(v1, 1, 8)
	v1 = kbin.AppendInt64(v1, 10)
	v1 = append(v1, 2, 2)
	v1 = kbin.AppendInt16(v1, 2)
	v1 = kbin.AppendUvarint(v1, 1000)
	v1 = append(v1, 2)
	v1 = kbin.AppendInt16(v1, 1)
	v1 = kbin.AppendUvarint(v1, 1001)
	v1 = append(v1, 3, 2, 2, 'g')
	if got := AppendValue(nil, sampleTxn()); !bytes.Equal(got, v1) {
		t.Fatalf("v1:\ngot  % x\nwant % x", got, v1)
	}
}

func TestRecordCorrupt(t *testing.T) {
	v := AppendValue(nil, sampleTxn())
	for name, b := range map[string][]byte{
		"truncated":   v[:len(v)-1],
		"trailing":    append(append([]byte{}, v...), 0),
		"version 2":   append([]byte{0, 2}, v[2:]...),
		"status 9":    func() []byte { c := append([]byte{}, v...); c[16] = 9; return c }(),
		"empty value": {},
	} {
		if _, err := DecodeValue("x", b); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := DecodeKey([]byte{0, 1, 0, 0}); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("key version 1: %v", err)
	}
	if _, err := DecodeKey([]byte{0, 0, 0, 9, 'a'}); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("short key: %v", err)
	}
	p := NewPartition(Defaults(), nil)
	if err := p.Replay([]byte{0, 1, 0, 0}, v); err != nil {
		t.Errorf("unknown key version is skipped: %v", err)
	}
	if err := p.Replay(AppendKey(nil, "x"), v[:5]); !errors.Is(err, ErrCorruptRecord) || len(p.txns) != 0 {
		t.Errorf("corrupt value: %v, %d txns", err, len(p.txns))
	}
}

// FuzzDecodeRecord decodes arbitrary keys and values: no panic, and what
// decodes re-encodes to a value that decodes to the same metadata.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(AppendKey(nil, "tx-1"), AppendValue(nil, sampleTxn()))
	f.Add(AppendKey(nil, ""), []byte{0, 0})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		p := NewPartition(Defaults(), nil)
		_ = p.Replay(key, value)
		id, err := DecodeKey(key)
		if err != nil {
			return
		}
		if !bytes.Equal(AppendKey(nil, id), key) {
			t.Fatalf("key does not re-encode")
		}
		got, err := DecodeValue(id, value)
		if err != nil {
			return
		}
		again, err := DecodeValue(id, AppendValue(nil, got))
		if err != nil {
			t.Fatalf("re-encoded value: %v", err)
		}
		if !reflect.DeepEqual(got, again) {
			t.Fatalf("re-encode differs:\n%+v\n%+v", got, again)
		}
	})
}

func TestPartitionFor(t *testing.T) {
	// Kafka's placement: abs("tx-1".hashCode()) % 50.
	var h int32
	for _, c := range "tx-1" {
		h = 31*h + c
	}
	if h < 0 {
		h = -h
	}
	if got := PartitionFor("tx-1", 50); got != h%50 {
		t.Fatalf("PartitionFor = %d, want %d", got, h%50)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := Defaults().Validate(); err != nil {
		t.Fatal(err)
	}
	c := Defaults()
	c.MaxTimeout = 0
	if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatal(err)
	}
}

func TestFencedFor(t *testing.T) {
	if got := FencedFor(kerr.ProducerFenced, 22, 3); got != kerr.InvalidProducerEpoch {
		t.Fatalf("InitProducerId v3: %v", got)
	}
	if got := FencedFor(kerr.ProducerFenced, 22, 4); got != kerr.ProducerFenced {
		t.Fatalf("InitProducerId v4: %v", got)
	}
	if got := FencedFor(kerr.ProducerFenced, 26, 1); got != kerr.InvalidProducerEpoch {
		t.Fatalf("EndTxn v1: %v", got)
	}
	if got := FencedFor(kerr.ConcurrentTransactions, 26, 1); got != kerr.ConcurrentTransactions {
		t.Fatalf("other errors: %v", got)
	}
}
