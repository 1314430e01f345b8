package handler

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// docs/compatibility.md must list exactly the APIs the handlers register,
// with their version ranges, so the docs stay true when a handler changes.
//
// Format checked, in the section "## APIs served":
//
//	| key | API | versions | flexible from | notes |
//	| 0 | Produce | 3–13 | 9 | ... |
//
// key is the API key; API is kmsg.NameForKey; versions is "min–max" with an
// en dash (U+2013) and no spaces; flexible from is the first served version
// that uses KIP-482 flexible encoding, or — when none does. The notes are
// free text. The section "## APIs not served yet" (same first two columns)
// must not list an API that is served.

const compatDoc = "../../docs/compatibility.md"

func TestCompatibilityDocListsEveryServedAPI(t *testing.T) {
	b, err := os.ReadFile(compatDoc)
	if err != nil {
		t.Fatalf("reading %s: %v", compatDoc, err)
	}
	doc := string(b)
	served := apiTable(doc, "## APIs served")
	notServed := apiTable(doc, "## APIs not served yet")

	for _, a := range Served() {
		want := []string{strconv.Itoa(int(a.Key)), a.Name, fmt.Sprintf("%d–%d", a.Min, a.Max), flexibleFrom(a)}
		wantRow := "| " + strings.Join(want, " | ") + " | <notes> |"
		got, ok := served[a.Key]
		if !ok {
			t.Errorf("%s: section \"APIs served\" has no row for API key %d (%s); add:\n%s", compatDoc, a.Key, a.Name, wantRow)
			continue
		}
		if len(got) < len(want) {
			t.Errorf("%s: row for API key %d has %d columns, want at least %d:\n%s", compatDoc, a.Key, len(got), len(want), wantRow)
			continue
		}
		for i := range want {
			if got[i] != want[i] {
				hint := ""
				if i == 2 {
					hint = " (min and max are joined by an en dash, U+2013, without spaces)"
				}
				t.Errorf("%s: row for API key %d (%s): column %d is %q, want %q%s; the row should start:\n%s",
					compatDoc, a.Key, a.Name, i+1, got[i], want[i], hint, wantRow)
			}
		}
		if _, ok := notServed[a.Key]; ok {
			t.Errorf("%s: API key %d (%s) is served but listed under \"APIs not served yet\"", compatDoc, a.Key, a.Name)
		}
	}
	for key := range served {
		if _, _, ok := New(Config{}).Supported(key); !ok {
			t.Errorf("%s: section \"APIs served\" lists API key %d (%s), which no handler registers", compatDoc, key, kmsg.NameForKey(key))
		}
	}
}

// flexibleFrom is the first served version of a that uses flexible encoding.
func flexibleFrom(a APIRange) string {
	for v := a.Min; v <= a.Max; v++ {
		r := kmsg.RequestForKey(a.Key)
		r.SetVersion(v)
		if r.IsFlexible() {
			return strconv.Itoa(int(v))
		}
	}
	return "—"
}

// apiTable returns the rows of the table between heading and the next "## "
// heading, by API key (the first column).
func apiTable(doc, heading string) map[int16][]string {
	rows := map[int16][]string{}
	in := false
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case line == heading:
			in = true
			continue
		case strings.HasPrefix(line, "## "):
			in = false
		}
		if !in || !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		key, err := strconv.ParseInt(cells[0], 10, 16)
		if err != nil {
			continue // header or separator row
		}
		rows[int16(key)] = cells
	}
	return rows
}
