package app

import (
	"context"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/berthmq/berth/internal/config"

	"github.com/berthmq/berth/internal/doccheck"
	"github.com/berthmq/berth/pkg/breaker"
	"github.com/berthmq/berth/pkg/outbox"
)

// docs/operations.md must list exactly the metrics a node registers, with
// their labels and types, and no doc may name a metric that does not exist,
// so the docs stay true when a metric is added, renamed or removed.
//
// Format checked, in the section "## HTTP: metrics and health":
//
//	| metric | type | meaning |
//	| `berth_partition_high_watermark{topic,partition}` | gauge | ... |
//
// The labels are the metric's variable labels in the order the code
// declares them, in braces, left out when there are none. The type is the
// one the metric is served with; a metric that has no sample on an idle
// node must follow Prometheus' naming rule (a counter's name ends in
// _total, a gauge's does not), which the test checks on the others too.
// The meaning is free text. Elsewhere in the docs, every berth_* name must
// be a registered metric, and berth_xyz_* a prefix of at least one.

const opsDoc = "../../docs/operations.md"

type metricDef struct {
	name   string
	labels []string
	typ    string // "counter" or "gauge"
}

func (m metricDef) docName() string {
	if len(m.labels) == 0 {
		return m.name
	}
	return m.name + "{" + strings.Join(m.labels, ",") + "}"
}

// descRecorder is a Registerer that keeps the descriptors of every
// collector registered through it, and registers them on reg too.
type descRecorder struct {
	reg   *prometheus.Registry
	descs []*prometheus.Desc
}

func (r *descRecorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		r.descs = append(r.descs, d)
	}
	return r.reg.Register(c)
}

func (r *descRecorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *descRecorder) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

var descRE = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", .*variableLabels: \{([^}]*)\}\}$`)

// nodeMetrics starts a node and returns every metric registerMetrics
// registers, by name.
func nodeMetrics(t *testing.T) map[string]metricDef {
	t.Helper()
	cfg := config.Defaults()
	for k, v := range map[string]string{
		"log.dirs":               t.TempDir(),
		"listeners":              "PLAINTEXT://127.0.0.1:0",
		"http.listener":          "",
		"log.dir.min.free.bytes": "0",
	} {
		if err := cfg.Set(k, v, config.SourceFlag); err != nil {
			t.Fatal(err)
		}
	}
	n, err := Start(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })

	rec := &descRecorder{reg: prometheus.NewRegistry()}
	n.registerMetrics(rec)
	out := map[string]metricDef{}
	for _, d := range rec.descs {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot parse metric descriptor %s", d)
		}
		def := metricDef{name: m[1]}
		if m[2] != "" {
			def.labels = strings.Split(m[2], ",")
		}
		if _, dup := out[def.name]; dup {
			t.Fatalf("metric %s is registered twice", def.name)
		}
		out[def.name] = def
	}
	families, err := rec.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]string{}
	for _, f := range families {
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			served[f.GetName()] = "counter"
		case dto.MetricType_GAUGE:
			served[f.GetName()] = "gauge"
		default:
			served[f.GetName()] = strings.ToLower(f.GetType().String())
		}
	}
	for name, def := range out {
		byName := "gauge"
		if strings.HasSuffix(name, "_total") {
			byName = "counter"
		}
		def.typ = byName
		if typ, ok := served[name]; ok {
			def.typ = typ
			if typ == "histogram" && !strings.HasSuffix(name, "_total") {
				byName = typ // a histogram is named for its unit: _seconds, _bytes
			}
			if typ != byName {
				t.Errorf("metric %s is a %s; a counter's name ends in _total and a gauge's does not: rename it", name, typ)
			}
		}
		out[name] = def
	}
	return out
}

func TestOperationsDocListsEveryMetric(t *testing.T) {
	b, err := os.ReadFile(opsDoc)
	if err != nil {
		t.Fatal(err)
	}
	rows := metricTable(string(b), "## HTTP: metrics and health")
	metrics := nodeMetrics(t)

	names := make([]string, 0, len(metrics))
	for name := range metrics {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		m := metrics[name]
		want := "| `" + m.docName() + "` | " + m.typ + " | "
		got, ok := rows[name]
		switch {
		case !ok:
			t.Errorf("%s: section \"HTTP: metrics and health\" has no row for metric %s; add:\n%s<meaning> |", opsDoc, name, want)
		case got[0] != "`"+m.docName()+"`" || got[1] != m.typ:
			t.Errorf("%s: row for metric %s starts %q, want:\n%s<meaning> |", opsDoc, name, "| "+got[0]+" | "+got[1]+" |", want)
		}
	}
	for name := range rows {
		if _, ok := metrics[name]; !ok {
			t.Errorf("%s: section \"HTTP: metrics and health\" lists metric %s, which the node does not register (internal/app registerMetrics); remove its row", opsDoc, name)
		}
	}
}

