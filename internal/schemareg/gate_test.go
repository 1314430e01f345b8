package schemareg

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
)

// wire is data in the registry's wire format for schema id.
func wire(id int, payload string) []byte {
	b := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(id))
	return append(b, payload...)
}

func idHeader(id int) []byte { return wire(id, "") }

func TestCheckWire(t *testing.T) {
	r := New(nil)
	ctx := context.Background()
	orders := mustRegister(t, r, "orders-value", ordersV1)
	other := mustRegister(t, r, "payments-value", `{"type":"record","name":"Payment","namespace":"pay","fields":[{"name":"id","type":"string"}]}`)
	byName := mustRegister(t, r, "pay.Payment", `{"type":"record","name":"Payment","namespace":"pay","fields":[{"name":"id","type":"string"}]}`)
	if byName != other {
		t.Fatalf("same content, ids %d and %d", other, byName)
	}
	topicRecord := mustRegister(t, r, "orders-pay.Payment", `{"type":"record","name":"Payment","namespace":"pay","fields":[{"name":"id","type":"string"}]}`)
	jsonID, err := r.Register(ctx, "events-value", SchemaRequest{SchemaType: TypeJSON,
		Schema: `{"title":"Event","type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`}, false)
	if err != nil {
		t.Fatal(err)
	}
	prim := mustRegister(t, r, "plain-value", `"string"`)

	topicName := GateCheck{Topic: "orders", Strategy: TopicNameStrategy}
	for _, tc := range []struct {
		name   string
		check  GateCheck
		data   []byte
		header []byte
		want   string // a part of the refusal; "" passes
	}{
		{"registered under topic-value", topicName, wire(orders, "x"), nil, ""},
		{"raw JSON", topicName, []byte(`{"id":"HC-2048"}`), nil, "does not start with the schema registry wire format"},
		{"too short", topicName, []byte{0, 0, 1}, nil, "wire format"},
		{"null value", topicName, nil, nil, "wire format"},
		{"magic 1", topicName, append([]byte{1}, wire(orders, "")[1:]...), nil, "wire format"},
		{"unknown id", topicName, wire(9999, ""), nil, "schema id 9999 is not registered"},
		{"id of another subject", topicName, wire(other, ""), nil, "not registered under subject orders-value"},
		{"key side", GateCheck{Topic: "orders", Key: true, Strategy: TopicNameStrategy}, wire(orders, ""), nil, "not registered under subject orders-key"},
		{"header form", topicName, []byte(`{"raw":"json"}`), idHeader(orders), ""},
		{"bad header", topicName, []byte(`x`), []byte{0, 1}, "schema id header"},
		{"record name", GateCheck{Topic: "orders", Strategy: RecordNameStrategy}, wire(other, ""), nil, ""},
		{"record name, wrong subject", GateCheck{Topic: "orders", Strategy: RecordNameStrategy}, wire(orders, ""), nil, "not registered under subject Order"},
		{"topic record name", GateCheck{Topic: "orders", Strategy: TopicRecordNameStrategy}, wire(topicRecord, ""), nil, ""},
		{"topic record name, other topic", GateCheck{Topic: "refunds", Strategy: TopicRecordNameStrategy}, wire(topicRecord, ""), nil, "refunds-pay.Payment"},
		{"record name of a primitive", GateCheck{Topic: "plain", Strategy: RecordNameStrategy}, wire(prim, ""), nil, "named Avro schema"},
		{"JSON title", GateCheck{Topic: "events", Strategy: RecordNameStrategy}, wire(jsonID, `{"n":1}`), nil, "not registered under subject Event"},
		{"JSON payload valid", GateCheck{Topic: "events", Payload: true}, wire(jsonID, `{"n":1}`), nil, ""},
		{"JSON payload invalid", GateCheck{Topic: "events", Payload: true}, wire(jsonID, `{"n":"one"}`), nil, "does not match schema id"},
		{"JSON payload not JSON", GateCheck{Topic: "events", Payload: true}, wire(jsonID, `{n`), nil, "is not JSON"},
		{"JSON payload unchecked without the setting", GateCheck{Topic: "events"}, wire(jsonID, `{n`), nil, ""},
	} {
		got := r.CheckWire(tc.check, tc.data, tc.header)
		switch {
		case tc.want == "" && got != "":
			t.Errorf("%s: refused: %s", tc.name, got)
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("%s: got %q, want it to say %q", tc.name, got, tc.want)
		}
	}

	// A soft-deleted version no longer admits its id.
	if _, err := r.DeleteVersion(ctx, "orders-value", 1, false); err != nil {
		t.Fatal(err)
	}
	if got := r.CheckWire(topicName, wire(orders, ""), nil); !strings.Contains(got, "not registered under subject orders-value") {
		t.Fatalf("after a soft delete: %q", got)
	}
}

// BenchmarkCheckWire is the gate's cost per record (in memory, no I/O).
func BenchmarkCheckWire(b *testing.B) {
	r := New(nil)
	id, err := r.Register(context.Background(), "orders-value", avroReq(ordersV1), false)
	if err != nil {
		b.Fatal(err)
	}
	data := wire(id, strings.Repeat("x", 1000))
	c := GateCheck{Topic: "orders", Strategy: TopicNameStrategy}
	b.ReportAllocs()
	for b.Loop() {
		if msg := r.CheckWire(c, data, nil); msg != "" {
			b.Fatal(msg)
		}
	}
}
