package schemareg

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

func serve(t *testing.T) (*Registry, *httptest.Server, *sr.Client) {
	t.Helper()
	reg := New(nil)
	srv := httptest.NewServer(Handler(reg, nil))
	t.Cleanup(srv.Close)
	cl, err := sr.NewClient(sr.URLs(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	return reg, srv, cl
}

func wantSRCode(t *testing.T, err error, code int) {
	t.Helper()
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.ErrorCode != code {
		t.Fatalf("error %v, want Schema Registry error code %d", err, code)
	}
}

// franz-go's Schema Registry client, as a user would drive it: register,
// look up, read back by version and id, check compatibility, set levels,
// delete softly and for good.
func TestHTTPWithFranzGoClient(t *testing.T) {
	ctx := context.Background()
	_, _, cl := serve(t)
	s1, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: ordersV1})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: ordersV2})
	if err != nil {
		t.Fatal(err)
	}
	if s1.ID != 1 || s2.ID != 2 || s2.Version != 2 {
		t.Fatalf("registered %+v and %+v", s1, s2)
	}
	_, err = cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: ordersV3})
	wantSRCode(t, err, 409)

	got, err := cl.LookupSchema(ctx, "orders-value", sr.Schema{Schema: ordersV1})
	if err != nil || got.ID != 1 || got.Version != 1 {
		t.Fatalf("lookup v1: %+v, %v", got, err)
	}
	_, err = cl.LookupSchema(ctx, "orders-value", sr.Schema{Schema: ordersV3})
	wantSRCode(t, err, 40403)
	_, err = cl.LookupSchema(ctx, "nope", sr.Schema{Schema: ordersV3})
	wantSRCode(t, err, 40401)

	latest, err := cl.SchemaByVersion(ctx, "orders-value", -1)
	if err != nil || latest.Version != 2 || latest.Schema.Schema != ordersV2 {
		t.Fatalf("latest: %+v, %v", latest, err)
	}
	byID, err := cl.SchemaByID(ctx, 2)
	if err != nil || byID.Schema != ordersV2 {
		t.Fatalf("by id: %+v, %v", byID, err)
	}
	text, err := cl.SchemaTextByVersion(ctx, "orders-value", 1)
	if err != nil || text != ordersV1 {
		t.Fatalf("schema text of v1: %q, %v", text, err)
	}
	if subs, err := cl.Subjects(ctx); err != nil || len(subs) != 1 || subs[0] != "orders-value" {
		t.Fatalf("subjects: %v, %v", subs, err)
	}
	if vs, err := cl.SubjectVersions(ctx, "orders-value"); err != nil || len(vs) != 2 {
		t.Fatalf("versions: %v, %v", vs, err)
	}
	if subs, err := cl.SubjectsByID(ctx, 1); err != nil || len(subs) != 1 {
		t.Fatalf("subjects of id 1: %v, %v", subs, err)
	}
	if types, err := cl.SupportedTypes(ctx); err != nil || len(types) != 3 {
		t.Fatalf("types: %v, %v", types, err)
	}

	res, err := cl.CheckCompatibility(ctx, "orders-value", -1, sr.Schema{Schema: ordersV3})
	if err != nil || res.Is {
		t.Fatalf("v3 against latest: %+v, %v; want incompatible", res, err)
	}
	for _, r := range cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, "orders-value") {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	for _, r := range cl.Compatibility(ctx, "orders-value") {
		if r.Err != nil || r.Level != sr.CompatNone {
			t.Fatalf("subject level: %+v", r)
		}
	}
	if _, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: ordersV3}); err != nil {
		t.Fatalf("v3 under NONE: %v", err)
	}

	if err := cl.DeleteSchema(ctx, "orders-value", 1, sr.HardDelete); err == nil {
		t.Fatal("hard delete before soft delete worked")
	}
	if vs, err := cl.DeleteSubject(ctx, "orders-value", sr.SoftDelete); err != nil || len(vs) != 3 {
		t.Fatalf("soft delete subject: %v, %v", vs, err)
	}
	if vs, err := cl.DeleteSubject(ctx, "orders-value", sr.HardDelete); err != nil || len(vs) != 3 {
		t.Fatalf("hard delete subject: %v, %v", vs, err)
	}
	_, err = cl.SubjectVersions(ctx, "orders-value")
	wantSRCode(t, err, 40401)
}

