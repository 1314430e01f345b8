package schemareg

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Avro record schemas of the seed's orders: v2 adds an optional field,
// v3 renames total to amount.
const (
	ordersV1 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"total","type":"double"}]}`
	ordersV2 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"total","type":"double"},{"name":"note","type":["null","string"],"default":null}]}`
	ordersV3 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"amount","type":"double"},{"name":"note","type":["null","string"],"default":null}]}`
)

// recordingLog applies records to a registry and keeps them, so a test
// can replay them into another.
type recordingLog struct {
	reg  *Registry
	recs []Record
}

func (l *recordingLog) Append(_ context.Context, recs []Record) error {
	for _, r := range recs {
		if err := l.reg.Apply(r); err != nil {
			return err
		}
	}
	l.recs = append(l.recs, recs...)
	return nil
}

func newRecorded() (*Registry, *recordingLog) {
	l := &recordingLog{}
	r := New(l)
	l.reg = r
	return r, l
}

func avroReq(s string) SchemaRequest { return SchemaRequest{Schema: s} }

func wantCode(t *testing.T, err error, code int) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("error %v, want code %d", err, code)
	}
	return e
}

func mustRegister(t *testing.T, r *Registry, subject, schema string) int {
	t.Helper()
	id, err := r.Register(context.Background(), subject, avroReq(schema), false)
	if err != nil {
		t.Fatalf("register %s: %v", subject, err)
	}
	return id
}

// The seed's scenario: under the default BACKWARD, v1 and v2 register,
// v3 (total renamed to amount, no default) is refused with a message
// naming the field; the same schema twice is one id and one version, and
// under another subject the same id with its own version 1.
func TestRegisterSeedScenario(t *testing.T) {
	ctx := context.Background()
	r, _ := newRecorded()
	id1 := mustRegister(t, r, "orders-value", ordersV1)
	id2 := mustRegister(t, r, "orders-value", ordersV2)
	if id1 != 1 || id2 != 2 {
		t.Fatalf("ids %d, %d; want 1, 2", id1, id2)
	}
	_, err := r.Register(ctx, "orders-value", avroReq(ordersV3), false)
	e := wantCode(t, err, 409)
	if e.Status != 409 || !strings.Contains(e.Message, "amount") {
		t.Fatalf("v3 refused with %d %q: want HTTP 409 naming the field amount", e.Status, e.Message)
	}
	if again := mustRegister(t, r, "orders-value", ordersV1); again != id1 {
		t.Fatalf("v1 registered again: id %d, want %d", again, id1)
	}
	if vs, _ := r.Versions("orders-value", false); len(vs) != 2 {
		t.Fatalf("versions %v after registering v1 twice, want [1 2]", vs)
	}
	if other := mustRegister(t, r, "archive-value", ordersV2); other != id2 {
		t.Fatalf("v2 under another subject: id %d, want %d", other, id2)
	}
	if sv, err := r.Version("archive-value", -1, false); err != nil || sv.Version != 1 || sv.ID != id2 {
		t.Fatalf("archive-value latest: %+v, %v; want version 1 id %d", sv, err, id2)
	}
	if got, err := r.IDVersions(id2, false); err != nil || len(got) != 2 {
		t.Fatalf("versions of id %d: %v, %v; want two subjects", id2, got, err)
	}
	// NONE lets v3 in, with a new id.
	if _, err := r.SetLevel(ctx, "orders-value", "none"); err != nil {
		t.Fatal(err)
	}
	if id3 := mustRegister(t, r, "orders-value", ordersV3); id3 != 3 {
		t.Fatalf("v3 under NONE: id %d, want 3", id3)
	}
}

// Each level checks the direction and the versions it names: v3 below
// reads v2's data but not v1's (v1 lacks the new field's default), and
// every earlier schema reads v3's data.
func TestCompatibilityLevels(t *testing.T) {
	const (
		a = `{"type":"record","name":"R","fields":[{"name":"x","type":"int"}]}`
		// b adds y with a default: reads a's data, a reads b's.
		b = `{"type":"record","name":"R","fields":[{"name":"x","type":"int"},{"name":"y","type":"int","default":0}]}`
		// c drops y's default: reads b's data, not a's.
		c = `{"type":"record","name":"R","fields":[{"name":"x","type":"int"},{"name":"y","type":"int"}]}`
		// d drops x (no default on the readers' side of a, b, c).
		d = `{"type":"record","name":"R","fields":[{"name":"y","type":"int","default":0}]}`
	)
	for _, tc := range []struct {
		level   string
		next    string
		wantErr bool
	}{
		{LevelNone, d, false},
		{LevelBackward, c, false}, // c reads b
		{LevelBackwardTransitive, c, true},
		{LevelForward, c, false}, // b reads c (y present)
		{LevelForward, d, true},  // b cannot read d (no x)
		{LevelForwardTransitive, c, false},
		{LevelFull, c, false},
		{LevelFullTransitive, c, true},
		{LevelBackward, d, false}, // d reads b: x ignored, y present
		{LevelFull, d, true},
	} {
		t.Run(tc.level+"/"+map[string]string{c: "c", d: "d"}[tc.next], func(t *testing.T) {
			ctx := context.Background()
			r := New(nil)
			if _, err := r.SetLevel(ctx, "", tc.level); err != nil {
				t.Fatal(err)
			}
			mustRegister(t, r, "s", a)
			mustRegister(t, r, "s", b)
			msgs, err := r.Check("s", 0, avroReq(tc.next), false)
			if err != nil {
				t.Fatal(err)
			}
			_, rerr := r.Register(ctx, "s", avroReq(tc.next), false)
			if tc.wantErr {
				wantCode(t, rerr, 409)
				if len(msgs) == 0 {
					t.Fatal("Check found nothing wrong with a schema Register refused")
				}
				return
			}
			if rerr != nil || len(msgs) != 0 {
				t.Fatalf("register: %v, check: %q; want compatible", rerr, msgs)
			}
		})
	}
}

// Deletes: soft first, then permanent; each out-of-order step has its
// own error code; a permanently deleted version's id is not reused.
func TestDeletes(t *testing.T) {
	ctx := context.Background()
	r, _ := newRecorded()
	mustRegister(t, r, "s", ordersV1)
	mustRegister(t, r, "s", ordersV2)

	_, err := r.DeleteVersion(ctx, "s", 1, true)
	wantCode(t, err, 40407) // permanent before soft
	if v, err := r.DeleteVersion(ctx, "s", 1, false); err != nil || v != 1 {
		t.Fatalf("soft delete v1: %d, %v", v, err)
	}
	_, err = r.DeleteVersion(ctx, "s", 1, false)
	wantCode(t, err, 40406)
	if vs, _ := r.Versions("s", false); len(vs) != 1 || vs[0] != 2 {
		t.Fatalf("versions after soft-deleting 1: %v, want [2]", vs)
	}
	if vs, _ := r.Versions("s", true); len(vs) != 2 {
		t.Fatalf("versions with deleted=true: %v, want [1 2]", vs)
	}
	_, err = r.Version("s", 1, false)
	wantCode(t, err, 40402)
	if _, err := r.Version("s", 1, true); err != nil {
		t.Fatalf("a soft-deleted version with deleted=true: %v", err)
	}
	if _, err := r.DeleteVersion(ctx, "s", 1, true); err != nil {
		t.Fatalf("permanent delete after soft: %v", err)
	}
	if vs, _ := r.Versions("s", true); len(vs) != 1 {
		t.Fatalf("versions after permanent delete: %v, want [2]", vs)
	}

	_, err = r.DeleteSubject(ctx, "s", true)
	wantCode(t, err, 40405)
	if vs, err := r.DeleteSubject(ctx, "s", false); err != nil || len(vs) != 1 || vs[0] != 2 {
		t.Fatalf("soft delete subject: %v, %v", vs, err)
	}
	_, err = r.DeleteSubject(ctx, "s", false)
	wantCode(t, err, 40404)
	if subs := r.Subjects("", false); len(subs) != 0 {
		t.Fatalf("subjects after a soft delete: %v", subs)
	}
	if subs := r.Subjects("", true); len(subs) != 1 {
		t.Fatalf("subjects with deleted=true: %v", subs)
	}
	_, err = r.Versions("s", false)
	wantCode(t, err, 40401)
	if _, err := r.DeleteSubject(ctx, "s", true); err != nil {
		t.Fatalf("permanent subject delete: %v", err)
	}
	if subs := r.Subjects("", true); len(subs) != 0 {
		t.Fatalf("subjects after a permanent delete: %v", subs)
	}
	// Ids are never reused: a new schema gets 3, not 1.
	if id := mustRegister(t, r, "s", ordersV3); id != 3 {
		t.Fatalf("id after deletes: %d, want 3", id)
	}
}

// A record type defined in another subject is used through a reference;
// the referenced version cannot be deleted while it is referenced.
func TestReferences(t *testing.T) {
	ctx := context.Background()
	r := New(nil)
	const money = `{"type":"record","name":"Money","namespace":"shop","fields":[{"name":"cents","type":"long"},{"name":"currency","type":"string"}]}`
	const order = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"total","type":"shop.Money"}]}`
	moneyID := mustRegister(t, r, "money", money)
	_, err := r.Register(ctx, "orders-value", avroReq(order), false)
	wantCode(t, err, 42201) // shop.Money unknown without the reference
	req := SchemaRequest{Schema: order, References: []Reference{{Name: "shop.Money", Subject: "money", Version: 1}}}
	orderID, err := r.Register(ctx, "orders-value", req, false)
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := r.ReferencedBy("money", 1); err != nil || len(ids) != 1 || ids[0] != orderID {
		t.Fatalf("referencedby: %v, %v; want [%d]", ids, err, orderID)
	}
	_, err = r.DeleteVersion(ctx, "money", 1, false)
	wantCode(t, err, 42206)
	got, err := r.ByID(orderID)
	if err != nil || len(got.References) != 1 || got.References[0].Subject != "money" {
		t.Fatalf("schema %d: %+v, %v", orderID, got, err)
	}
	_ = moneyID
	bad := SchemaRequest{Schema: order, References: []Reference{{Name: "shop.Money", Subject: "money", Version: 9}}}
	_, err = r.Register(ctx, "other", bad, false)
	wantCode(t, err, 42201)
}

