package handler

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every API key is served from a file of its own, found by its name:
// NN_name.go, NN the key and name Kafka's API name in snake case
// (00_produce.go, 69_consumer_group_describe.go,
// 32000_berth_annotate_share_records.go). That file holds the key's one
// register (or registerBerth) call and the entry point that call names,
// (*Broker).x, so a per-key check (authorization, say) is one line in
// one file, and its first comment names the API and the versions served,
// as registered. No register call sits anywhere else.
func TestEveryKeyInItsOwnFile(t *testing.T) {
	berthKeys := berthmsgKeys(t)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := map[int16]string{} // key -> file
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		regs := registrations(t, fset, file, berthKeys)
		m := keyFile.FindStringSubmatch(f)
		if m == nil {
			for _, r := range regs {
				t.Errorf("%s: %s registers key %d; move it to its key's file, %s", r.pos, f, r.key, wantFile(r.key))
			}
			continue
		}
		if len(regs) != 1 {
			t.Errorf("%s: %d register calls, want one (for key %s)", f, len(regs), m[1])
			for _, r := range regs {
				found[r.key] = f
			}
			continue
		}
		r := regs[0]
		if want := wantFile(r.key); f != want {
			t.Errorf("%s: registers key %d; its file is %s", r.pos, r.key, want)
		}
		if prev, dup := found[r.key]; dup {
			t.Errorf("%s: key %d is registered in %s too", f, r.key, prev)
		}
		found[r.key] = f
		if !declaresMethod(file, r.entry) {
			t.Errorf("%s: the entry point of key %d, (*Broker).%s, is not declared in %s; move it there", r.pos, r.key, r.entry, f)
		}
		checkFirstComment(t, f, file, r.key)
	}
	var want []int16
	for k := range apis {
		want = append(want, k)
	}
	slices.Sort(want)
	for _, k := range want {
		if _, ok := found[k]; !ok {
			t.Errorf("key %d is served but no register call in this package's files names it (want one in %s)", k, wantFile(k))
		}
	}
	for _, k := range []int16{32000, 32001} {
		if _, ok := found[k]; !ok {
			t.Errorf("Berth key %d has no file of its own", k)
		}
	}
}

var keyFile = regexp.MustCompile(`^(\d+)_([a-z0-9_]+)\.go$`)

// registration is one register or registerBerth call.
type registration struct {
	pos      token.Position
	key      int16
	min, max int16
	entry    string // the method named as (*Broker).entry
}

// registrations finds the register and registerBerth calls in file.
func registrations(t *testing.T, fset *token.FileSet, file *ast.File, berthKeys map[string]int16) []registration {
	t.Helper()
	var out []registration
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		fn, ok := call.Fun.(*ast.Ident)
		if !ok || fn.Name != "register" && fn.Name != "registerBerth" {
			return true
		}
		pos := fset.Position(call.Pos())
		args := call.Args
		if fn.Name == "registerBerth" && len(args) == 6 {
			args = []ast.Expr{args[0], args[2], args[3], args[5]} // key, name, min, max, newReq, fn
		}
		if len(args) != 4 {
			t.Fatalf("%s: %s with %d arguments", pos, fn.Name, len(call.Args))
		}
		r := registration{pos: pos}
		var err error
		if r.key, err = constInt(args[0], berthKeys); err != nil {
			t.Fatalf("%s: the key: %v", pos, err)
		}
		if r.min, err = constInt(args[1], nil); err != nil {
			t.Fatalf("%s: the min version: %v", pos, err)
		}
		if r.max, err = constInt(args[2], nil); err != nil {
			t.Fatalf("%s: the max version: %v", pos, err)
		}
		// (*Broker).entry
		if sel, ok := args[3].(*ast.SelectorExpr); ok {
			if par, ok := sel.X.(*ast.ParenExpr); ok {
				if star, ok := par.X.(*ast.StarExpr); ok {
					if id, ok := star.X.(*ast.Ident); ok && id.Name == "Broker" {
						r.entry = sel.Sel.Name
					}
				}
			}
		}
		if r.entry == "" {
			t.Fatalf("%s: the handler of key %d is not written (*Broker).method", pos, r.key)
		}
		out = append(out, r)
		return true
	})
	return out
}

// constInt reads an integer literal, or a berthmsg.Name constant.
func constInt(e ast.Expr, named map[string]int16) (int16, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		n, err := strconv.ParseInt(e.Value, 10, 16)
		return int16(n), err
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && x.Name == "berthmsg" {
			if n, ok := named[e.Sel.Name]; ok {
				return n, nil
			}
		}
	}
	return 0, fmt.Errorf("not an integer literal or a pkg/berthmsg key constant")
}

// berthmsgKeys reads the API key constants (…Key int16 = N) of pkg/berthmsg.
func berthmsgKeys(t *testing.T) map[string]int16 {
	t.Helper()
	files, err := filepath.Glob("../../pkg/berthmsg/*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int16{}
	for _, f := range files {
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) || !strings.HasSuffix(name.Name, "Key") {
						continue
					}
					if n, err := constInt(vs.Values[i], nil); err == nil {
						out[name.Name] = n
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("pkg/berthmsg: no API key constants found")
	}
	return out
}

// apiName is the API's name: Berth's, or Kafka's as README.md and the
// docs spell it (kmsg's where they agree).
func apiName(key int16) string {
	if e, ok := berthAPIs[key]; ok {
		return e.name
	}
	name := kmsg.NameForKey(key)
	if n, ok := readmeNames[name]; ok {
		return n
	}
	return name
}

// wantFile is the file of a key: 00_produce.go, 22_init_producer_id.go.
func wantFile(key int16) string {
	return fmt.Sprintf("%02d_%s.go", key, strings.ToLower(snake(apiName(key))))
}

// declaresMethod reports whether file declares the method (*Broker).name.
func declaresMethod(file *ast.File, name string) bool {
	for _, d := range file.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv == nil || fd.Name.Name != name || len(fd.Recv.List) != 1 {
			continue
		}
		if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
			if id, ok := star.X.(*ast.Ident); ok && id.Name == "Broker" {
				return true
			}
		}
	}
	return false
}

var servedVersions = regexp.MustCompile(`\bversions? (\d+)(?:-(\d+))?\b`)

// checkFirstComment checks that a key file's first comment (the one
// between the package clause and the imports) starts with the API's name
// and gives the versions registered, "version N" or "versions N-M".
func checkFirstComment(t *testing.T, f string, file *ast.File, key int16) {
	t.Helper()
	var first *ast.CommentGroup
	for _, cg := range file.Comments {
		if cg.Pos() > file.Name.End() {
			first = cg
			break
		}
	}
	if first == nil || len(file.Imports) > 0 && first.Pos() > file.Imports[0].Pos() {
		t.Errorf("%s: no first comment on the versions served and the fields not honoured", f)
		return
	}
	text := strings.Join(strings.Fields(first.Text()), " ")
	name := apiName(key)
	if !regexp.MustCompile(`^(?i)` + name + `\b`).MatchString(text) {
		t.Errorf("%s: the first comment does not start with the API's name, %s: %.60q", f, name, text)
	}
	a := apis[key]
	want := fmt.Sprintf("versions %d-%d", a.min, a.max)
	if a.min == a.max {
		want = fmt.Sprintf("version %d", a.min)
	}
	m := servedVersions.FindStringSubmatch(text)
	if m == nil || m[0] != want {
		got := "none"
		if m != nil {
			got = m[0]
		}
		t.Errorf("%s: the first comment gives %s as the versions served; the registration says %s", f, got, want)
	}
}
