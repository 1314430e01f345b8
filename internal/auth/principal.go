package auth

import (
	"fmt"
	"strings"
)

// Principal is who a connection acts as, Kafka's KafkaPrincipal: a type
// (always "User" for what Kafka authenticates) and a name.
type Principal struct {
	Type string
	Name string
}

// Anonymous is the principal of an unauthenticated connection (a
// PLAINTEXT or SSL listener without a client certificate), as in Kafka.
var Anonymous = Principal{Type: "User", Name: "ANONYMOUS"}

// User is the principal User:name.
func User(name string) Principal { return Principal{Type: "User", Name: name} }

// String is Kafka's form, Type:Name.
func (p Principal) String() string { return p.Type + ":" + p.Name }

// IsZero reports an unset principal.
func (p Principal) IsZero() bool { return p.Type == "" && p.Name == "" }

// ParsePrincipal parses Type:Name (super.users, ACL principals). The name
// may itself contain colons; the type may not be empty. "User:*" is the
// wildcard principal of ACLs.
func ParsePrincipal(s string) (Principal, error) {
	typ, name, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || typ == "" {
		return Principal{}, fmt.Errorf("principal %q: want Type:Name, e.g. User:alice", s)
	}
	return Principal{Type: typ, Name: name}, nil
}
