package cli

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func TestTableAligns(t *testing.T) {
	var b bytes.Buffer
	tb := newTable(&b, "topic", "partitions", "replication-factor")
	tb.row("orders", 12, 3)
	tb.row("a", 1, "has\ttab")
	if err := tb.flush(); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"TOPIC   PARTITIONS  REPLICATION-FACTOR\n" +
		"orders  12          3\n" +
		"a       1           has tab\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := writeJSON(&b, map[string]any{"a": "<x>", "n": 1}); err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"a\": \"<x>\",\n  \"n\": 1\n}\n"; b.String() != want {
		t.Errorf("writeJSON = %q, want %q", b.String(), want)
	}
	b.Reset()
	writeJSONLine(&b, struct {
		A int `json:"a"`
	}{1})
	writeJSONLine(&b, struct {
		A int `json:"a"`
	}{2})
	if want := "{\"a\":1}\n{\"a\":2}\n"; b.String() != want {
		t.Errorf("writeJSONLine = %q, want %q", b.String(), want)
	}
	dec := json.NewDecoder(&b)
	for dec.More() {
		var v map[string]int
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFormatters(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{joinInt32s([]int32{1, 2, 3}), "1,2,3"},
		{joinInt32s(nil), ""},
		{formatRate(0), "0.0"},
		{formatRate(999.94), "999.9"},
		{formatRate(1234567.89), "1,234,567.9"},
		{formatRate(-1234.5), "-1,234.5"},
		{formatMillis(42 * time.Microsecond), "0.042"},
		{formatMillis(1250 * time.Microsecond), "1.250"},
		{formatMillis(123456 * time.Microsecond), "123.5"},
		{formatMillis(2 * time.Second), "2000"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	if got := round3(1.23456); got != 1.235 {
		t.Errorf("round3 = %v", got)
	}
	if got := mib(3 << 20); got != 3 {
		t.Errorf("mib = %v", got)
	}
}
