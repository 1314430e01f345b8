// Package doccheck is what the docs-drift tests share: the user docs'
// files and the rows of their tables. A test in the package that owns an
// enumerable thing (settings, API keys, metrics, commands, headers)
// checks the doc's table against the code with it; no broker code
// imports it.
package doccheck

import (
	"path/filepath"
	"strings"
)

// Files lists the user docs below root (the repository's top): README.md,
// docs/*.md, docs/format/*.md and the READMEs of examples/ and bench/.
func Files(root string) ([]string, error) {
	files := []string{filepath.Join(root, "README.md")}
	for _, pat := range []string{"docs/*.md", "docs/format/*.md", "examples/*/README.md", "bench/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pat))
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	return files, nil
}

// Rows returns the cells, trimmed, of the table rows in doc's section
// under heading (the line equal to heading, up to the next "## "
// heading) whose line starts with prefix ("| " for every row, the header
// row included; "| `" for rows whose first cell is code).
func Rows(doc, heading, prefix string) [][]string {
	var rows [][]string
	in := false
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case line == heading:
			in = true
			continue
		case strings.HasPrefix(line, "## "):
			in = false
		}
		if !in || !strings.HasPrefix(line, prefix) {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	return rows
}