// libraryNames are the berth_* names of the Go packages under pkg/:
// their collectors' metrics (Relay.Collector, Breaker.Collector) and the
// outbox's and inbox's default tables.
func libraryNames(t *testing.T) map[string]bool {
	names := map[string]bool{}
	ob, err := outbox.New(outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	names[ob.Config().Table] = true
	names[ob.Config().Table+"_shards"] = true
	names["berth_inbox"] = true
	ch := make(chan *prometheus.Desc, 16)
	(&outbox.Relay{}).Collector().Describe(ch)
	breaker.New(breaker.Options{}).Collector().Describe(ch)
	close(ch)
	fq := regexp.MustCompile(`fqName: "([a-z0-9_]+)"`)
	for d := range ch {
		if m := fq.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
		}
	}
	if len(names) < 8 {
		t.Fatalf("library names %v: the collectors' descriptions did not parse", names)
	}
	return names
}

// Every berth_* name in the docs is a metric the node registers (or one
// of the pkg/ libraries' names).
func TestDocsNameOnlyRegisteredMetrics(t *testing.T) {
	metrics := nodeMetrics(t)
	lib := libraryNames(t)
	nameRE := regexp.MustCompile(`\bberth_[a-z0-9_]+`)
	for _, path := range docFiles(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, name := range nameRE.FindAllString(line, -1) {
				if strings.HasSuffix(name, "_") { // a prefix: berth_share_*
					if !slices.ContainsFunc(slices.Collect(maps.Keys(metrics)), func(m string) bool { return strings.HasPrefix(m, name) }) {
						t.Errorf("%s:%d: no metric starts with %s", path, i+1, name)
					}
					continue
				}
				if base, ok := strings.CutSuffix(name, "_bucket"); ok && metrics[base].typ == "histogram" {
					name = base // a histogram's series: _bucket (and _sum, _count, which end like other names)
				}
				if _, ok := metrics[name]; !ok && !lib[name] {
					t.Errorf("%s:%d: %s is not a metric the node registers (internal/app registerMetrics); correct or remove it", path, i+1, name)
				}
			}
		}
	}
}

// docFiles lists the user docs: README.md, docs/**/*.md and the examples'
// READMEs.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := doccheck.Files("../..")
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// metricTable returns the rows (cells, by metric name without labels) of
// the metric table between heading and the next "## " heading.
func metricTable(doc, heading string) map[string][]string {
	rows := map[string][]string{}
	for _, cells := range doccheck.Rows(doc, heading, "| `berth_") {
		if len(cells) < 3 {
			cells = append(cells, "", "")
		}
		name, _, _ := strings.Cut(strings.Trim(cells[0], "`"), "{")
		rows[name] = cells
	}
	return rows
}

// The log lines docs/operations.md quotes (its "Logs" table and every
// msg="..." or msg=word) are logged by the code: each is the start of a
// string literal in a non-test Go file under internal/.
func TestOperationsDocQuotesRealLogLines(t *testing.T) {
	b, err := os.ReadFile(opsDoc)
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := os.ReadFile(path)
		src.Write(f)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	code := src.String()

	type quote struct {
		line int
		msg  string
	}
	var quotes []quote
	msgRE := regexp.MustCompile(`msg=(?:"([^"]+)"|([a-z]+))`)
	inLogs := false
	for i, line := range strings.Split(string(b), "\n") {
		for _, m := range msgRE.FindAllStringSubmatch(line, -1) {
			quotes = append(quotes, quote{i + 1, m[1] + m[2]})
		}
		switch {
		case line == "## Logs":
			inLogs = true
		case strings.HasPrefix(line, "## "):
			inLogs = false
		}
		cells := strings.Split(line, "|")
		if !inLogs || len(cells) < 4 || !strings.Contains(cells[2], "`") {
			continue
		}
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cells[2], -1) {
			quotes = append(quotes, quote{i + 1, strings.TrimSpace(strings.TrimSuffix(m[1], "..."))})
		}
	}
	if len(quotes) == 0 {
		t.Fatalf("%s: no log lines found", opsDoc)
	}
	for _, q := range quotes {
		if !strings.Contains(code, `"`+q.msg) {
			t.Errorf("%s:%d: quotes the log line %q, which no code under internal/ logs; correct or remove it", opsDoc, q.line, q.msg)
		}
	}

	// The components named in log lines (logger.With("component", X)).
	inCode := map[string]bool{}
	for _, m := range regexp.MustCompile(`"component", "([a-z]+)"`).FindAllStringSubmatch(code, -1) {
		inCode[m[1]] = true
	}
	logs := string(b)[strings.Index(string(b), "\n## Logs\n"):]
	inDoc := map[string]bool{}
	for _, m := range regexp.MustCompile("`component=([a-z]+)`").FindAllStringSubmatch(logs, -1) {
		inDoc[m[1]] = true
	}
	for c := range inCode {
		if !inDoc[c] {
			t.Errorf("%s: section \"Logs\" does not name `component=%s`, which log lines carry; add it", opsDoc, c)
		}
	}
	for c := range inDoc {
		if !inCode[c] {
			t.Errorf("%s: section \"Logs\" names `component=%s`, which no log line carries; remove it", opsDoc, c)
		}
	}
}
