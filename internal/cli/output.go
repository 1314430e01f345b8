package cli

// Output helpers shared by the client commands: aligned tables for people,
// JSON for programs. Human output goes through table; --json output through
// writeJSON (one document) or writeJSONLine (a stream, one object per line).

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// table writes rows aligned in columns, with an upper-case header row.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	if len(header) > 0 {
		upper := make([]any, len(header))
		for i, h := range header {
			upper[i] = strings.ToUpper(h)
		}
		t.row(upper...)
	}
	return t
}

// row adds one row; each value is printed with fmt's %v.
func (t *table) row(cols ...any) {
	var b strings.Builder
	for i, c := range cols {
		if i > 0 {
			b.WriteByte('\t')
		}
		// Tabs or newlines inside a cell would break the alignment.
		b.WriteString(strings.NewReplacer("\t", " ", "\n", " ").Replace(fmt.Sprint(c)))
	}
	b.WriteByte('\n')
	t.tw.Write([]byte(b.String()))
}

func (t *table) flush() error { return t.tw.Flush() }

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONLine writes v as one compact JSON object on its own line, for
// streams of records or results.
func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// joinInt32s formats replica lists: [1 2 3] as "1,2,3".
func joinInt32s(is []int32) string {
	s := make([]string, len(is))
	for i, v := range is {
		s[i] = strconv.FormatInt(int64(v), 10)
	}
	return strings.Join(s, ",")
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// formatMillis formats a duration as milliseconds with enough precision for
// sub-millisecond latencies: 0.042, 1.25, 1234.
func formatMillis(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 10:
		return strconv.FormatFloat(ms, 'f', 3, 64)
	case ms < 1000:
		return strconv.FormatFloat(ms, 'f', 1, 64)
	default:
		return strconv.FormatFloat(ms, 'f', 0, 64)
	}
}

// formatAge formats OldestUnconsumedAgeMs: "-" unknown, "0s" caught up, then
// 850ms, 4.2s, 42s, 4m12s, 3h4m, 2d3h.
func formatAge(ms int64) string {
	if ms < 0 {
		return "-"
	}
	d := time.Duration(ms) * time.Millisecond
	switch {
	case ms == 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", ms)
	case d < 10*time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int64(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int64(d/time.Minute), int64(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%dm", int64(d/time.Hour), int64(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%dh", int64(d/(24*time.Hour)), int64(d%(24*time.Hour)/time.Hour))
}

// formatRate formats a per-second rate with one decimal and thousands
// separators: 123456.7 -> "123,456.7".
func formatRate(v float64) string {
	s := strconv.FormatFloat(v, 'f', 1, 64)
	intPart, frac, _ := strings.Cut(s, ".")
	neg := strings.HasPrefix(intPart, "-")
	intPart = strings.TrimPrefix(intPart, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	b.WriteByte('.')
	b.WriteString(frac)
	return b.String()
}

// mib converts bytes to MiB.
func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }

// round3 rounds to 3 decimals so JSON output does not carry float noise.
func round3(v float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', 3, 64), 64)
	return f
}

func plural(n int, what string) string {
	if n <= 0 {
		return "default " + what + "s"
	}
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func offsetOrDash(o int64) string {
	if o < 0 {
		return "-"
	}
	return fmt.Sprint(o)
}

func dashIfNegative(v int64) string {
	if v < 0 {
		return "-"
	}
	return strconv.FormatInt(v, 10)
}
