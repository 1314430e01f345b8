package schemareg

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
)

// proto3 is a proto3 file in package shop holding body.
func proto3(body string) string {
	return "syntax = \"proto3\";\npackage shop;\n" + body
}

// Protobuf compatibility, rule by rule: each case registers old and
// checks next against it under BACKWARD (next reads old data) and
// FORWARD (old reads next's data).
func TestProtobufCompatibility(t *testing.T) {
	order := func(fields string) string { return proto3("message Order {\n" + fields + "\n}") }
	runCompatTable(t, TypeProtobuf, []compatCase{
		{"identical", order(`string id = 1; double total = 2;`), order(`string id = 1; double total = 2;`), true, true, ""},
		{"field added", order(`string id = 1;`), order(`string id = 1; double total = 2;`), true, true, ""},
		{"field renamed, same number and type", order(`double total = 2;`), order(`double amount = 2;`), true, true, ""},
		{"field removed, number reserved", order(`string id = 1; double total = 2;`), order(`string id = 1; reserved 2;`), true, true, ""},
		{"field removed, number not reserved", order(`string id = 1; double total = 2;`), order(`string id = 1;`), false, false, "reserved 2"},
		{"reserved number taken", order(`string id = 1; reserved 2;`), order(`string id = 1; int64 amount = 2;`), false, false, "reserved"},
		{"reserved range dropped", order(`string id = 1; reserved 5 to 9;`), order(`string id = 1;`), false, false, "no longer reserved"},
		{"reserved name dropped", order(`string id = 1; reserved "total";`), order(`string id = 1;`), false, false, "total"},
		{"int32 to int64", order(`int32 n = 1;`), order(`int64 n = 1;`), true, true, ""},
		{"uint64 to bool", order(`uint64 n = 1;`), order(`bool n = 1;`), true, true, ""},
		{"int32 to sint32", order(`int32 n = 1;`), order(`sint32 n = 1;`), false, false, "sint32"},
		{"fixed32 to sfixed32", order(`fixed32 n = 1;`), order(`sfixed32 n = 1;`), true, true, ""},
		{"fixed32 to fixed64", order(`fixed32 n = 1;`), order(`fixed64 n = 1;`), false, false, "fixed64"},
		{"string to bytes", order(`string s = 1;`), order(`bytes s = 1;`), true, true, ""},
		{"string to int64", order(`string s = 1;`), order(`int64 s = 1;`), false, false, "int64"},
		{"double to float", order(`double d = 1;`), order(`float d = 1;`), false, false, "float"},
		{"singular to repeated", order(`string tag = 1;`), order(`repeated string tag = 1;`), false, false, "repeated"},
		{"map value type changed", order(`map<string, int32> m = 1;`), order(`map<string, string> m = 1;`), false, false, "map"},
		{"message type changed",
			proto3("message A { string x = 1; }\nmessage B { string x = 1; }\nmessage Order { A a = 1; }"),
			proto3("message A { string x = 1; }\nmessage B { string x = 1; }\nmessage Order { B a = 1; }"), false, false, "shop.B"},
		{"message removed", proto3("message Order { string id = 1; }\nmessage Line { string sku = 1; }"),
			proto3("message Order { string id = 1; }"), false, true, "Line"},
		{"message added", proto3("message Order { string id = 1; }"),
			proto3("message Order { string id = 1; }\nmessage Line { string sku = 1; }"), true, false, "Line"},
		{"package changed", proto3("message Order { string id = 1; }"),
			"syntax = \"proto3\";\npackage store;\nmessage Order { string id = 1; }", false, false, "shop.Order"},
		{"one field into a new oneof", order(`string card = 1; string iban = 2;`),
			order(`oneof pay { string card = 1; } string iban = 2;`), true, true, ""},
		{"two fields into a new oneof", order(`string card = 1; string iban = 2;`),
			order(`oneof pay { string card = 1; string iban = 2; }`), false, false, "oneof"},
		{"field into an existing oneof", order(`oneof pay { string card = 1; } string iban = 2;`),
			order(`oneof pay { string card = 1; string iban = 2; }`), false, false, "existing oneof"},
		{"field out of a oneof", order(`oneof pay { string card = 1; string iban = 2; }`),
			order(`oneof pay { string card = 1; } string iban = 2;`), false, false, "out of oneof"},
		{"oneof field added", order(`oneof pay { string card = 1; }`),
			order(`oneof pay { string card = 1; string iban = 2; }`), true, true, ""},
		{"enum value added", proto3("enum State { NEW = 0; PAID = 1; }\nmessage Order { State s = 1; }"),
			proto3("enum State { NEW = 0; PAID = 1; SHIPPED = 2; }\nmessage Order { State s = 1; }"), true, true, ""},
		{"enum value removed unreserved", proto3("enum State { NEW = 0; PAID = 1; }\nmessage Order { State s = 1; }"),
			proto3("enum State { NEW = 0; }\nmessage Order { State s = 1; }"), false, false, "PAID"},
		{"enum value removed and reserved", proto3("enum State { NEW = 0; PAID = 1; }\nmessage Order { State s = 1; }"),
			proto3("enum State { NEW = 0; reserved 1; }\nmessage Order { State s = 1; }"), true, true, ""},
		{"nested message field type changed",
			proto3("message Order { message Line { int64 qty = 1; } repeated Line lines = 1; }"),
			proto3("message Order { message Line { string qty = 1; } repeated Line lines = 1; }"), false, false, "Order.Line"},
		{"proto2 required field added",
			"syntax = \"proto2\";\npackage shop;\nmessage Order { optional string id = 1; }",
			"syntax = \"proto2\";\npackage shop;\nmessage Order { optional string id = 1; required int64 n = 2; }", false, false, "required"},
	})
}

