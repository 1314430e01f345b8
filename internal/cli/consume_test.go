package cli

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestStartOffset(t *testing.T) {
	for _, tc := range []struct {
		from bool
		in   string
		want int64 // kgo: -2 start, -1 end
	}{
		{false, "", -1},
		{false, "latest", -1},
		{false, "end", -1},
		{false, "earliest", -2},
		{false, "Beginning", -2},
		{false, "42", 42},
		{false, "0", 0},
		{true, "", -2},
		{true, "earliest", -2},
	} {
		got, err := startOffset(tc.from, tc.in)
		if err != nil {
			t.Errorf("startOffset(%v, %q): %v", tc.from, tc.in, err)
			continue
		}
		if o := got.EpochOffset().Offset; o != tc.want {
			t.Errorf("startOffset(%v, %q) = %d, want %d", tc.from, tc.in, o, tc.want)
		}
	}
	for _, tc := range []struct {
		from bool
		in   string
	}{{false, "-1"}, {false, "soon"}, {true, "latest"}, {true, "5"}} {
		if _, err := startOffset(tc.from, tc.in); err == nil {
			t.Errorf("startOffset(%v, %q) accepted", tc.from, tc.in)
		}
	}
}

func TestParseIsolation(t *testing.T) {
	for in, want := range map[string]kgo.IsolationLevel{
		"read_committed": kgo.ReadCommitted(), "READ_UNCOMMITTED": kgo.ReadUncommitted(), "": kgo.ReadUncommitted(),
	} {
		if got, err := parseIsolation(in); err != nil || got != want {
			t.Errorf("parseIsolation(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := parseIsolation("serializable"); err == nil {
		t.Error("serializable accepted")
	}
}

func sampleRecord() *kgo.Record {
	return &kgo.Record{
		Topic: "orders", Partition: 1, Offset: 42, Timestamp: time.UnixMilli(1700000000123),
		Key: []byte("k"), Value: []byte("v"),
		Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: nil}},
	}
}

func TestFormatRecordText(t *testing.T) {
	r := sampleRecord()
	for _, tc := range []struct {
		p    printOptions
		want string
	}{
		{printOptions{}, "v"},
		{printOptions{key: true}, "k\tv"},
		{printOptions{offset: true}, "Partition:1\tOffset:42\tv"},
		{printOptions{headers: true}, "a:1,b:null\tv"},
		{printOptions{timestamp: true}, "CreateTime:1700000000123\tv"},
		{printOptions{key: true, headers: true, offset: true, timestamp: true}, "CreateTime:1700000000123\tPartition:1\tOffset:42\ta:1,b:null\tk\tv"},
	} {
		if got := formatRecordText(r, tc.p); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.p, got, tc.want)
		}
	}
	empty := &kgo.Record{}
	if got := formatRecordText(empty, printOptions{key: true, headers: true}); got != "NO_HEADERS\tnull\tnull" {
		t.Errorf("nulls: got %q", got)
	}
}

func TestConsumeJSONShape(t *testing.T) {
	var b bytes.Buffer
	if err := writeJSONLine(&b, newJSONOutRecord(sampleRecord())); err != nil {
		t.Fatal(err)
	}
	want := `{"topic":"orders","partition":1,"offset":42,"timestamp":1700000000123,"key":"k","value":"v","headers":{"a":"1","b":null}}` + "\n"
	if b.String() != want {
		t.Errorf("got  %s\nwant %s", b.String(), want)
	}

	b.Reset()
	writeJSONLine(&b, newJSONOutRecord(&kgo.Record{Topic: "t", Value: []byte{0xff, 0xfe}}))
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m["key"] != nil || m["value"] != "//4=" || m["value_encoding"] != "base64" {
		t.Errorf("binary value rendered as %v", m)
	}
	if _, ok := m["key_encoding"]; ok {
		t.Errorf("null key has an encoding: %v", m)
	}
	if h, ok := m["headers"].(map[string]any); !ok || len(h) != 0 {
		t.Errorf("no headers should be {}, got %v", m["headers"])
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"headers", "key", "offset", "partition", "timestamp", "topic", "value", "value_encoding"}) {
		t.Errorf("keys %v", keys)
	}
}

func TestConsumeFlagErrorsBeforeConnecting(t *testing.T) {
	addr := closedPort(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"consume"}, "accepts 1 arg"},
		{[]string{"consume", "t", "--partition", "0", "--group", "g"}, "cannot be combined with --group"},
		{[]string{"consume", "t", "--offset", "soon"}, "--offset"},
		{[]string{"consume", "t", "--from-beginning", "--offset", "latest"}, "disagree"},
		{[]string{"consume", "t", "--format", "avro"}, "--format"},
		{[]string{"consume", "t", "--isolation", "x"}, "--isolation"},
		{[]string{"consume", "t", "--max-messages", "-1"}, "--max-messages"},
		{[]string{"consume", "t", "--timeout-idle", "-1s"}, "--timeout-idle"},
	} {
		_, _, err := runCLI(t, "", append(tc.args, "-b", addr)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}
