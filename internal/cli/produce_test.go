package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestAcksOpts(t *testing.T) {
	for _, tc := range []struct {
		in         string
		acks       kgo.Acks
		idempotent bool
	}{
		{"all", kgo.AllISRAcks(), true},
		{"-1", kgo.AllISRAcks(), true},
		{"1", kgo.LeaderAck(), false},
		{"leader", kgo.LeaderAck(), false},
		{"0", kgo.NoAck(), false},
	} {
		opts, err := acksOpts(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		// kgo validates the combination (idempotence needs acks=all) when
		// the client is built; building one dials nothing.
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(closedPort(t)))...)
		if err != nil {
			t.Fatalf("--acks %s: %v", tc.in, err)
		}
		if got := cl.OptValue(kgo.RequiredAcks); got != tc.acks {
			t.Errorf("--acks %s: acks %v, want %v", tc.in, got, tc.acks)
		}
		if disabled := cl.OptValue(kgo.DisableIdempotentWrite) == true; disabled == tc.idempotent {
			t.Errorf("--acks %s: idempotent = %v, want %v", tc.in, !disabled, tc.idempotent)
		}
		cl.Close()
	}
	if _, err := acksOpts("2"); err == nil || !strings.Contains(err.Error(), "want all, 1 or 0") {
		t.Errorf("--acks 2: %v", err)
	}
}

func TestParseCompression(t *testing.T) {
	for in, want := range map[string]kgo.CompressionCodec{
		"":       kgo.NoCompression(),
		"none":   kgo.NoCompression(),
		"gzip":   kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(),
		"LZ4":    kgo.Lz4Compression(),
		"zstd":   kgo.ZstdCompression(),
	} {
		got, err := parseCompression(in)
		if err != nil || got != want {
			t.Errorf("parseCompression(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseCompression("brotli"); err == nil {
		t.Error("brotli accepted")
	}
}

func TestParseHeaders(t *testing.T) {
	got, err := parseHeaders([]string{"a=1", "b=x=y", "c=", "a=2"})
	if err != nil {
		t.Fatal(err)
	}
	want := []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("x=y")}, {Key: "c", Value: []byte("")}, {Key: "a", Value: []byte("2")}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"novalue", "=v"} {
		if _, err := parseHeaders([]string{bad}); err == nil {
			t.Errorf("--header %q accepted", bad)
		}
	}
}

// recordView is a comparable summary of a parsed record.
type recordView struct {
	Key, Value *string
	Headers    string
	Partition  int32
	Pinned     bool
}

func viewOf(pr parsedRecord) recordView {
	s := func(b []byte) *string {
		if b == nil {
			return nil
		}
		v := string(b)
		return &v
	}
	var hs []string
	for _, h := range pr.rec.Headers {
		hs = append(hs, h.Key+"="+string(h.Value))
	}
	return recordView{s(pr.rec.Key), s(pr.rec.Value), strings.Join(hs, ","), pr.rec.Partition, pr.pinned}
}

func sp(s string) *string { return &s }

