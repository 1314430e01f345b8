package config

import "fmt"

// The authorizer's settings (Kafka's names): authorizer.class.name
// enables Berth's ACL authorizer (internal/auth/acl.go).

// Authorizer class names authorizer.class.name accepts.
const (
	// StandardAuthorizer is Kafka's KRaft authorizer.
	StandardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
	// LegacyAclAuthorizer is Kafka's ZooKeeper-era authorizer: the same
	// semantics here (a warning says so at start).
	LegacyAclAuthorizer = "kafka.security.authorizer.AclAuthorizer"
	// BerthAuthorizer is Berth's own short name.
	BerthAuthorizer = "berth"
)

func validAuthorizer(v string) error {
	switch v {
	case "", StandardAuthorizer, LegacyAclAuthorizer, BerthAuthorizer:
		return nil
	}
	return fmt.Errorf("authorizer %q is not available: use %s (or %s, or berth), or leave it empty for none",
		v, StandardAuthorizer, LegacyAclAuthorizer)
}

func init() {
	brokerDefs = append(brokerDefs,
		Def{Name: "authorizer.class.name", Kind: KindString, Default: "", Valid: validAuthorizer,
			Doc: "The authorizer: " + StandardAuthorizer + " (or " + LegacyAclAuthorizer + ", or berth) checks every request against the ACLs; empty: none, everything is allowed and the ACL APIs answer SECURITY_DISABLED."},
		Def{Name: "super.users", Kind: KindString, Default: "",
			Doc: "Principals allowed everything whatever the ACLs say, separated by semicolons (User:admin;User:broker)."},
		Def{Name: "allow.everyone.if.no.acl.found", Kind: KindBool, Default: "false",
			Doc: "With an authorizer: allow an action on a resource that no ACL names at all."},
	)
}
