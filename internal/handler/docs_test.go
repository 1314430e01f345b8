package handler

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/doccheck"
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

// docs/compatibility.md's "Berth extensions" table lists every Berth
// API registered (registerBerth), in the same format as "APIs served",
// and no other.
func TestCompatibilityDocListsEveryBerthExtension(t *testing.T) {
	b, err := os.ReadFile(compatDoc)
	if err != nil {
		t.Fatalf("reading %s: %v", compatDoc, err)
	}
	rows := apiTable(string(b), "## Berth extensions")
	for _, a := range Extensions() {
		flex := "—"
		for v := a.Min; v <= a.Max; v++ {
			r := berthAPIs[a.Key].newReq()
			r.SetVersion(v)
			if r.IsFlexible() {
				flex = strconv.Itoa(int(v))
				break
			}
		}
		want := []string{strconv.Itoa(int(a.Key)), a.Name, fmt.Sprintf("%d–%d", a.Min, a.Max), flex}
		got, ok := rows[a.Key]
		if !ok || len(got) < len(want) || strings.Join(got[:len(want)], "|") != strings.Join(want, "|") {
			t.Errorf("%s: section \"Berth extensions\" has no row for key %d starting:\n| %s | <notes> |",
				compatDoc, a.Key, strings.Join(want, " | "))
		}
		delete(rows, a.Key)
	}
	for key, row := range rows {
		t.Errorf("%s: section \"Berth extensions\" lists key %d (%s), which no handler registers", compatDoc, key, row[1])
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
	for _, cells := range doccheck.Rows(doc, heading, "| ") {
		key, err := strconv.ParseInt(cells[0], 10, 16)
		if err != nil {
			continue // the header row
		}
		rows[int16(key)] = cells
	}
	return rows
}

// docs/compatibility.md's "Error codes" table must list exactly the Kafka
// error codes the broker's code can return: every kerr.X named in the
// packages that answer requests (a static scan of their Go sources), and
// no code that none of them names. Format checked:
//
//	| code | name | returned for |
//	| 6 | `NOT_LEADER_OR_FOLLOWER` (franz-go: `NOT_LEADER_FOR_PARTITION`) | ... |
//
// The name column holds franz-go's name (kerr's Message) in backquotes,
// possibly after Kafka's. The sentence "Kafka marks ... as retriable" must
// list exactly the retriable codes of the table.

// answeringPackages are the packages whose errors reach clients.
var answeringPackages = []string{"app", "cluster", "group", "handler", "log", "metadata", "replica", "server", "share", "sharepart", "sharestate", "txn"}

// notReturned are codes those packages name without ever returning them.
var notReturned = map[string]string{
	"RECORD_LIST_TOO_LARGE": "group/errors.go maps a failed write's error to INVALID_COMMIT_OFFSET_SIZE",
	"INVALID_FETCH_SIZE":    "group/errors.go maps a failed write's error to INVALID_COMMIT_OFFSET_SIZE",
}

func TestCompatibilityDocListsEveryErrorCode(t *testing.T) {
	b, err := os.ReadFile(compatDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	rows := apiTable(doc, "## Error codes")
	used := returnedCodes(t)

	for _, c := range slices.Sorted(maps.Keys(used)) {
		e := kerr.TypedErrorForCode(c)
		row, ok := rows[c]
		if !ok {
			t.Errorf("%s: section \"Error codes\" has no row for code %d, which %s returns; add:\n| %d | `%s` | <returned for> |",
				compatDoc, c, used[c], c, e.Message)
			continue
		}
		if len(row) < 3 || !strings.Contains(row[1], "`"+e.Message+"`") {
			t.Errorf("%s: section \"Error codes\": the row for code %d must name `%s` in its second column", compatDoc, c, e.Message)
		}
	}
	for c := range rows {
		if _, ok := used[c]; !ok {
			t.Errorf("%s: section \"Error codes\" lists code %d (%s), which no package answering requests returns (%s); remove its row",
				compatDoc, c, kerr.TypedErrorForCode(c).Message, strings.Join(answeringPackages, ", "))
		}
	}

	var retriable []string
	for _, c := range slices.Sorted(maps.Keys(rows)) {
		if e := kerr.TypedErrorForCode(c); e != nil && e.Retriable {
			retriable = append(retriable, strconv.Itoa(int(c)))
		}
	}
	want := "Kafka marks " + strings.Join(retriable[:len(retriable)-1], ", ") + " and " + retriable[len(retriable)-1] + " as retriable"
	if !strings.Contains(strings.Join(strings.Fields(doc), " "), want) {
		t.Errorf("%s: the retriable codes of the table are listed after it as:\n%s", compatDoc, want)
	}
}

var kerrRef = regexp.MustCompile(`\bkerr\.([A-Z][A-Za-z]*)\b`)

// returnedCodes scans the non-test Go files of answeringPackages for
// kerr.Name and returns each code with the first file naming it.
func returnedCodes(t *testing.T) map[int16]string {
	t.Helper()
	byName := map[string]int16{}
	for c := int16(-1); c < 1000; c++ {
		if e := kerr.TypedErrorForCode(c); e != nil && (c == -1 || e != kerr.UnknownServerError) {
			byName[e.Message] = c
		}
	}
	out := map[int16]string{}
	for _, pkg := range answeringPackages {
		files, err := filepath.Glob(filepath.Join("..", pkg, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range kerrRef.FindAllStringSubmatch(string(src), -1) {
				switch m[1] {
				case "Error", "ErrorForCode", "TypedErrorForCode", "IsRetriable":
					continue
				}
				name := snake(m[1])
				if _, skip := notReturned[name]; skip {
					continue
				}
				c, ok := byName[name]
				if !ok {
					t.Fatalf("%s: kerr.%s: no Kafka error is named %s", f, m[1], name)
				}
				if _, seen := out[c]; !seen {
					out[c] = filepath.ToSlash(strings.TrimPrefix(f, "../"))
				}
			}
		}
	}
	return out
}

// snake turns kerr's Go name into Kafka's: NotLeaderForPartition is
// NOT_LEADER_FOR_PARTITION, InvalidProducerIDMapping INVALID_PRODUCER_ID_MAPPING.
func snake(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		upper := unicode.IsUpper(r)
		if i > 0 && upper && (unicode.IsLower(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

const readme = "../../README.md"

// readmeNames are the names README.md uses where kmsg's differ.
var readmeNames = map[string]string{"AlterPartitionAssignments": "AlterPartitionReassignments",
	"DescribeACLs": "DescribeAcls", "CreateACLs": "CreateAcls", "DeleteACLs": "DeleteAcls"}

// README.md's status table counts and names the served APIs in its row
// "| Kafka protocol | N APIs: Produce, Fetch, ... |".
func TestReadmeListsEveryServedAPI(t *testing.T) {
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "| Kafka protocol |") {
			row = line
		}
	}
	if row == "" {
		t.Fatalf("%s: no status row starting \"| Kafka protocol |\"", readme)
	}
	mentions := func(name string) bool {
		return regexp.MustCompile(`(?i)\b` + name + `\b`).MatchString(row)
	}
	served := Served()
	if want := fmt.Sprintf("| Kafka protocol | %d APIs: ", len(served)); !strings.HasPrefix(row, want) {
		t.Errorf("%s: the status row should start %q: Berth serves %d APIs", readme, want, len(served))
	}
	isServed := map[int16]bool{}
	for _, a := range served {
		isServed[a.Key] = true
		name := a.Name
		if n, ok := readmeNames[name]; ok {
			name = n
		}
		if !mentions(name) {
			t.Errorf("%s: the status row \"Kafka protocol\" does not name %s (key %d), which Berth serves; add it", readme, name, a.Key)
		}
	}
	for k := int16(0); k < 200; k++ {
		name := kmsg.NameForKey(k)
		if n, ok := readmeNames[name]; ok {
			name = n
		}
		if name != "" && !isServed[k] && mentions(name) {
			t.Errorf("%s: the status row \"Kafka protocol\" names %s (key %d), which Berth does not serve; remove it", readme, name, k)
		}
	}
}

// The notes of DescribeShareGroupOffsets (key 90) in docs/compatibility.md
// list Berth's tagged fields: every ShareStatsTag* constant of
// pkg/berthmsg by number, and no other number from 1000 to 1099.
func TestCompatibilityDocListsShareStatsTags(t *testing.T) {
	b, err := os.ReadFile(compatDoc)
	if err != nil {
		t.Fatal(err)
	}
	row, ok := apiTable(string(b), "## APIs served")[90]
	if !ok || len(row) < 5 {
		t.Fatalf("%s: no row for key 90", compatDoc)
	}
	notes := row[4]
	const src = "../../pkg/berthmsg/sharestats.go"
	file, err := parser.ParseFile(token.NewFileSet(), src, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]string{} // number -> constant
	for _, d := range file.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && strings.HasPrefix(name.Name, "ShareStatsTag") {
					tags[lit.Value] = name.Name
				}
			}
		}
	}
	if len(tags) == 0 {
		t.Fatalf("%s: no ShareStatsTag constants", src)
	}
	for num, name := range tags {
		if !regexp.MustCompile(`\b` + num + ` [a-z]`).MatchString(notes) {
			t.Errorf("%s: the notes of key 90 do not describe tag %s (%s); add \"%s <what it counts>\" to the list of Berth's tagged fields", compatDoc, num, name, num)
		}
	}
	for _, m := range regexp.MustCompile(`\b(10\d\d) [a-z]`).FindAllStringSubmatch(notes, -1) {
		if _, ok := tags[m[1]]; !ok {
			t.Errorf("%s: the notes of key 90 describe tag %s, which %s does not define; remove it", compatDoc, m[1], src)
		}
	}
}