func TestRecordParser(t *testing.T) {
	hdr := []kgo.RecordHeader{{Key: "src", Value: []byte("cli")}}
	for _, tc := range []struct {
		name    string
		p       recordParser
		line    string
		want    recordView
		wantErr string
	}{
		{"text value only", recordParser{format: "text", partition: -1}, "hello world", recordView{Value: sp("hello world"), Partition: -1}, ""},
		{"text empty line is an empty value", recordParser{format: "text", partition: -1}, "", recordView{Value: sp(""), Partition: -1}, ""},
		{"text strips CR", recordParser{format: "text", partition: -1}, "v\r", recordView{Value: sp("v"), Partition: -1}, ""},
		{"key at first separator", recordParser{format: "text", keySep: ":", partition: -1}, "k:v:w", recordView{Key: sp("k"), Value: sp("v:w"), Partition: -1}, ""},
		{"multi-char separator", recordParser{format: "text", keySep: "::", partition: -1}, "a::b", recordView{Key: sp("a"), Value: sp("b"), Partition: -1}, ""},
		{"empty key", recordParser{format: "text", keySep: ":", partition: -1}, ":v", recordView{Key: sp(""), Value: sp("v"), Partition: -1}, ""},
		{"missing separator", recordParser{format: "text", keySep: ":", partition: -1}, "nokey", recordView{}, "no key separator"},
		{"flag headers and partition", recordParser{format: "text", headers: hdr, partition: 2}, "v", recordView{Value: sp("v"), Headers: "src=cli", Partition: 2, Pinned: true}, ""},
		{"json strings", recordParser{format: "json", partition: -1}, `{"key":"k","value":"v"}`, recordView{Key: sp("k"), Value: sp("v"), Partition: -1}, ""},
		{"json null and missing", recordParser{format: "json", partition: -1}, `{"key":null}`, recordView{Partition: -1}, ""},
		{"json empty string is empty, not null", recordParser{format: "json", partition: -1}, `{"value":""}`, recordView{Value: sp(""), Partition: -1}, ""},
		{"json raw object value", recordParser{format: "json", partition: -1}, `{"value": {"a": [1, 2]} }`, recordView{Value: sp(`{"a": [1, 2]}`), Partition: -1}, ""},
		{"json number key", recordParser{format: "json", partition: -1}, `{"key":42,"value":"v"}`, recordView{Key: sp("42"), Value: sp("v"), Partition: -1}, ""},
		{"json headers sorted after flag headers", recordParser{format: "json", headers: hdr, partition: -1}, `{"value":"v","headers":{"z":"1","a":"2"}}`, recordView{Value: sp("v"), Headers: "src=cli,a=2,z=1", Partition: -1}, ""},
		{"json partition pins", recordParser{format: "json", partition: -1}, `{"value":"v","partition":3}`, recordView{Value: sp("v"), Partition: 3, Pinned: true}, ""},
		{"json partition beats --partition", recordParser{format: "json", partition: 1}, `{"value":"v","partition":3}`, recordView{Value: sp("v"), Partition: 3, Pinned: true}, ""},
		{"json base64", recordParser{format: "json", partition: -1}, `{"key":"AAE=","key_encoding":"base64","value":"aGk=","value_encoding":"base64"}`, recordView{Key: sp("\x00\x01"), Value: sp("hi"), Partition: -1}, ""},
		{"json unknown fields ignored", recordParser{format: "json", partition: -1}, `{"topic":"x","offset":5,"timestamp":1,"value":"v"}`, recordView{Value: sp("v"), Partition: -1}, ""},
		{"json bad", recordParser{format: "json", partition: -1}, `{"value":`, recordView{}, "not a JSON record object"},
		{"json not an object", recordParser{format: "json", partition: -1}, `"v"`, recordView{}, "not a JSON record object"},
		{"json negative partition", recordParser{format: "json", partition: -1}, `{"partition":-2}`, recordView{}, "partition -2"},
		{"json bad base64", recordParser{format: "json", partition: -1}, `{"value":"!!","value_encoding":"base64"}`, recordView{}, "bad base64"},
		{"json unknown encoding", recordParser{format: "json", partition: -1}, `{"value":"v","value_encoding":"hex"}`, recordView{}, "unknown encoding"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, err := tc.p.parse(tc.line)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := viewOf(pr)
			if fmt.Sprintf("%+v", deref(got)) != fmt.Sprintf("%+v", deref(tc.want)) {
				t.Errorf("got %+v, want %+v", deref(got), deref(tc.want))
			}
		})
	}
}

// deref makes recordView printable with its pointed-to strings.
func deref(v recordView) string {
	s := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return fmt.Sprintf("%q", *p)
	}
	return fmt.Sprintf("key=%s value=%s headers=%q partition=%d pinned=%v", s(v.Key), s(v.Value), v.Headers, v.Partition, v.Pinned)
}

// TestFlagHeadersNotShared guards against records aliasing the --header
// slice: appending a JSON line's headers must not leak into other records.
func TestFlagHeadersNotShared(t *testing.T) {
	p := recordParser{format: "json", headers: make([]kgo.RecordHeader, 1, 4), partition: -1}
	p.headers[0] = kgo.RecordHeader{Key: "f", Value: []byte("1")}
	a, _ := p.parse(`{"headers":{"a":"x"}}`)
	b, _ := p.parse(`{"headers":{"b":"y"}}`)
	if got := viewOf(a).Headers; got != "f=1,a=x" {
		t.Errorf("first record headers %q", got)
	}
	if got := viewOf(b).Headers; got != "f=1,b=y" {
		t.Errorf("second record headers %q", got)
	}
}

