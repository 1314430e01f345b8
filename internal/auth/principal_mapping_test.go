package auth

import (
	"strings"
	"testing"
)

// The rules and DNs of Kafka's documentation (security.html, "Customizing
// SSL User Name") and of its SslPrincipalMapper tests.
func TestPrincipalMappingRules(t *testing.T) {
	docs := strings.Join([]string{
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/`,
		`RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L`,
		`RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L`,
		`DEFAULT`,
	}, ",")
	mapper := strings.Join([]string{
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L`,
		`RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L`,
		`RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U`,
		`RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U`,
		`DEFAULT`,
	}, ",")
	for _, tc := range []struct{ rules, dn, want string }{
		{"DEFAULT", "CN=alice,OU=Eng,O=Example", "CN=alice,OU=Eng,O=Example"},
		{"", "CN=alice", "CN=alice"},
		{docs, "CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "serviceuser"},
		{docs, "CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "adminuser@admin"},
		{docs, "OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"},
		{mapper, "CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"},
		{mapper, "CN=Duke,OU=SME,O=mycp,L=Fqdn,ST=zz,C=US", "duke@sme"},
		{mapper, "cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"},
		{mapper, "cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"},
		{mapper, "OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"},
		// Commas and spaces between rules; a rule's own escaped slash.
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT`, "CN=Svc,OU=ServiceUsers", "svc"},
		{"RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/\n DEFAULT", "CN=bob,O=x", "bob"},
		{`RULE:^CN=(.*?),O=(.*)$/$2\/$1/`, "CN=bob,O=acme", "acme/bob"},
		{`RULE:^CN=(.*)$/\$$1/`, "CN=bob", "$bob"},
	} {
		m, err := ParsePrincipalMappingRules(tc.rules)
		if err != nil {
			t.Errorf("%q: %v", tc.rules, err)
			continue
		}
		got, err := m.Map(tc.dn)
		if err != nil || got != tc.want {
			t.Errorf("rules %q, DN %q: %q %v, want %q", tc.rules, tc.dn, got, err, tc.want)
		}
	}

	// No rule applies: refused.
	m, _ := ParsePrincipalMappingRules(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/`)
	if got, err := m.Map("CN=x,OU=Other"); err == nil {
		t.Errorf("a DN no rule matches mapped to %q", got)
	}

	// Kafka's invalid rules.
	for _, bad := range []string{
		"DEFAULT DEFAULT", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/$1",
		"rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
	} {
		if _, err := ParsePrincipalMappingRules(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
