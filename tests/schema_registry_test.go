package tests

import (
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// The seed's orders value schema: v2 adds an optional field, v3 renames
// total to amount (refused under BACKWARD).
const (
	seedOrdersV1 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"total","type":"double"}]}`
	seedOrdersV2 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"total","type":"double"},{"name":"currency","type":"string","default":"EUR"}]}`
	seedOrdersV3 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"amount","type":"double"},{"name":"currency","type":"string","default":"EUR"}]}`
)

type seedOrder struct {
	ID       string  `avro:"id"`
	Total    float64 `avro:"total"`
	Currency string  `avro:"currency"`
}

func srClient(t *testing.T, httpAddr string) *sr.Client {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs("http://" + httpAddr))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func wantSRError(t *testing.T, err error, code int, says string) {
	t.Helper()
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.ErrorCode != code || !strings.Contains(re.Message, says) {
		t.Fatalf("error %v, want registry error %d saying %q", err, code, says)
	}
}

// The seed scenario end to end on one node, through franz-go's registry
// client and kgo: v1 and v2 register under BACKWARD, v3 (total renamed to
// amount) is refused with 409 naming the field; the orders topic checks
// every value: raw JSON is refused with INVALID_RECORD and a message per
// record, records a serializer made go in and decode back.
func TestSchemaRegistrySeedScenario(t *testing.T) {
	n := tc.Start(t)
	ctx := ctxT(t, 60*time.Second)
	reg := srClient(t, n.HTTPAddr())

	v1, err := reg.CreateSchema(ctx, "orders-value", sr.Schema{Schema: seedOrdersV1})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := reg.CreateSchema(ctx, "orders-value", sr.Schema{Schema: seedOrdersV2})
	if err != nil {
		t.Fatal(err)
	}
	if v1.Version != 1 || v2.Version != 2 || v1.ID == v2.ID {
		t.Fatalf("v1 %+v, v2 %+v", v1, v2)
	}
	_, err = reg.CreateSchema(ctx, "orders-value", sr.Schema{Schema: seedOrdersV3})
	wantSRError(t, err, 409, "amount")
	if lvl := reg.Compatibility(ctx); len(lvl) != 1 || lvl[0].Level != sr.CompatBackward {
		t.Fatalf("global level %+v, want BACKWARD", lvl)
	}

	tc.CreateTopic(t, n.Addr(), "orders", 3, map[string]*string{"confluent.value.schema.validation": kadm.StringPtr("true")})
	cl := tc.Client(t, n.Addr(), kgo.RecordRetries(1), kgo.ProducerLinger(0))

	// Raw JSON, without the wire format: the whole batch is refused.
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte("order:HC-2048"), Value: []byte(`{"id":"HC-2048","total":42.5}`)}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("raw JSON to a gated topic: %v, want INVALID_RECORD", err)
	}

	var serde sr.Serde
	sch := avro.MustParse(v2.Schema.Schema)
	serde.Register(v2.ID, seedOrder{}, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(sch, v) }),
		sr.DecodeFn(func(b []byte, v any) error { return avro.Unmarshal(sch, b, v) }))
	var sent []seedOrder
	for i := range 20 {
		o := seedOrder{ID: fmt.Sprintf("HC-%d", 2048+i), Total: float64(i) + 0.5, Currency: "EUR"}
		b, err := serde.Encode(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte("order:" + o.ID), Value: b}).FirstErr(); err != nil {
			t.Fatalf("record %d with schema id %d: %v", i, v2.ID, err)
		}
		sent = append(sent, o)
	}
	got := map[string]seedOrder{}
	for _, r := range consumeN(t, n.Addr(), "orders", len(sent)) {
		var o seedOrder
		if err := serde.Decode(r.Value, &o); err != nil {
			t.Fatalf("decoding offset %d: %v", r.Offset, err)
		}
		got[o.ID] = o
	}
	for _, o := range sent {
		if got[o.ID] != o {
			t.Fatalf("order %s: consumed %+v, sent %+v", o.ID, got[o.ID], o)
		}
	}

	// The refusal names each refused record (Produce v8+ record errors),
	// on a raw request: one good record between two bad ones.
	good, _ := serde.Encode(sent[0])
	p := rawProduce(t, cl, "orders", valuesBatch([]string{`{"id":"x"}`, string(good), "plain"}))
	if p.ErrorCode != kerr.InvalidRecord.Code || p.ErrorMessage == nil || len(p.ErrorRecords) != 2 ||
		p.ErrorRecords[0].RelativeOffset != 0 || p.ErrorRecords[1].RelativeOffset != 2 ||
		!strings.Contains(*p.ErrorRecords[0].ErrorMessage, "wire format") {
		t.Fatalf("raw produce of bad, good, bad: %+v (message %v)", p, strDeref(p.ErrorMessage))
	}
	if v := scrapeMetric(t, n.HTTPAddr(), `berth_schema_validation_refused_records_total{topic="orders"}`); v != 3 {
		t.Fatalf("refused records metric %v, want 3", v)
	}
	// Nothing of a refused batch was appended.
	if got := consumeN(t, n.Addr(), "orders", len(sent)); len(got) != len(sent) {
		t.Fatalf("%d records in orders, want %d", len(got), len(sent))
	}

	// An ungated topic takes anything.
	tc.CreateTopic(t, n.Addr(), "raw-orders", 1, nil)
	if err := tc.Client(t, n.Addr()).ProduceSync(ctx, &kgo.Record{Topic: "raw-orders", Value: []byte(`{}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func strDeref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// confluent-kafka-python (Debian's python3-confluent-kafka, its