// Config and mode: levels and modes are checked, subject-level ones fall
// back to the global one only when asked, READONLY refuses writes and
// IMPORT takes explicit ids.
func TestConfigAndMode(t *testing.T) {
	ctx := context.Background()
	r := New(nil)
	if l, _ := r.Level("", false); l != LevelBackward {
		t.Fatalf("global level %q, want BACKWARD", l)
	}
	_, err := r.SetLevel(ctx, "s", "sideways")
	wantCode(t, err, 42203)
	_, err = r.Level("s", false)
	wantCode(t, err, 40408)
	if l, err := r.Level("s", true); err != nil || l != LevelBackward {
		t.Fatalf("defaultToGlobal: %q, %v", l, err)
	}
	if _, err := r.SetLevel(ctx, "s", "full_transitive"); err != nil {
		t.Fatal(err)
	}
	if l, _ := r.Level("s", false); l != LevelFullTransitive {
		t.Fatalf("subject level %q", l)
	}
	if prev, err := r.DeleteLevel(ctx, "s"); err != nil || prev != LevelFullTransitive {
		t.Fatalf("delete level: %q, %v", prev, err)
	}

	_, err = r.SetMode(ctx, "", "sleepy", false)
	wantCode(t, err, 42204)
	if _, err := r.SetMode(ctx, "ro", ModeReadOnly, false); err != nil {
		t.Fatal(err)
	}
	_, err = r.Register(ctx, "ro", avroReq(ordersV1), false)
	wantCode(t, err, 42205)

	mustRegister(t, r, "existing", ordersV1)
	_, err = r.SetMode(ctx, "", ModeImport, false)
	wantCode(t, err, 42205) // subjects exist
	if _, err := r.SetMode(ctx, "imp", ModeImport, false); err != nil {
		t.Fatal(err)
	}
	_, err = r.Register(ctx, "imp", avroReq(ordersV2), false)
	wantCode(t, err, 42205) // no id given
	req := avroReq(ordersV2)
	req.ID, req.Version = 100, 5
	if id, err := r.Register(ctx, "imp", req, false); err != nil || id != 100 {
		t.Fatalf("import with id 100: %d, %v", id, err)
	}
	if sv, err := r.Version("imp", 5, false); err != nil || sv.ID != 100 {
		t.Fatalf("imported version: %+v, %v", sv, err)
	}
	if _, err := r.DeleteMode(ctx, "imp"); err != nil {
		t.Fatal(err)
	}
	// Back in READWRITE, the next new id follows the largest seen.
	if id := mustRegister(t, r, "after", ordersV3); id != 101 {
		t.Fatalf("id after an import of 100: %d, want 101", id)
	}
	req.ID = 7
	_, err = r.Register(ctx, "after", req, false)
	wantCode(t, err, 42205) // an id outside IMPORT mode
}

