package config

import (
	"os"
	"strings"
	"testing"

	"github.com/berthmq/berth/internal/doccheck"
)

// The settings tables of docs/configuration.md must match the code, so the
// docs stay true when a setting is added, removed or changed.
//
// Format checked (the description column is free text and not checked):
//
//	## Broker settings
//	| setting | default | dynamic | topic-level name | description |
//	| `log.retention.ms` | `604800000` | yes | `retention.ms` | ... |
//
//	## Topic settings
//	| setting | default | broker setting | description |
//	| `retention.ms` | `604800000` | `log.retention.ms` | ... |
//
//	## Group configs
//	| setting | default | broker setting | description |
//	| `share.delivery.count.limit` | `5` | `group.share.delivery.count.limit` | ... |
//
// An empty default is written (empty), a computed one in words
// (Def.Computed); a missing topic-level or broker name is written —.

const configDoc = "../../docs/configuration.md"

func TestConfigurationDocListsEverySetting(t *testing.T) {
	b, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatalf("reading %s: %v", configDoc, err)
	}
	doc := string(b)
	broker := docTable(t, doc, "## Broker settings")
	topic := docTable(t, doc, "## Topic settings")

	for _, d := range BrokerDefs() {
		want := []string{code(d.Name), docDefault(d), yesNo(d.Dynamic), nameOrDash(d.Topic)}
		checkRow(t, "Broker settings", broker, d, want)
	}
	for _, d := range TopicDefs() {
		want := []string{code(d.Name), docDefault(d), nameOrDash(d.Topic)}
		checkRow(t, "Topic settings", topic, d, want)
	}
	group := docTable(t, doc, "## Group configs")
	for _, d := range GroupDefs() {
		want := []string{code(d.Name), docDefault(d), nameOrDash(d.Topic)}
		checkRow(t, "Group configs", group, d, want)
	}
	for name := range group {
		if _, ok := LookupGroup(name); !ok {
			t.Errorf("%s: section \"Group configs\" documents %q, which is not a group config (config.GroupDefs); remove its row", configDoc, name)
		}
	}
	for name := range broker {
		if _, ok := LookupBroker(name); !ok {
			t.Errorf("%s: section \"Broker settings\" documents %q, which is not a broker setting (config.BrokerDefs); remove its row", configDoc, name)
		}
	}
	for name := range topic {
		if _, ok := LookupTopic(name); !ok {
			t.Errorf("%s: section \"Topic settings\" documents %q, which is not a topic setting (config.TopicDefs); remove its row", configDoc, name)
		}
	}
	if !strings.Contains(doc, "BERTH_LOG_LEVEL") {
		t.Errorf("%s does not mention BERTH_LOG_LEVEL", configDoc)
	}
}

func checkRow(t *testing.T, section string, rows map[string][]string, d Def, want []string) {
	t.Helper()
	row := "| " + strings.Join(want, " | ") + " | " + d.Doc + " |"
	got, ok := rows[d.Name]
	if !ok {
		t.Errorf("%s: section %q has no row for %s; add:\n%s", configDoc, section, d.Name, row)
		return
	}
	if len(got) < len(want)+1 {
		t.Errorf("%s: section %q: row for %s has %d columns, want %d (the last a description)", configDoc, section, d.Name, len(got), len(want)+1)
		return
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s: section %q: row for %s: column %d is %q, want %q; the row should start:\n%s",
				configDoc, section, d.Name, i+1, got[i], want[i], "| "+strings.Join(want, " | ")+" |")
		}
	}
}

// docTable returns the table rows (by setting name, without backquotes)
// between heading and the next "## " heading; a setting listed twice is an
// error.
func docTable(t *testing.T, doc, heading string) map[string][]string {
	t.Helper()
	rows := map[string][]string{}
	for _, cells := range doccheck.Rows(doc, heading, "| `") {
		name := strings.Trim(cells[0], "`")
		if _, dup := rows[name]; dup {
			t.Errorf("%s: section %q lists %s twice; remove one row", configDoc, strings.TrimPrefix(heading, "## "), name)
		}
		rows[name] = cells
	}
	return rows
}

func code(s string) string { return "`" + s + "`" }

// docDefault is the default column: the value in backquotes, or a
// computed default's words as they are (Def.Computed).
func docDefault(d Def) string {
	switch {
	case d.Computed != "":
		return d.Computed
	case d.Default == "":
		return "(empty)"
	}
	return code(d.Default)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func nameOrDash(s string) string {
	if s == "" {
		return "—"
	}
	return code(s)
}
