package schemareg

import (
	"context"
	"errors"
	"testing"
)

// FuzzApply feeds arbitrary records to a registry (as a corrupt or newer
// `_schemas` log would): Apply returns an error or applies, never panics,
// and the registry keeps answering.
func FuzzApply(f *testing.F) {
	r, l := newRecorded()
	ctx := context.Background()
	mustRegisterF := func(subject, schema string) {
		if _, err := r.Register(ctx, subject, avroReq(schema), false); err != nil {
			f.Fatal(err)
		}
	}
	mustRegisterF("a", ordersV1)
	mustRegisterF("a", ordersV2)
	_, _ = r.SetLevel(ctx, "a", LevelFull)
	_, _ = r.SetMode(ctx, "b", ModeReadOnly, false)
	_, _ = r.DeleteSubject(ctx, "a", false)
	for _, rec := range l.recs {
		f.Add(rec.Key, rec.Value)
	}
	f.Add([]byte(`{"keytype":"SCHEMA","subject":"x","version":1,"magic":1}`), []byte(nil))
	f.Add([]byte(`{"keytype":"SCHEMA","subject":null,"version":-1,"magic":1}`), []byte(`{"id":-5}`))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		reg := New(nil)
		_ = reg.Apply(Record{Key: key, Value: value})
		for _, s := range reg.Subjects("", true) {
			vs, _ := reg.Versions(s, true)
			for _, v := range vs {
				if sv, err := reg.Version(s, v, true); err == nil {
					_, _ = reg.ByID(sv.ID)
					_, _ = reg.ReferencedBy(s, v)
				}
			}
			_, _ = reg.Level(s, true)
			_, _ = reg.Mode(s, true)
		}
		_, _ = reg.Register(context.Background(), "fuzz", avroReq(ordersV1), false)
	})
}

// FuzzParseSchema gives the Avro, JSON Schema and Protobuf parsers
// arbitrary text:
// a schema is refused with 42201 or accepted, never a panic, and an
// accepted one is compatible with itself at every level.
func FuzzParseSchema(f *testing.F) {
	for _, s := range []string{ordersV1, ordersV2, `"string"`, `{"type":"array","items":"int"}`,
		`{"type":"object","properties":{"a":{"type":"string","maxLength":3}},"required":["a"]}`,
		`{"$ref":"#/definitions/x","definitions":{"x":{"$ref":"#/definitions/x"}}}`, `true`, `{"enum":[1,"a",null]}`} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(1))
	}
	for _, s := range []string{"syntax = \"proto3\";\nmessage A { string a = 1; oneof o { int64 b = 2; } reserved 3 to 5; }",
		"syntax = \"proto2\";\npackage p;\nmessage A { required int32 x = 1; message B { map<string, A> m = 1; } enum E { Z = 0; } }",
		"syntax = \"proto3\";\nimport \"google/protobuf/any.proto\";\nmessage A { google.protobuf.Any x = 1; }"} {
		f.Add(s, uint8(2))
	}
	f.Fuzz(func(t *testing.T, schema string, kind uint8) {
		typ := []string{TypeAvro, TypeJSON, TypeProtobuf}[kind%3]
		r := New(nil)
		ctx := context.Background()
		if _, err := r.SetLevel(ctx, "", LevelFullTransitive); err != nil {
			t.Fatal(err)
		}
		req := SchemaRequest{Schema: schema, SchemaType: typ}
		if _, err := r.Register(ctx, "s", req, false); err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code != 42201 {
				t.Fatalf("register %q: %v, want success or 42201", schema, err)
			}
			return
		}
		if msgs, err := r.Check("s", -1, req, false); err != nil || len(msgs) != 0 {
			t.Fatalf("%q against itself: %q, %v", schema, msgs, err)
		}
	})
}

// FuzzCheckWire gives the publish gate's record check arbitrary keys,
// values and schema id headers: a verdict, never a panic, and a record
// without the wire format is always refused.
func FuzzCheckWire(f *testing.F) {
	r := New(nil)
	id, err := r.Register(context.Background(), "t-value", SchemaRequest{Schema: ordersV1}, false)
	if err != nil {
		f.Fatal(err)
	}
	jid, err := r.Register(context.Background(), "t-value", SchemaRequest{SchemaType: TypeJSON, Schema: `{"type":"object"}`}, false)
	if err != nil {
		jid = id
	}
	f.Add(wire(id, "x"), []byte(nil), uint8(0))
	f.Add(wire(jid, `{"a":1}`), []byte(nil), uint8(3))
	f.Add([]byte(`{"raw":true}`), wire(id, ""), uint8(1))
	f.Add([]byte{0, 0}, []byte{0}, uint8(2))
	f.Fuzz(func(t *testing.T, data, header []byte, mode uint8) {
		c := GateCheck{Topic: "t", Strategy: []string{TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy}[mode%3], Payload: mode&4 != 0}
		if mode&8 != 0 {
			header = nil
		}
		msg := r.CheckWire(c, data, header)
		if _, ok := WireID(data, header); !ok && msg == "" {
			t.Fatalf("no wire format (data %x, header %x) passed", data, header)
		}
	})
}
