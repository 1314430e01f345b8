package schemareg

import (
	"context"
	"strings"
	"testing"
)

// JSON Schema compatibility, rule by rule: each case registers old and
// checks new against it under BACKWARD (new reads old data) and FORWARD
// (old reads new data).
func TestJSONSchemaCompatibility(t *testing.T) {
	obj := func(extra string) string { return `{"type":"object"` + extra + `}` }
	runCompatTable(t, TypeJSON, []compatCase{
		{"identical", obj(`,"properties":{"a":{"type":"string"}}`), obj(`,"properties":{"a":{"type":"string"}}`), true, true, ""},
		{"optional property added to an open model", obj(`,"properties":{"a":{"type":"string"}}`),
			obj(`,"properties":{"a":{"type":"string"},"b":{"type":"string"}}`), false, true, "b"},
		{"optional property added to a closed model", obj(`,"properties":{"a":{"type":"string"}},"additionalProperties":false`),
			obj(`,"properties":{"a":{"type":"string"},"b":{"type":"string"}},"additionalProperties":false`), true, false, "b"},
		{"property removed from an open model", obj(`,"properties":{"a":{"type":"string"},"b":{"type":"string"}}`),
			obj(`,"properties":{"a":{"type":"string"}}`), true, false, "b"},
		{"property removed from a closed model", obj(`,"properties":{"a":{"type":"string"},"b":{"type":"string"}},"additionalProperties":false`),
			obj(`,"properties":{"a":{"type":"string"}},"additionalProperties":false`), false, true, "b"},
		{"total renamed to amount", obj(`,"properties":{"total":{"type":"number"}}`),
			obj(`,"properties":{"amount":{"type":"number"}}`), false, false, "amount"},
		{"required added", obj(`,"properties":{"a":{"type":"string"}}`),
			obj(`,"properties":{"a":{"type":"string"}},"required":["a"]`), false, true, "a"},
		{"required removed", obj(`,"properties":{"a":{"type":"string"}},"required":["a"]`),
			obj(`,"properties":{"a":{"type":"string"}}`), true, false, "a"},
		{"integer widened to number", `{"type":"integer"}`, `{"type":"number"}`, true, false, "integer"},
		{"number narrowed to integer", `{"type":"number"}`, `{"type":"integer"}`, false, true, "number"},
		{"type changed", `{"type":"string"}`, `{"type":"integer"}`, false, false, "type"},
		{"type added to a union", `{"type":"string"}`, `{"type":["string","null"]}`, true, false, "null"},
		{"enum value added", `{"enum":["a","b"]}`, `{"enum":["a","b","c"]}`, true, false, "c"},
		{"enum value removed", `{"enum":["a","b"]}`, `{"enum":["a"]}`, false, true, "b"},
		{"maxLength lowered", `{"type":"string","maxLength":10}`, `{"type":"string","maxLength":5}`, false, true, "maxLength"},
		{"maxLength added", `{"type":"string"}`, `{"type":"string","maxLength":5}`, false, true, "maxLength"},
		{"minimum raised", `{"type":"number","minimum":0}`, `{"type":"number","minimum":1}`, false, true, "minimum"},
		{"maximum raised", `{"type":"number","maximum":10}`, `{"type":"number","maximum":20}`, true, false, "maximum"},
		{"multipleOf relaxed", `{"type":"number","multipleOf":4}`, `{"type":"number","multipleOf":2}`, true, false, "multipleOf"},
		{"pattern changed", `{"type":"string","pattern":"^a"}`, `{"type":"string","pattern":"^b"}`, false, false, "pattern"},
		{"array items changed", `{"type":"array","items":{"type":"string"}}`, `{"type":"array","items":{"type":"number"}}`, false, false, "items"},
		{"minItems raised", `{"type":"array","minItems":1}`, `{"type":"array","minItems":2}`, false, true, "minItems"},
		{"nested required added", obj(`,"properties":{"o":{"type":"object","properties":{"x":{"type":"string"}}}}`),
			obj(`,"properties":{"o":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]}}`), false, true, "x"},
		{"model closed", obj(`,"properties":{"a":{"type":"string"}}`),
			obj(`,"properties":{"a":{"type":"string"}},"additionalProperties":false`), false, true, "additionalProperties"},
		{"property added under a typed additionalProperties", obj(`,"additionalProperties":{"type":"string"}`),
			obj(`,"properties":{"p":{"type":"string"}},"additionalProperties":{"type":"string"}`), true, true, ""},
		{"definition tightened behind a $ref", obj(`,"properties":{"a":{"$ref":"#/definitions/A"}},"definitions":{"A":{"type":"string"}}`),
			obj(`,"properties":{"a":{"$ref":"#/definitions/A"}},"definitions":{"A":{"type":"string","maxLength":3}}`), false, true, "maxLength"},
		// Combinators are compared for equality only: any change is
		// refused both ways, even one that is safe one way.
		{"oneOf changed", `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, `{"oneOf":[{"type":"string"}]}`, false, false, "oneOf"},
		{"anything to a string", `{}`, `{"type":"string"}`, false, true, "type"},
		{"a string to anything", `{"type":"string"}`, `true`, true, false, ""},
	})
}

// compatCase is one row of a compatibility rule table: old is
// registered, next checked against it under BACKWARD (next reads old's
// data) and FORWARD (old reads next's).
type compatCase struct {
	name      string
	old, next string
	backward  bool
	forward   bool
	mention   string // a word the BACKWARD refusal names
}

// runCompatTable checks every case of a rule table for schema type typ.
func runCompatTable(t *testing.T, typ string, cases []compatCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, dir := range []struct {
				level string
				ok    bool
			}{{LevelBackward, tc.backward}, {LevelForward, tc.forward}} {
				r := New(nil)
				ctx := context.Background()
				if _, err := r.SetLevel(ctx, "", dir.level); err != nil {
					t.Fatal(err)
				}
				if _, err := r.Register(ctx, "s", SchemaRequest{Schema: tc.old, SchemaType: typ}, false); err != nil {
					t.Fatalf("register old: %v", err)
				}
				msgs, err := r.Check("s", -1, SchemaRequest{Schema: tc.next, SchemaType: strings.ToLower(typ)}, false)
				if err != nil {
					t.Fatal(err)
				}
				if ok := len(msgs) == 0; ok != dir.ok {
					t.Fatalf("%s: compatible %v (%q), want %v", dir.level, ok, msgs, dir.ok)
				}
				if !dir.ok && dir.level == LevelBackward && tc.mention != "" && !strings.Contains(strings.Join(msgs, " "), tc.mention) {
					t.Fatalf("%s: refusal %q does not name %q", dir.level, msgs, tc.mention)
				}
			}
		})
	}
}

// JSON schemas are validated as schemas, refer to other subjects by name,
// and normalise to sorted keys.
func TestJSONSchemaParsingAndReferences(t *testing.T) {
	ctx := context.Background()
	r := New(nil)
	_, err := r.Register(ctx, "bad", SchemaRequest{Schema: `{"type":"no-such-type"}`, SchemaType: TypeJSON}, false)
	wantCode(t, err, 42201)
	_, err = r.Register(ctx, "bad", SchemaRequest{Schema: `{"type":`, SchemaType: TypeJSON}, false)
	wantCode(t, err, 42201)
	const address = `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`
	if _, err := r.Register(ctx, "address", SchemaRequest{Schema: address, SchemaType: TypeJSON}, false); err != nil {
		t.Fatal(err)
	}
	const customer = `{"type":"object","properties":{"home":{"$ref":"address.json"}}}`
	_, err = r.Register(ctx, "customer", SchemaRequest{Schema: customer, SchemaType: TypeJSON}, false)
	wantCode(t, err, 42201) // address.json is not given as a reference
	refs := []Reference{{Name: "address.json", Subject: "address", Version: 1}}
	id, err := r.Register(ctx, "customer", SchemaRequest{Schema: customer, SchemaType: TypeJSON, References: refs}, false)
	if err != nil {
		t.Fatal(err)
	}
	// Tightening the referenced schema behind the reference is seen.
	const strict = `{"type":"object","properties":{"home":{"$ref":"address.json"},"vip":{"type":"boolean"}},"additionalProperties":false}`
	msgs, err := r.Check("customer", -1, SchemaRequest{Schema: strict, SchemaType: TypeJSON, References: refs}, false)
	if err != nil || len(msgs) == 0 {
		t.Fatalf("closing the model and adding vip: %q, %v; want incompatible under BACKWARD", msgs, err)
	}
	got, err := r.ByID(id)
	if err != nil || got.SchemaType != TypeJSON || len(got.References) != 1 {
		t.Fatalf("by id: %+v, %v", got, err)
	}
	nid, err := r.Register(ctx, "norm", SchemaRequest{Schema: `{ "type" : "string", "maxLength" : 3 }`, SchemaType: TypeJSON}, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := r.ByID(nid); got.Schema != `{"maxLength":3,"type":"string"}` {
		t.Fatalf("normalised schema %q", got.Schema)
	}
}
