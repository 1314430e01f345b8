package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fileName is a Go file or a pattern of them as the file map names them
// (clean*.go, group*_test.go).
var fileName = regexp.MustCompile(`^[\w*.-]+\.go$`)

// Every Go file docs/DESIGN.md's file map names exists where the map
// puts it, so the map cannot keep names the code dropped. (A line that
// starts at the left margin names a directory, ending in "/", or a file;
// an indented line names files of the directory above it.)
func TestFileMapNamesExistingFiles(t *testing.T) {
	doc, err := os.ReadFile(designDoc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "## File map\n")
	if start < 0 {
		t.Fatalf("%s: no \"## File map\" section", designDoc)
	}
	text = text[start:]
	open := strings.Index(text, "```\n")
	closing := strings.Index(text[open+4:], "```")
	if open < 0 || closing < 0 {
		t.Fatalf("%s: the file map is not in a code block", designDoc)
	}
	dir := ""
	checked := 0
	for i, line := range strings.Split(text[open+4:open+4+closing], "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		var names []string
		if !strings.HasPrefix(line, " ") {
			p := fields[0]
			if strings.HasSuffix(p, "/") {
				dir = strings.TrimSuffix(p, "/")
				continue
			}
			dir = filepath.Dir(p)
			names = append(names, filepath.Base(p))
			fields = fields[1:]
		}
		for _, f := range fields {
			if !fileName.MatchString(f) {
				break // the description begins
			}
			names = append(names, f)
		}
		for _, name := range names {
			m, err := filepath.Glob(filepath.Join(repoRoot, dir, name))
			if err != nil || len(m) == 0 {
				t.Errorf("%s: the file map's line %d names %s/%s, which does not exist; correct or remove it", designDoc, i+1, dir, name)
			}
			checked++
		}
	}
	if checked < 50 {
		t.Fatalf("%s: only %d files found in the file map; has its layout changed?", designDoc, checked)
	}
}
