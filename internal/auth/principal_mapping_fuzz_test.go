package auth

import "testing"

// Rules and DNs from anywhere: parsing and mapping never panic, and a
// parsed rule set maps a DN to a name or an error.
func FuzzPrincipalMappingRules(f *testing.F) {
	f.Add(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT`, "CN=Duke,OU=ServiceUsers,O=Org,C=US")
	f.Add(`RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/`, "CN=bob")
	f.Add(`RULE:a\/b/$12\$/U`, "a/b")
	f.Add("DEFAULT DEFAULT", "")
	f.Add(`RULE:(/$1/`, "x")
	f.Fuzz(func(t *testing.T, rules, dn string) {
		m, err := ParsePrincipalMappingRules(rules)
		if err != nil {
			return
		}
		if len(m.rules) == 0 {
			t.Fatal("parsed with no rules")
		}
		_, _ = m.Map(dn)
	})
}