// Error bodies and status codes as Confluent's, for clients that read
// them (curl users too), and the content type.
func TestHTTPErrorBodies(t *testing.T) {
	_, srv, _ := serve(t)
	do := func(method, path, body string) (int, map[string]any, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", ContentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return resp.StatusCode, m, resp.Header
	}
	for _, tc := range []struct {
		method, path, body string
		status, code       int
	}{
		{"GET", "/subjects/nope/versions", "", 404, 40401},
		{"GET", "/subjects/nope/versions/1", "", 404, 40401},
		{"GET", "/schemas/ids/42", "", 404, 40403},
		{"GET", "/schemas/ids/x", "", 404, 40403},
		{"POST", "/subjects/s/versions", `{"schema":"{not avro"}`, 422, 42201},
		{"POST", "/subjects/s/versions", `{"schema":""}`, 422, 42201},
		{"POST", "/subjects/s/versions", `{"schema":"{\"type\":\"string\"}","schemaType":"XML"}`, 422, 42201},
		{"POST", "/subjects/s/versions", `not json`, 400, 400},
		{"PUT", "/config", `{"compatibility":"SIDEWAYS"}`, 422, 42203},
		{"PUT", "/mode", `{"mode":"SLEEPY"}`, 422, 42204},
		{"GET", "/config/s", "", 404, 40408},
		{"GET", "/mode/s", "", 404, 40409},
		{"GET", "/no/such/path", "", 404, 404},
	} {
		status, m, h := do(tc.method, tc.path, tc.body)
		if status != tc.status || m["error_code"] != float64(tc.code) || m["message"] == "" {
			t.Errorf("%s %s: %d %v, want %d with error_code %d and a message", tc.method, tc.path, status, m, tc.status, tc.code)
		}
		if ct := h.Get("Content-Type"); ct != ContentType {
			t.Errorf("%s %s: content type %q", tc.method, tc.path, ct)
		}
	}
	status, m, _ := do("POST", "/subjects/s/versions", `{"schema":"{\"type\":\"string\"}"}`)
	if status != 200 || m["id"] != float64(1) {
		t.Fatalf("register: %d %v", status, m)
	}
	status, _, _ = do("GET", "/subjects/s/versions/0", "")
	if status != 422 {
		t.Fatalf("version 0: %d, want 422 (42202)", status)
	}
	status, m, _ = do("POST", "/compatibility/subjects/s/versions/latest?verbose=true", `{"schema":"{\"type\":\"int\"}"}`)
	if status != 200 || m["is_compatible"] != false || len(m["messages"].([]any)) == 0 {
		t.Fatalf("verbose compatibility check: %d %v", status, m)
	}
	status, m, _ = do("GET", "/config", "")
	if status != 200 || m["compatibilityLevel"] != LevelBackward {
		t.Fatalf("GET /config: %d %v", status, m)
	}
}

// GET /schemas lists every version (franz-go's AllSchemas), by prefix,
// latest only, paged.
func TestHTTPAllSchemas(t *testing.T) {
	ctx := context.Background()
	_, srv, cl := serve(t)
	for _, s := range []struct{ subject, schema string }{{"orders-value", ordersV1}, {"orders-value", ordersV2}, {"payments-value", `"string"`}} {
		if _, err := cl.CreateSchema(ctx, s.subject, sr.Schema{Schema: s.schema}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := cl.AllSchemas(ctx)
	if err != nil || len(all) != 3 || all[0].Subject != "orders-value" || all[1].Version != 2 || all[2].Subject != "payments-value" {
		t.Fatalf("all schemas: %+v, %v", all, err)
	}
	for query, want := range map[string]int{"?subjectPrefix=orders": 2, "?latestOnly=true": 2, "?offset=1&limit=1": 1, "?offset=9": 0} {
		resp, err := http.Get(srv.URL + "/schemas" + query)
		if err != nil {
			t.Fatal(err)
		}
		var got []json.RawMessage
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || len(got) != want {
			t.Fatalf("/schemas%s: %d entries (%v), want %d", query, len(got), err, want)
		}
	}
}

// Protobuf through franz-go's client: an imported file as a reference,
// the importing schema, a compatible and an incompatible next version.
func TestHTTPProtobufWithFranzGoClient(t *testing.T) {
	ctx := context.Background()
	_, _, cl := serve(t)
	money := sr.Schema{Type: sr.TypeProtobuf, Schema: "syntax = \"proto3\";\npackage shop;\nmessage Money { string currency = 1; int64 units = 2; }"}
	m, err := cl.CreateSchema(ctx, "money", money)
	if err != nil {
		t.Fatal(err)
	}
	order := func(body string) sr.Schema {
		return sr.Schema{Type: sr.TypeProtobuf,
			Schema:     "syntax = \"proto3\";\npackage shop;\nimport \"shop/money.proto\";\nmessage Order {\n" + body + "\n}",
			References: []sr.SchemaReference{{Name: "shop/money.proto", Subject: "money", Version: m.Version}}}
	}
	v1, err := cl.CreateSchema(ctx, "orders-value", order("string id = 1; Money total = 2;"))
	if err != nil {
		t.Fatal(err)
	}
	if v1.Type != sr.TypeProtobuf || len(v1.References) != 1 {
		t.Fatalf("registered %+v", v1)
	}
	if _, err := cl.CreateSchema(ctx, "orders-value", order("string id = 1; Money total = 2; string note = 3;")); err != nil {
		t.Fatalf("field added: %v", err)
	}
	_, err = cl.CreateSchema(ctx, "orders-value", order("string id = 1; string total = 2;"))
	wantSRCode(t, err, 409)
	refs, err := cl.SchemaReferences(ctx, "money", 1)
	if err != nil || len(refs) != 2 {
		t.Fatalf("referenced by: %+v, %v", refs, err)
	}
	types, err := cl.SupportedTypes(ctx)
	if err != nil || len(types) != 3 {
		t.Fatalf("types %v, %v", types, err)
	}
}
