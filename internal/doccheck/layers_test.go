package doccheck

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const (
	modulePath = "github.com/berthmq/berth/"
	designDoc  = "../../docs/DESIGN.md"
	repoRoot   = "../.."
)

// The package map of docs/DESIGN.md names every package of the module,
// and each package imports (in its non-test files) only the Berth
// packages its row allows: the layering stays as written, and the map
// stays true.
func TestPackageMapHoldsTheImports(t *testing.T) {
	doc, err := os.ReadFile(designDoc)
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string][]string{}
	for _, cells := range Rows(string(doc), "## Package map", "| `") {
		if len(cells) < 3 {
			t.Fatalf("%s: package map row %q has %d cells, want 3", designDoc, cells, len(cells))
		}
		pkg := strings.Trim(cells[0], "`")
		var may []string
		for _, f := range strings.Fields(cells[2]) {
			if f = strings.Trim(f, "`"); f != "—" {
				may = append(may, f)
			}
		}
		allowed[pkg] = may
	}
	if len(allowed) == 0 {
		t.Fatalf("%s: no \"## Package map\" table", designDoc)
	}
	imports := moduleImports(t)
	for pkg, imps := range imports {
		may, ok := allowed[pkg]
		if !ok {
			t.Errorf("%s: the package map has no row for %s; add one (its job, and the Berth packages it imports: %s)", designDoc, pkg, strings.Join(imps, " "))
			continue
		}
		for _, imp := range imps {
			if !slices.Contains(may, imp) {
				t.Errorf("%s imports %s, which its row of %s's package map does not allow: remove the import, or, if the edge keeps the layering, add it to the row", pkg, imp, designDoc)
			}
		}
	}
	for pkg := range allowed {
		if _, ok := imports[pkg]; !ok {
			t.Errorf("%s: the package map lists %s, which is not a package of the module; remove its row", designDoc, pkg)
		}
	}
}

// moduleImports returns, for every package of the module (below the
// repository root, outside nested modules and testdata), the module's
// packages its non-test files import, sorted.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != repoRoot && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != repoRoot {
				return filepath.SkipDir // a module of its own
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(repoRoot, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		set := out[pkg]
		if set == nil {
			set = []string{}
		}
		for _, is := range f.Imports {
			imp, _ := strconv.Unquote(is.Path.Value)
			if rest, ok := strings.CutPrefix(imp, modulePath); ok && !slices.Contains(set, rest) {
				set = append(set, rest)
			}
		}
		sort.Strings(set)
		out[pkg] = set
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