// TestConsumeJSONRoundTripsThroughProduce checks that what `consume --format
// json` writes, `produce --format json` reads back to the same record.
func TestConsumeJSONRoundTripsThroughProduce(t *testing.T) {
	in := &kgo.Record{
		Topic: "t", Partition: 2, Offset: 9, Timestamp: time.UnixMilli(1700000000000),
		Key: []byte{0xff, 0x00}, Value: []byte(`{"json":"value"}`),
		Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}},
	}
	line, err := json.Marshal(newJSONOutRecord(in))
	if err != nil {
		t.Fatal(err)
	}
	p := recordParser{format: "json", partition: -1}
	pr, err := p.parse(string(line))
	if err != nil {
		t.Fatalf("parse %s: %v", line, err)
	}
	if !bytes.Equal(pr.rec.Key, in.Key) || !bytes.Equal(pr.rec.Value, in.Value) || pr.rec.Partition != 2 || !pr.pinned {
		t.Errorf("round trip of %s gave key %q value %q partition %d", line, pr.rec.Key, pr.rec.Value, pr.rec.Partition)
	}
	if len(pr.rec.Headers) != 1 || pr.rec.Headers[0].Key != "h" || string(pr.rec.Headers[0].Value) != "v" {
		t.Errorf("headers %v", pr.rec.Headers)
	}
}

// fakeTopicPartitioner records what it was asked.
type fakeTopicPartitioner struct {
	calls      int
	newBatch   int
	consistent bool
}

func (f *fakeTopicPartitioner) RequiresConsistency(*kgo.Record) bool { return f.consistent }
func (f *fakeTopicPartitioner) Partition(*kgo.Record, int) int       { f.calls++; return 7 }
func (f *fakeTopicPartitioner) OnNewBatch()                          { f.newBatch++ }

type fakePartitioner struct{ tp *fakeTopicPartitioner }

func (f fakePartitioner) ForTopic(string) kgo.TopicPartitioner { return f.tp }

func TestPinnedPartitioner(t *testing.T) {
	inner := &fakeTopicPartitioner{}
	tp := pinnedPartitioner{fakePartitioner{inner}}.ForTopic("t").(*pinnedTopicPartitioner)

	pinned := &kgo.Record{Partition: 3, Context: context.WithValue(context.Background(), pinKey{}, true)}
	if !tp.RequiresConsistency(pinned) || tp.Partition(pinned, 10) != 3 || tp.PartitionByBackup(pinned, 10, nil) != 3 {
		t.Error("a pinned record did not keep its partition")
	}
	if inner.calls != 0 {
		t.Error("the inner partitioner was asked about a pinned record")
	}
	free := &kgo.Record{Partition: 3}
	if tp.RequiresConsistency(free) || tp.Partition(free, 10) != 7 || tp.PartitionByBackup(free, 10, nil) != 7 {
		t.Error("an unpinned record was not left to the inner partitioner")
	}
	tp.OnNewBatch()
	if inner.newBatch != 1 {
		t.Error("OnNewBatch not forwarded")
	}
	// The real default must be a backup partitioner, or PartitionByBackup
	// would panic through Partition.
	if _, ok := defaultPartitioner().ForTopic("t").(kgo.TopicBackupPartitioner); !ok {
		t.Error("kgo's default partitioner is no longer a TopicBackupPartitioner; pinnedTopicPartitioner needs a look")
	}
}

func TestProduceReporter(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		var out, errOut bytes.Buffer
		r := &produceReporter{cf: &clientFlags{json: asJSON, bootstrap: "x"}, out: &out, errOut: &errOut, sum: produceSummary{Topic: "t"}}
		r.done(1, &kgo.Record{Topic: "t", Partition: 1, Offset: 41}, nil)
		r.failed(2, "t", -1, errors.New("line 2: bad"))
		r.done(3, &kgo.Record{Topic: "t", Partition: 0, Offset: 7}, nil)
		err := r.finish()
		if err == nil || !strings.Contains(err.Error(), "1 of 3 records failed") {
			t.Errorf("json=%v: finish error %v", asJSON, err)
		}
		if !asJSON {
			if want := "Produced 2 of 3 records to t (1 errors).\n"; out.String() != want {
				t.Errorf("stdout %q, want %q", out.String(), want)
			}
			if !strings.Contains(errOut.String(), "error: line 2: bad") {
				t.Errorf("stderr %q", errOut.String())
			}
			continue
		}
		var results []produceResult
		dec := json.NewDecoder(&out)
		for dec.More() {
			var pr produceResult
			if err := dec.Decode(&pr); err != nil {
				t.Fatal(err)
			}
			results = append(results, pr)
		}
		want := []produceResult{
			{Record: 1, Topic: "t", Partition: 1, Offset: 41},
			{Record: 2, Topic: "t", Partition: -1, Offset: -1, Error: "line 2: bad"},
			{Record: 3, Topic: "t", Partition: 0, Offset: 7},
		}
		if !slices.Equal(results, want) {
			t.Errorf("json results %+v, want %+v", results, want)
		}
		if !strings.Contains(errOut.String(), "Produced 2 of 3") {
			t.Errorf("json mode should put the summary on stderr, got %q", errOut.String())
		}
	}
}

