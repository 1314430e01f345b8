package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/berthmq/berth/internal/config"

	"github.com/berthmq/berth/internal/doccheck"
)

// docs/cli.md must document every berth command, and no doc may name a
// command or flag that does not exist, so the docs stay true when a
// command is added, renamed or removed.
//
// A command is documented by a synopsis: a line in a fenced code block of
// docs/cli.md that starts with "berth" and the command's path, followed by
// its arguments and flags (not by a subcommand):
//
//	```
//	berth topic create NAME [--partitions N] ...
//	```
//
// Commands that only group others (berth topic) need none. Each flag of a
// command must be mentioned (--name) in the section holding its synopsis,
// from the heading above it to the next heading of its level; the broker
// settings that are flags of berth serve are docs/configuration.md's
// (internal/config checks those). Every command
// named anywhere in the docs (README.md, docs/, the examples' READMEs) is
// checked: in a code block, a line starting with "berth", "$ berth",
// "./berth", "$ ./berth" or "go run ./cmd/berth" (with its continuation
// lines), and an inline code span starting with "berth ". Each word after
// "berth" that stands where a subcommand can must name one ("a|b" and
// "a/b" are alternatives, each checked), and each --flag or -f must be a
// flag of the command it is given to.

const cliDoc = "../../docs/cli.md"

func TestCLIDocListsEveryCommand(t *testing.T) {
	b, err := os.ReadFile(cliDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	lines := strings.Split(doc, "\n")
	synopsis := map[string]int{} // command path -> line of its first synopsis
	for _, m := range commandMentions(doc) {
		if !m.synopsis {
			continue
		}
		if c, _ := resolve(newRoot(), m.words); c != nil && synopsis[c.CommandPath()] == 0 {
			synopsis[c.CommandPath()] = m.line
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.Runnable() || !c.HasParent() {
			return
		}
		line, ok := synopsis[c.CommandPath()]
		if !ok {
			t.Errorf("%s has no synopsis of `%s` (%s); add a section with a code block holding a line such as:\n%s %s",
				cliDoc, c.CommandPath(), c.Short, c.CommandPath(), synopsisArgs(c))
			return
		}
		heading, section := sectionAt(lines, line)
		c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if _, setting := config.LookupBroker(f.Name); setting && c.Name() == "serve" {
				return // a broker setting: docs/configuration.md (internal/config's test)
			}
			if !strings.Contains(section, "--"+f.Name) {
				t.Errorf("%s: section %q does not mention --%s, a flag of `%s` (%s); add it to its flags",
					cliDoc, heading, f.Name, c.CommandPath(), f.Usage)
			}
		})
	}
	walk(newRoot())
}

// sectionAt returns the heading above line (1-based) and the text from it
// to the next heading of the same or a higher level. Lines in code blocks
// are never headings.
func sectionAt(lines []string, line int) (heading, text string) {
	level := make([]int, len(lines)) // heading level of each line, 0 for none
	inCode := false
	for i, l := range lines {
		if fenceRE.MatchString(l) {
			inCode = !inCode
		} else if !inCode && strings.HasPrefix(l, "#") {
			level[i] = len(l) - len(strings.TrimLeft(l, "#"))
		}
	}
	start := line - 1
	for start > 0 && level[start] == 0 {
		start--
	}
	end := line
	for end < len(lines) && (level[end] == 0 || level[end] > level[start]) {
		end++
	}
	return lines[start], strings.Join(lines[start:end], "\n")
}

// synopsisArgs suggests the arguments of a synopsis from a command's Use
// and flags.
func synopsisArgs(c *cobra.Command) string {
	_, args, _ := strings.Cut(c.Use, " ")
	var flags []string
	c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.Value.Type() == "bool" {
			flags = append(flags, "[--"+f.Name+"]")
		} else {
			flags = append(flags, "[--"+f.Name+" "+strings.ToUpper(f.Value.Type())+"]")
		}
	})
	return strings.TrimSpace(args + " " + strings.Join(flags, " "))
}

// notCommands are inline code spans that start with "berth " and are not
// commands.
var notCommands = map[string]bool{
	"berth ready": true, // the log line of a started broker (operations.md, Logs)
}

func TestDocsNameOnlyExistingCommands(t *testing.T) {
	for _, path := range docFiles(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range commandMentions(string(b)) {
			if notCommands["berth "+strings.Join(m.words, " ")] {
				continue
			}
			if _, err := resolve(newRoot(), m.words); err != nil {
				t.Errorf("%s:%d: `berth %s`: %v; correct or remove it", path, m.line, strings.Join(m.words, " "), err)
			}
		}
	}
}

// The CLI's hints and the code's comments name commands as `berth ...`
// too; those must exist as well.
func TestSourcesNameOnlyExistingCommands(t *testing.T) {
	var files []string
	for _, pat := range []string{"../../cmd/*/*.go", "../../internal/*/*.go", "../../pkg/*/*.go", "../../examples/*/*.go"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range inlineRE.FindAllStringSubmatch(line, -1) {
				words := strings.Fields(m[1])[1:]
				if _, err := resolve(newRoot(), words); err != nil {
					t.Errorf("%s:%d: `%s`: %v; correct or remove it", path, i+1, m[1], err)
				}
			}
		}
	}
}

