package metadata

import (
	"errors"
	"reflect"
	"testing"
)

func strp(s string) *string { return &s }

func TestClientQuotasApplySnapshotRestart(t *testing.T) {
	dir := t.TempDir()
	c := open(t, testConfig(dir))
	alice := []QuotaEntityPart{{Type: QuotaUser, Name: strp("alice")}, {Type: QuotaClientID}}
	ip := []QuotaEntityPart{{Type: QuotaIP, Name: strp("10.0.0.1")}}
	dflt := []QuotaEntityPart{{Type: QuotaUser}}
	if err := c.Propose(ctx(t),
		Record{SetClientQuotas: &SetClientQuotas{Entity: alice, Set: map[string]float64{"producer_byte_rate": 1024, "consumer_byte_rate": 2048}}},
		Record{SetClientQuotas: &SetClientQuotas{Entity: ip, Set: map[string]float64{"connection_creation_rate": 5}}},
		Record{SetClientQuotas: &SetClientQuotas{Entity: dflt, Set: map[string]float64{"producer_record_rate": 100}}},
	); err != nil {
		t.Fatal(err)
	}
	if err := c.Propose(ctx(t), Record{SetClientQuotas: &SetClientQuotas{Entity: alice, Delete: []string{"consumer_byte_rate"}}},
		Record{SetClientQuotas: &SetClientQuotas{Entity: dflt, Delete: []string{"producer_record_rate"}}}); err != nil {
		t.Fatal(err)
	}
	// Refused shapes: ip with user, a type twice, no type.
	for _, bad := range [][]QuotaEntityPart{
		{{Type: QuotaIP}, {Type: QuotaUser}},
		{{Type: QuotaUser}, {Type: QuotaUser, Name: strp("x")}},
		{},
		{{Type: "group"}},
	} {
		err := c.Propose(ctx(t), Record{SetClientQuotas: &SetClientQuotas{Entity: bad, Set: map[string]float64{"producer_byte_rate": 1}}})
		if !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("entity %v: %v, want ErrInvalidRecord", bad, err)
		}
	}
	want := map[QuotaEntity]map[string]float64{
		{User: Exact("alice"), ClientID: DefaultQuotaName}: {"producer_byte_rate": 1024},
		{IP: Exact("10.0.0.1")}:                            {"connection_creation_rate": 5},
	}
	if got := c.Image().ClientQuotas; !reflect.DeepEqual(got, want) {
		t.Fatalf("quotas %v, want %v", got, want)
	}
	// Snapshot round trip.
	im2, err := DecodeImage(EncodeImage(c.Image()))
	if err != nil || !reflect.DeepEqual(im2.ClientQuotas, want) {
		t.Fatalf("snapshot round trip: %v %v", im2, err)
	}
	// Restart: Close snapshots, Open replays.
	mustClose(t, c)
	c = open(t, testConfig(dir))
	if got := c.Image().ClientQuotas; !reflect.DeepEqual(got, want) {
		t.Fatalf("after restart %v, want %v", got, want)
	}
	// A crash copy replays the WAL (no final snapshot).
	if err := c.Propose(ctx(t), Record{SetClientQuotas: &SetClientQuotas{Entity: ip, Set: map[string]float64{"connection_creation_rate": 7}}}); err != nil {
		t.Fatal(err)
	}
	c2 := open(t, testConfig(copyDir(t, dir)))
	if got := c2.Image().ClientQuota(QuotaEntity{IP: Exact("10.0.0.1")}); got["connection_creation_rate"] != 7 {
		t.Fatalf("after crash replay %v", got)
	}
}

func TestDecodeImageWithoutQuotas(t *testing.T) {
	// An image written before quotas existed decodes with none.
	im, err := DecodeImage([]byte(`{"index":3,"clusterId":"x","nextProducerId":0,"brokers":[],"brokerConfigs":{},"topics":[]}`))
	if err != nil || len(im.ClientQuotas) != 0 || im.ClientQuotas == nil {
		t.Fatalf("%+v %v", im, err)
	}
}

func mustEntity(parts []QuotaEntityPart) QuotaEntity {
	e, err := ParseQuotaEntity(parts)
	if err != nil {
		panic(err)
	}
	return e
}