func TestProduceFlagErrorsBeforeConnecting(t *testing.T) {
	addr := closedPort(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"produce"}, "accepts 1 arg"},
		{[]string{"produce", "t", "--acks", "2"}, "--acks"},
		{[]string{"produce", "t", "--compression", "brotli"}, "--compression"},
		{[]string{"produce", "t", "--format", "xml"}, "--format"},
		{[]string{"produce", "t", "--header", "x"}, "--header"},
		{[]string{"produce", "t", "--partition", "-2"}, "--partition"},
		{[]string{"produce", "t", "--format", "json", "--key-separator", ":"}, "--key-separator"},
	} {
		_, _, err := runCLI(t, "", append(tc.args, "-b", addr)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

// TestIntegrationProduceConsume writes keyed records with headers through
// `berth produce` and reads them back with `berth consume`, directly and
// as a group.
func TestIntegrationProduceConsume(t *testing.T) {
	addr := integrationBootstrap(t)
	topic := uniqueTopic(t)
	if _, _, err := runCLI(t, "", "topic", "create", topic, "--partitions", "1", "-b", addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runCLI(t, "", "topic", "delete", topic, "-b", addr) })

	out, errOut, err := runCLI(t, "k1:v1\nk2:v2\nk3:v3\n", "produce", topic, "--key-separator", ":", "--header", "src=test", "--json", "-b", addr)
	if err != nil {
		t.Fatalf("produce: %v\n%s", err, errOut)
	}
	offsets := map[int64]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r produceResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("produce --json line %q: %v", line, err)
		}
		if r.Error != "" || r.Partition != 0 {
			t.Errorf("produce result %+v", r)
		}
		offsets[r.Offset] = true
	}
	if len(offsets) != 3 || !offsets[0] || !offsets[2] {
		t.Errorf("produce offsets %v, want 0, 1, 2", offsets)
	}

	out, errOut, err = runCLI(t, "", "consume", topic, "--from-beginning", "--max-messages", "3", "--format", "json", "-b", addr)
	if err != nil {
		t.Fatalf("consume: %v\n%s", err, errOut)
	}
	var got []jsonOutRecord
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r jsonOutRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("consume line %q: %v", line, err)
		}
		got = append(got, r)
	}
	if len(got) != 3 {
		t.Fatalf("consumed %d records, want 3", len(got))
	}
	for i, r := range got {
		k, v := fmt.Sprintf("k%d", i+1), fmt.Sprintf("v%d", i+1)
		if r.Key == nil || *r.Key != k || r.Value == nil || *r.Value != v || r.Offset != int64(i) || r.Topic != topic {
			t.Errorf("record %d: %+v, want key %s value %s", i, r, k, v)
		}
		if h := r.Headers["src"]; h == nil || *h != "test" {
			t.Errorf("record %d headers %v", i, r.Headers)
		}
		if r.Timestamp <= 0 {
			t.Errorf("record %d timestamp %d", i, r.Timestamp)
		}
	}
	if !strings.Contains(errOut, "Processed a total of 3 messages") {
		t.Errorf("consume stderr %q", errOut)
	}

	out, _, err = runCLI(t, "", "consume", topic, "--partition", "0", "--offset", "1", "--max-messages", "1", "--print-key", "--print-offset", "--print-headers", "-b", addr)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Partition:0\tOffset:1\tsrc:test\tk2\tv2\n"; out != want {
		t.Errorf("text consume = %q, want %q", out, want)
	}

	// A group commits exactly what it printed: two, then the third.
	t.Run("group", func(t *testing.T) {
		group := topic + "-g"
		out, _, err := runCLI(t, "", "consume", topic, "--group", group, "--offset", "earliest", "--max-messages", "2", "-b", addr)
		if err != nil && strings.Contains(err.Error(), "does not support consumer groups") {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if out != "v1\nv2\n" {
			t.Errorf("group first run = %q", out)
		}
		out, _, err = runCLI(t, "", "consume", topic, "--group", group, "--offset", "earliest", "--max-messages", "1", "-b", addr)
		if err != nil {
			t.Fatal(err)
		}
		if out != "v3\n" {
			t.Errorf("group second run = %q, want the record after the commit", out)
		}
	})

	// --timeout-idle ends a consumer that has caught up.
	start := time.Now()
	out, _, err = runCLI(t, "", "consume", topic, "--from-beginning", "--timeout-idle", "1s", "-b", addr)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "\n"); n != 3 {
		t.Errorf("idle consume printed %d records, want 3", n)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("idle consume took %s", d)
	}
}
