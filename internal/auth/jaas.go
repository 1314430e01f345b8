package auth

import (
	"fmt"
	"strings"
)

// JAASEntry is one login module of a JAAS configuration:
// `class flag key=value ...;`.
type JAASEntry struct {
	Module  string
	Flag    string // required, requisite, sufficient or optional
	Options map[string]string
}

// PlainLoginModule is the class name of Kafka's PLAIN login module.
const PlainLoginModule = "org.apache.kafka.common.security.plain.PlainLoginModule"

// ParseJAAS parses a JAAS configuration as Kafka's sasl.jaas.config
// property holds it: login modules, each `class flag option=value...;`
// where a value is a word or a double-quoted string with backslash
// escapes. Kafka's property form must hold exactly one module; the caller
// checks that.
func ParseJAAS(s string) ([]JAASEntry, error) {
	toks, err := jaasTokens(s)
	if err != nil {
		return nil, err
	}
	var out []JAASEntry
	for i := 0; i < len(toks); {
		if toks[i].kind != tokWord {
			return nil, fmt.Errorf("jaas config: want a login module class name, got %q", toks[i].text)
		}
		e := JAASEntry{Module: toks[i].text, Options: map[string]string{}}
		i++
		if i >= len(toks) || toks[i].kind != tokWord {
			return nil, fmt.Errorf("jaas config: login module %s: want a control flag (required, requisite, sufficient, optional)", e.Module)
		}
		switch f := strings.ToLower(toks[i].text); f {
		case "required", "requisite", "sufficient", "optional":
			e.Flag = f
		default:
			return nil, fmt.Errorf("jaas config: login module %s: invalid control flag %q", e.Module, toks[i].text)
		}
		i++
		for {
			if i >= len(toks) {
				return nil, fmt.Errorf("jaas config: login module %s: missing the closing ';'", e.Module)
			}
			if toks[i].kind == tokSemi {
				i++
				break
			}
			if toks[i].kind != tokWord || i+2 >= len(toks) || toks[i+1].kind != tokEq ||
				(toks[i+2].kind != tokWord && toks[i+2].kind != tokQuoted) {
				// The token is not echoed: it may be a password.
				return nil, fmt.Errorf("jaas config: login module %s: option %d is not option=value (a quoted value needs its name and =)", e.Module, len(e.Options)+1)
			}
			e.Options[toks[i].text] = toks[i+2].text
			i += 3
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("jaas config: no login module")
	}
	return out, nil
}

type jaasTokKind int

const (
	tokWord jaasTokKind = iota
	tokQuoted
	tokEq
	tokSemi
)

type jaasTok struct {
	kind jaasTokKind
	text string
}

func jaasTokens(s string) ([]jaasTok, error) {
	var out []jaasTok
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '=':
			out = append(out, jaasTok{tokEq, "="})
			i++
		case c == ';':
			out = append(out, jaasTok{tokSemi, ";"})
			i++
		case c == '"':
			var b strings.Builder
			i++
			closed := false
			for i < len(s) {
				if s[i] == '\\' && i+1 < len(s) {
					b.WriteByte(s[i+1])
					i += 2
					continue
				}
				if s[i] == '"' {
					closed = true
					i++
					break
				}
				b.WriteByte(s[i])
				i++
			}
			if !closed {
				return nil, fmt.Errorf("jaas config: unterminated quoted value")
			}
			out = append(out, jaasTok{tokQuoted, b.String()})
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\n\r=;\"", rune(s[j])) {
				j++
			}
			out = append(out, jaasTok{tokWord, s[i:j]})
			i = j
		}
	}
	return out, nil
}

// PlainUsers reads the users of a PLAIN JAAS config (Kafka's
// listener.name.<l>.plain.sasl.jaas.config): its user_NAME="PASSWORD"
// options. The config must hold one PlainLoginModule entry.
func PlainUsers(jaas string) (map[string]string, error) {
	es, err := ParseJAAS(jaas)
	if err != nil {
		return nil, err
	}
	if len(es) != 1 {
		return nil, fmt.Errorf("jaas config: %d login modules, want 1", len(es))
	}
	if es[0].Module != PlainLoginModule {
		return nil, fmt.Errorf("jaas config: login module %s: want %s for PLAIN", es[0].Module, PlainLoginModule)
	}
	users := map[string]string{}
	for k, v := range es[0].Options {
		if name, ok := strings.CutPrefix(k, "user_"); ok && name != "" {
			users[name] = v
		}
	}
	return users, nil
}
