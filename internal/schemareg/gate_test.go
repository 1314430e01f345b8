package schemareg

import (
	"context"
	"encoding/binary"
	"fmt"
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

// BenchmarkLookups are the registry's reads (a version, a lookup by
// content, a schema by id, the gate's check) with 10 and 10,000 subjects:
// they stay flat.
func BenchmarkLookups(b *testing.B) {
	for _, n := range []int{10, 10000} {
		r := New(nil)
		ctx := context.Background()
		var last int
		schema := func(i int) string {
			return fmt.Sprintf(`{"type":"record","name":"R%d","fields":[{"name":"f","type":"long"}]}`, i)
		}
		for i := range n {
			id, err := r.Register(ctx, fmt.Sprintf("s-%d-value", i), avroReq(schema(i)), false)
			if err != nil {
				b.Fatal(err)
			}
			last = id
		}
		subject := fmt.Sprintf("s-%d-value", n/2)
		b.Run(fmt.Sprintf("version/subjects=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := r.Version(subject, -1, false); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("lookup/subjects=%d", n), func(b *testing.B) {
			req := avroReq(schema(n / 2))
			for b.Loop() {
				if _, err := r.LookUp(subject, req, false, false); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("byid/subjects=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := r.ByID(last); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("gate/subjects=%d", n), func(b *testing.B) {
			c := GateCheck{Topic: fmt.Sprintf("s-%d", n-1), Strategy: TopicNameStrategy}
			data := wire(last, "x")
			for b.Loop() {
				if msg := r.CheckWire(c, data, nil); msg != "" {
					b.Fatal(msg)
				}
			}
		})
	}
}
