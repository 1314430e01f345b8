package handler

import (
	"os"
	"strconv"
	"testing"
)

// Every served key says what it authorizes (authorize_table.go): a key
// registered without an entry fails here, so no API ships unchecked.
func TestEveryServedKeyHasAnAuthorizationCheck(t *testing.T) {
	for _, a := range append(Served(), Extensions()...) {
		if authzChecks[a.Key] == "" {
			t.Errorf("API key %d (%s) is served but authorize_table.go says nothing of what it authorizes: "+
				"authorize it as Kafka's KafkaApis does and add its entry (and its row in %s, section \"Authorization\")", a.Key, a.Name, compatDoc)
		}
	}
}

// docs/compatibility.md's "## Authorization" table lists every served key
// with exactly what authorize_table.go says it checks:
//
//	| key | API | checks |
//	| 0 | Produce | WRITE on each TOPIC; ... |
func TestCompatibilityDocListsEveryAuthorizationCheck(t *testing.T) {
	b, err := os.ReadFile(compatDoc)
	if err != nil {
		t.Fatal(err)
	}
	rows := apiTable(string(b), "## Authorization")
	served := map[int16]bool{}
	for _, a := range append(Served(), Extensions()...) {
		served[a.Key] = true
		want := "| " + strconv.Itoa(int(a.Key)) + " | " + apiName(a.Key) + " | " + authzChecks[a.Key] + " |"
		got, ok := rows[a.Key]
		switch {
		case !ok:
			t.Errorf("%s: section \"Authorization\" has no row for API key %d; add:\n%s", compatDoc, a.Key, want)
		case len(got) < 3 || got[1] != apiName(a.Key) || got[2] != authzChecks[a.Key]:
			t.Errorf("%s: section \"Authorization\", row for API key %d is %q; want:\n%s", compatDoc, a.Key, got, want)
		}
	}
	for k := range rows {
		if !served[k] {
			t.Errorf("%s: section \"Authorization\" lists API key %d, which is not served; remove its row", compatDoc, k)
		}
	}
}