// Protobuf schemas are compiled, import registered schemas through
// references (and the well-known types without one), and name their
// first message for the record name strategies.
func TestProtobufParsingAndReferences(t *testing.T) {
	ctx := context.Background()
	r := New(nil)
	_, err := r.Register(ctx, "bad", SchemaRequest{Schema: proto3("message Order { strin id = 1; }"), SchemaType: TypeProtobuf}, false)
	wantCode(t, err, 42201)
	_, err = r.Register(ctx, "bad", SchemaRequest{Schema: proto3("message Order { string id = 1; int64 n = 1; }"), SchemaType: TypeProtobuf}, false)
	wantCode(t, err, 42201) // a number used twice
	const customer = "syntax = \"proto3\";\npackage crm;\nmessage Customer { string name = 1; }"
	if _, err := r.Register(ctx, "customer-value", SchemaRequest{Schema: customer, SchemaType: TypeProtobuf}, false); err != nil {
		t.Fatal(err)
	}
	order := proto3("import \"crm/customer.proto\";\nimport \"google/protobuf/timestamp.proto\";\n" +
		"message Order { crm.Customer buyer = 1; google.protobuf.Timestamp at = 2; }")
	_, err = r.Register(ctx, "orders-value", SchemaRequest{Schema: order, SchemaType: TypeProtobuf}, false)
	wantCode(t, err, 42201) // the import is not given as a reference
	refs := []Reference{{Name: "crm/customer.proto", Subject: "customer-value", Version: 1}}
	id, err := r.Register(ctx, "orders-value", SchemaRequest{Schema: order, SchemaType: TypeProtobuf, References: refs}, false)
	if err != nil {
		t.Fatal(err)
	}
	// A change behind the reference is seen when the new version points
	// at it.
	if _, err := r.SetLevel(ctx, "customer-value", LevelNone); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Register(ctx, "customer-value", SchemaRequest{Schema: strings.Replace(customer, "string name", "int64 name", 1), SchemaType: TypeProtobuf}, false); err != nil {
		t.Fatal(err)
	}
	msgs, err := r.Check("orders-value", -1, SchemaRequest{Schema: order, SchemaType: TypeProtobuf,
		References: []Reference{{Name: "crm/customer.proto", Subject: "customer-value", Version: 2}}}, false)
	if err != nil || len(msgs) == 0 || !strings.Contains(strings.Join(msgs, " "), "crm.Customer") {
		t.Fatalf("customer's name changed type behind the reference: %q, %v", msgs, err)
	}
	got, err := r.ByID(id)
	if err != nil || got.SchemaType != TypeProtobuf || len(got.References) != 1 {
		t.Fatalf("by id: %+v, %v", got, err)
	}
	if msg := r.CheckWire(GateCheck{Topic: "orders", Strategy: RecordNameStrategy}, wire(id, ""), nil); !strings.Contains(msg, "subject shop.Order") {
		t.Fatalf("record name of a Protobuf schema: %q", msg)
	}
}

// A schema given as a base64 FileDescriptorProto, as confluent-kafka's
// serializers register it, parses and compares like its source.
func TestProtobufSerializedDescriptor(t *testing.T) {
	ctx := context.Background()
	r := New(nil)
	src := proto3("message Order { string id = 1; double total = 2; }")
	if _, err := r.Register(ctx, "src", SchemaRequest{Schema: src, SchemaType: TypeProtobuf}, false); err != nil {
		t.Fatal(err)
	}
	r.mu.RLock()
	p, err := r.st.parse(content{Type: TypeProtobuf, Schema: src})
	r.mu.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(protodesc.ToFileDescriptorProto(p.proto))
	if err != nil {
		t.Fatal(err)
	}
	ser := base64.StdEncoding.EncodeToString(b)
	id, err := r.Register(ctx, "ser", SchemaRequest{Schema: ser, SchemaType: TypeProtobuf}, false)
	if err != nil {
		t.Fatalf("serialized descriptor: %v", err)
	}
	// Against the serialized form, total's type change is seen.
	changed := proto3("message Order { string id = 1; string total = 2; }")
	if msgs, err := r.Check("ser", -1, SchemaRequest{Schema: changed, SchemaType: TypeProtobuf}, false); err != nil || len(msgs) == 0 {
		t.Fatalf("double to string against the serialized schema: %q, %v", msgs, err)
	}
	if msg := r.CheckWire(GateCheck{Topic: "x", Strategy: RecordNameStrategy}, wire(id, ""), nil); !strings.Contains(msg, "subject shop.Order") {
		t.Fatalf("record name: %q", msg)
	}
}