// Every node rebuilds the same registry from the log: replaying the
// records a registry wrote gives the same answers.
func TestReplayRebuildsTheRegistry(t *testing.T) {
	ctx := context.Background()
	r, l := newRecorded()
	mustRegister(t, r, "a", ordersV1)
	mustRegister(t, r, "a", ordersV2)
	mustRegister(t, r, "b", ordersV2)
	if _, err := r.DeleteVersion(ctx, "a", 1, false); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SetLevel(ctx, "b", LevelFull); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SetMode(ctx, "c", ModeReadOnly, false); err != nil {
		t.Fatal(err)
	}
	replica := New(nil)
	for _, rec := range l.recs {
		if err := replica.Apply(rec); err != nil {
			t.Fatalf("apply %s: %v", rec.Key, err)
		}
	}
	for _, q := range []func(*Registry) any{
		func(x *Registry) any { return x.Subjects("", true) },
		func(x *Registry) any { v, _ := x.Versions("a", true); return v },
		func(x *Registry) any { v, _ := x.Versions("a", false); return v },
		func(x *Registry) any { v, _ := x.Level("b", false); return v },
		func(x *Registry) any { v, _ := x.Mode("c", false); return v },
		func(x *Registry) any { v, _ := x.IDVersions(2, true); return v },
	} {
		if a, b := string(mustJSON(q(r))), string(mustJSON(q(replica))); a != b {
			t.Fatalf("replayed registry answers %s, the writer %s", b, a)
		}
	}
	// The next id continues after the replayed ones.
	if id := mustRegister(t, replica, "d", ordersV3); id != 3 {
		t.Fatalf("id on the replayed registry: %d, want 3", id)
	}
	if err := replica.Apply(Record{Key: []byte(`{"keytype":"FUTURE","magic":0}`), Value: []byte(`{}`)}); err == nil {
		t.Fatal("an unknown key type applied without error")
	}
	if err := replica.Apply(Record{Key: []byte(`not json`)}); err == nil {
		t.Fatal("a malformed key applied without error")
	}
}

// An empty references list is no references: confluent-kafka-python
// sends "references": [] with every JSON Schema, and a lookup or a
// registration again must find the schema registered with none.
func TestEmptyReferencesAreNone(t *testing.T) {
	r := New(nil)
	ctx := context.Background()
	req := SchemaRequest{SchemaType: TypeJSON, Schema: `{"type":"string"}`}
	id, err := r.Register(ctx, "s", req, false)
	if err != nil {
		t.Fatal(err)
	}
	req.References = []Reference{}
	if again, err := r.Register(ctx, "s", req, false); err != nil || again != id {
		t.Fatalf("again with references []: %d, %v; want %d", again, err, id)
	}
	if sv, err := r.LookUp("s", req, false, false); err != nil || sv.ID != id || sv.Version != 1 {
		t.Fatalf("lookup with references []: %+v, %v", sv, err)
	}
	if vs, _ := r.Versions("s", false); len(vs) != 1 {
		t.Fatalf("versions %v, want one", vs)
	}
}