// mention is one berth command line or span found in a doc.
type mention struct {
	line     int
	words    []string // after "berth"
	synopsis bool     // a code-block line that is not an example ("$ ...")
}

var (
	fenceRE    = regexp.MustCompile("^\\s*```")
	inlineRE   = regexp.MustCompile("`(berth [^`]*)`")
	commandREs = []*regexp.Regexp{
		regexp.MustCompile(`^\s*(\$ )?(\./)?berth( |$)`),
		regexp.MustCompile(`^\s*(\$ )?go run \./cmd/berth( |$)`),
	}
)

// commandMentions finds the berth commands named in a Markdown document.
func commandMentions(doc string) []mention {
	var out []mention
	inCode, cont := false, -1 // cont: index in out of the command a continuation line extends
	for i, line := range strings.Split(doc, "\n") {
		if fenceRE.MatchString(line) {
			inCode, cont = !inCode, -1
			continue
		}
		if !inCode {
			for _, m := range inlineRE.FindAllStringSubmatch(line, -1) {
				out = append(out, mention{line: i + 1, words: strings.Fields(m[1])[1:]})
			}
			continue
		}
		text, _, _ := strings.Cut(line, " #") // a shell comment
		if cont >= 0 && strings.HasPrefix(line, " ") {
			trimmed := strings.TrimSpace(text)
			if strings.HasPrefix(trimmed, "-") || strings.HasPrefix(trimmed, "[") || strings.HasPrefix(trimmed, "(") {
				out[cont].words = append(out[cont].words, strings.Fields(trimmed)...)
				continue
			}
		}
		cont = -1
		for _, re := range commandREs {
			loc := re.FindStringIndex(text)
			if loc == nil {
				continue
			}
			example := strings.HasPrefix(strings.TrimSpace(text), "$")
			out = append(out, mention{line: i + 1, words: strings.Fields(text[loc[1]:]), synopsis: !example})
			cont = len(out) - 1
			break
		}
	}
	return out
}

var (
	wordRE      = regexp.MustCompile(`^[a-z][a-z-]*$`)
	longFlagRE  = regexp.MustCompile(`^--([a-z][a-z0-9.-]*)(=.*)?$`)
	shortFlagRE = regexp.MustCompile(`^-([a-zA-Z])$`)
)

// resolve walks words from root: the leading words that stand where a
// subcommand can must name subcommands, and every flag must be one of the
// command reached. It returns that command.
func resolve(root *cobra.Command, words []string) (*cobra.Command, error) {
	c := root
	i := 0
	for ; i < len(words); i++ {
		w := strings.TrimRight(words[i], ",.:;")
		if !c.HasSubCommands() {
			break
		}
		alts := strings.FieldsFunc(w, func(r rune) bool { return r == '|' || r == '/' })
		if len(alts) == 0 || !wordRE.MatchString(alts[0]) {
			break // an argument, a flag, "...", a placeholder
		}
		var next *cobra.Command
		for _, a := range alts {
			sub := findSub(c, a)
			if sub == nil {
				return nil, fmt.Errorf("`%s` has no subcommand %q (it has: %s)", c.CommandPath(), a, subNames(c))
			}
			next = sub
		}
		if len(alts) > 1 {
			return next, nil // alternatives: each exists; flags would be ambiguous
		}
		c = next
	}
	for _, w := range words[i:] {
		w = strings.Trim(w, "[]()|.,;:`'\"")
		if m := longFlagRE.FindStringSubmatch(w); m != nil {
			if c.LocalFlags().Lookup(m[1]) == nil && c.InheritedFlags().Lookup(m[1]) == nil {
				return nil, fmt.Errorf("`%s` has no flag --%s", c.CommandPath(), m[1])
			}
		} else if m := shortFlagRE.FindStringSubmatch(w); m != nil {
			if c.LocalFlags().ShorthandLookup(m[1]) == nil && c.InheritedFlags().ShorthandLookup(m[1]) == nil {
				return nil, fmt.Errorf("`%s` has no flag -%s", c.CommandPath(), m[1])
			}
		}
	}
	return c, nil
}

func findSub(c *cobra.Command, name string) *cobra.Command {
	for _, s := range c.Commands() {
		if s.Name() == name || s.HasAlias(name) {
			return s
		}
	}
	return nil
}

func subNames(c *cobra.Command) string {
	var names []string
	for _, s := range c.Commands() {
		names = append(names, s.Name())
	}
	return strings.Join(names, ", ")
}

// docFiles lists the user docs: README.md, docs/**/*.md and the READMEs
// of examples/ and bench/.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := doccheck.Files("../..")
	if err != nil {
		t.Fatal(err)
	}
	return files
}
