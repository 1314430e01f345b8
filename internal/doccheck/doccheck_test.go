package doccheck

import (
	"slices"
	"testing"
)

func TestRows(t *testing.T) {
	doc := "# T\n## A\n| name | value |\n|---|---|\n| `a` | 1 |\n| b | 2 |\n## B\n| `c` | 3 |\n"
	got := Rows(doc, "## A", "| `")
	if len(got) != 1 || !slices.Equal(got[0], []string{"`a`", "1"}) {
		t.Errorf("code rows of A: %q", got)
	}
	if got := Rows(doc, "## A", "| "); len(got) != 3 {
		t.Errorf("rows of A: %q, want the header and two rows", got)
	}
	if got := Rows(doc, "## C", "| "); got != nil {
		t.Errorf("rows of a missing section: %q", got)
	}
}

func TestFilesFindsTheDocs(t *testing.T) {
	files, err := Files("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"../../README.md", "../../docs/compatibility.md", "../../docs/format/log.md"} {
		if !slices.Contains(files, want) {
			t.Errorf("Files lacks %s: %v", want, files)
		}
	}
}
