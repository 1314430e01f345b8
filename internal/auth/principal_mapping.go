package auth

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"regexp"
	"strings"
)

// PrincipalMapper turns a client certificate's subject distinguished name
// into a principal name with Kafka's ssl.principal.mapping.rules:
//
//	RULE:pattern/replacement/[LU], ..., DEFAULT
//
// Rules are tried in order; the first whose pattern matches the whole DN
// (RFC 2253 form, "CN=alice,OU=Eng,O=Example") gives the name: the DN
// with the pattern replaced ($1... name its groups), lower-cased with L
// or upper-cased with U. DEFAULT gives the DN itself. A DN no rule
// matches is refused. Patterns are Go regular expressions (RE2), which
// accept the patterns of Kafka's documentation; Java-only constructs
// (backreferences, lookaround) are refused when the rules are parsed.
type PrincipalMapper struct {
	rules []mappingRule
}

type mappingRule struct {
	isDefault bool
	match     *regexp.Regexp // ^(?:pattern)$: does the rule apply
	re        *regexp.Regexp // pattern, for the replacement
	repl      string         // Go template form of the replacement
	lower     bool
	upper     bool
}

var (
	ruleSplitter = regexp.MustCompile(`\s*(DEFAULT|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?))\s*([,\n]\s*|$)`)
	ruleParser   = regexp.MustCompile(`^(?:DEFAULT|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))$`)
)

// ParsePrincipalMappingRules parses ssl.principal.mapping.rules; an
// empty string is DEFAULT.
func ParsePrincipalMappingRules(s string) (*PrincipalMapper, error) {
	if strings.TrimSpace(s) == "" {
		s = "DEFAULT"
	}
	m := &PrincipalMapper{}
	for _, sm := range ruleSplitter.FindAllStringSubmatch(strings.TrimSpace(s), -1) {
		text := sm[1]
		if text == "" {
			continue
		}
		p := ruleParser.FindStringSubmatch(text)
		if p == nil {
			return nil, fmt.Errorf("ssl.principal.mapping.rules: invalid rule %q (want RULE:pattern/replacement/[LU] or DEFAULT)", text)
		}
		if text == "DEFAULT" {
			m.rules = append(m.rules, mappingRule{isDefault: true})
			continue
		}
		re, err := regexp.Compile(p[1])
		if err != nil {
			return nil, fmt.Errorf("ssl.principal.mapping.rules: rule %q: %w", text, err)
		}
		match, _ := regexp.Compile(`^(?:` + p[1] + `)$`)
		m.rules = append(m.rules, mappingRule{
			match: match, re: re, repl: javaReplacement(p[2]),
			lower: p[3] == "L", upper: p[3] == "U",
		})
	}
	if len(m.rules) == 0 {
		return nil, fmt.Errorf("ssl.principal.mapping.rules: no rules in %q", s)
	}
	return m, nil
}

// javaReplacement converts a Java replacement string ($1, \$) into
// regexp.Expand's form (${1}, $$).
func javaReplacement(r string) string {
	var b strings.Builder
	for i := 0; i < len(r); i++ {
		switch c := r[i]; {
		case c == '\\' && i+1 < len(r):
			i++
			if r[i] == '$' {
				b.WriteString("$$")
			} else {
				b.WriteByte(r[i])
			}
		case c == '$':
			j := i + 1
			for j < len(r) && r[j] >= '0' && r[j] <= '9' {
				j++
			}
			b.WriteString("${" + r[i+1:j] + "}")
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Map gives the principal name of a distinguished name.
func (m *PrincipalMapper) Map(dn string) (string, error) {
	for _, r := range m.rules {
		if r.isDefault {
			return dn, nil
		}
		if !r.match.MatchString(dn) {
			continue
		}
		out := r.re.ReplaceAllString(dn, r.repl)
		switch {
		case r.lower:
			out = strings.ToLower(out)
		case r.upper:
			out = strings.ToUpper(out)
		}
		return out, nil
	}
	return "", fmt.Errorf("no ssl.principal.mapping.rules rule applies to the certificate subject %q", dn)
}

// Principal is the principal of a client certificate: User:<mapped
// subject DN>.
func (m *PrincipalMapper) Principal(cert *x509.Certificate) (Principal, error) {
	name, err := m.Map(SubjectDN(cert))
	if err != nil {
		return Principal{}, err
	}
	if name == "" {
		return Principal{}, fmt.Errorf("ssl.principal.mapping.rules map the certificate subject %q to an empty name", SubjectDN(cert))
	}
	return User(name), nil
}

// SubjectDN is a certificate subject in RFC 2253 form as Java's
// X500Principal.getName() writes it (last RDN of the certificate first):
// CN=alice,OU=Eng,O=Example,C=US.
func SubjectDN(cert *x509.Certificate) string {
	var seq pkix.RDNSequence
	if rest, err := asn1.Unmarshal(cert.RawSubject, &seq); err != nil || len(rest) > 0 {
		return cert.Subject.String()
	}
	return seq.String()
}
