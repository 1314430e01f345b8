package berthmsg

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/berthmq/berth/internal/doccheck"
)

// Each table of dead-letter context headers in the docs must list exactly
// the headers this package defines (its string constants starting with
// "__dlq.errors."), so the docs stay true when a header is added, renamed
// or removed. A table row names one or more headers in backquotes in its
// first column:
//
//	| header | value |
//	| `__dlq.errors.topic`, `__dlq.errors.partition` | ... |

var dlqHeaderTables = []struct{ doc, section string }{
	{"../../docs/queues.md", "## Dead-letter topic and redrive"},
	{"../../docs/operations.md", "## Dead-letter topics"},
	{"../../docs/cli.md", "## berth dlq"},
}

func TestDocsListEveryDLQHeader(t *testing.T) {
	defined := dlqHeaders(t)
	if len(defined) == 0 {
		t.Fatal("no __dlq.errors.* constants found in the package")
	}
	for _, tb := range dlqHeaderTables {
		b, err := os.ReadFile(tb.doc)
		if err != nil {
			t.Fatal(err)
		}
		listed := headerTable(string(b), tb.section)
		for _, h := range defined {
			if !listed[h] {
				t.Errorf("%s: the header table of section %q has no row for %s (pkg/berthmsg); add:\n| `%s` | <value> |", tb.doc, tb.section, h, h)
			}
		}
		for h := range listed {
			if !slices.Contains(defined, h) {
				t.Errorf("%s: the header table of section %q lists %s, which Berth does not write (pkg/berthmsg); remove it", tb.doc, tb.section, h)
			}
		}
	}
}

// dlqHeaders returns the values of the package's string constants that
// start with "__dlq.errors.", sorted.
func dlqHeaders(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			gd, ok := n.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				return true
			}
			for _, spec := range gd.Specs {
				for _, v := range spec.(*ast.ValueSpec).Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					s, err := strconv.Unquote(lit.Value)
					if err == nil && strings.HasPrefix(s, "__dlq.errors.") && !strings.HasSuffix(s, ".") {
						out = append(out, s)
					}
				}
			}
			return false
		})
	}
	slices.Sort(out)
	return out
}

var headerRE = regexp.MustCompile("`(__dlq\\.errors\\.[a-z.]+)`")

// headerTable returns the headers named in the first column of the table
// rows between heading and the next "## " heading.
func headerTable(doc, heading string) map[string]bool {
	out := map[string]bool{}
	for _, cells := range doccheck.Rows(doc, heading, "| `__dlq.errors.") {
		for _, m := range headerRE.FindAllStringSubmatch(cells[0], -1) {
			out[m[1]] = true
		}
	}
	return out
}
