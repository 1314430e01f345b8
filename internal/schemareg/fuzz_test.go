package schemareg

import (
	"context"
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
