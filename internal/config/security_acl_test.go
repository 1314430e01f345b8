package config

import "testing"

// authorizer.class.name takes Kafka's authorizer class names (and Berth's
// short name) and refuses any other, so a server.properties naming an
// authorizer Berth does not have fails at start instead of running open.
func TestAuthorizerClassNames(t *testing.T) {
	for _, ok := range []string{"", StandardAuthorizer, LegacyAclAuthorizer, BerthAuthorizer} {
		c := Defaults()
		if err := c.Set("authorizer.class.name", ok, SourceFile); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	c := Defaults()
	if err := c.Set("authorizer.class.name", "com.example.CustomAuthorizer", SourceFile); err == nil {
		t.Fatal("an unknown authorizer class was accepted")
	}
	if c.Bool("allow.everyone.if.no.acl.found") || c.Get("super.users") != "" {
		t.Fatal("defaults: allow.everyone.if.no.acl.found must be false, super.users empty")
	}
}