// SchemaRegistryClient, JSON Schema serde and Protobuf serde) against the
// registry and gated topics.
func TestSchemaRegistryConfluentPython(t *testing.T) {
	py := need(t, "/usr/bin/python3")
	if exec.Command(py, "-c", "import confluent_kafka.schema_registry.json_schema, jsonschema, requests").Run() != nil {
		need(t, "/nonexistent/python3-confluent-kafka python3-jsonschema python3-requests")
	}
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "py-orders", 2, map[string]*string{"confluent.value.schema.validation": kadm.StringPtr("true")})
	out := run(t, "", py, "testdata/confluent_schema_registry.py", n.Addr(), "http://"+n.HTTPAddr(), "py-orders", "50")
	if !strings.Contains(out, "ok 50") {
		t.Fatalf("script said %q", out)
	}
	if exec.Command(py, "-c", "import google.protobuf").Run() != nil {
		need(t, "/nonexistent/python3-protobuf")
	}
	tc.CreateTopic(t, n.Addr(), "py-proto-orders", 2, map[string]*string{"confluent.value.schema.validation": kadm.StringPtr("true")})
	out = run(t, "", py, "testdata/confluent_schema_registry_protobuf.py", n.Addr(), "http://"+n.HTTPAddr(), "py-proto-orders", "30")
	if !strings.Contains(out, "ok 30") {
		t.Fatalf("protobuf script said %q", out)
	}
}

// curl sees Confluent's error bodies and content type.
func TestSchemaRegistryCurl(t *testing.T) {
	curl := need(t, "/usr/bin/curl")
	n := tc.Start(t)
	base := "http://" + n.HTTPAddr()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{base + "/subjects/nope/versions"}, `{"error_code":40401,"message":"Subject 'nope' not found."}`},
		{[]string{base + "/schemas/ids/42"}, `{"error_code":40403,"message":"Schema not found"}`},
		{[]string{"-X", "POST", "-H", "Content-Type: application/vnd.schemaregistry.v1+json", "--data", `{"schema":"{\"type\":\"nope\"}"}`,
			base + "/subjects/s/versions"}, `"error_code":42201`},
		{[]string{"-X", "PUT", "--data", `{"compatibility":"SIDEWAYS"}`, base + "/config"}, `"error_code":42203`},
		{[]string{base + "/subjects/s/versions/zero"}, `"error_code":42202`},
	} {
		out := run(t, "", curl, append([]string{"-s", "-i"}, c.args...)...)
		if !strings.Contains(out, "Content-Type: application/vnd.schemaregistry.v1+json") || !strings.Contains(out, c.want) {
			t.Errorf("curl %v:\n%s\nwant %s", c.args, out, c.want)
		}
	}
}

// The registry reads _schemas as a consumer does, so a consumer quota
// that covers every client throttles its reads too: a throttled fetch
// comes back without data, and the registry must wait and read on, never
// skip to the high watermark (a skipped record is a schema lost).
func TestSchemaRegistryUnderConsumerQuota(t *testing.T) {
	n := tc.Start(t)
	ctx := ctxT(t, 90*time.Second)
	adm := tc.Admin(t, n.Addr())
	setQuotas(t, adm, kadm.ClientQuotaEntity{{Type: "client-id"}}, "consumer_byte_rate", 100.0)
	cl, err := sr.NewClient(sr.URLs("http://"+n.HTTPAddr()), sr.HTTPClient(&http.Client{Timeout: 60 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int]string{}
	const subjects = 3
	for i := range subjects {
		subject := fmt.Sprintf("quota-%d-value", i)
		s := fmt.Sprintf(`{"type":"record","name":"R%d","fields":[{"name":"f%d","type":"string"},{"name":"padding_to_make_it_longer","type":"long"}]}`, i, i)
		got, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: s})
		if err != nil {
			t.Fatalf("register %s: %v", subject, err)
		}
		if other, dup := ids[got.ID]; dup {
			t.Fatalf("%s got id %d, already %s's", subject, got.ID, other)
		}
		ids[got.ID] = subject
	}
	subs, err := cl.Subjects(ctx)
	if err != nil || len(subs) != subjects {
		t.Fatalf("subjects %v, %v; want %d", subs, err, subjects)
	}
	for id, subject := range ids {
		if _, err := cl.SchemaByID(ctx, id); err != nil {
			t.Errorf("schema %d of %s: %v", id, subject, err)
		}
	}
}
