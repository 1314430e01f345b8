package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The HTTP listener's TLS and authentication (Berth's own settings; the
// PEM files are read as the ssl.* settings read theirs).

func init() {
	brokerDefs = append(brokerDefs,
		Def{Name: "http.ssl.keystore.location", Kind: KindString, Default: "",
			Doc: "PEM file (certificate chain and key) that makes the HTTP listener HTTPS; reloaded when it changes."},
		Def{Name: "http.ssl.key.password", Kind: KindString, Default: "",
			Doc: "Password of an encrypted PKCS#8 key in http.ssl.keystore.location."},
		Def{Name: "http.ssl.truststore.location", Kind: KindString, Default: "",
			Doc: "PEM CA certificates that HTTP client certificates are checked against (http.auth=mtls)."},
		Def{Name: "http.auth", Kind: KindList, Default: "none", Valid: validHTTPAuth,
			Doc: "none, or a list of the ways an HTTP request may authenticate: mtls (a client certificate the truststore signed), basic (HTTP Basic with a SCRAM user's or a PLAIN user's password), bearer (an OAuth JWT, checked as OAUTHBEARER checks it). The principal is then authorized per schema registry subject through the ACLs."},
		Def{Name: "http.sasl.listener", Kind: KindString, Default: "",
			Doc: "The SASL listener whose PLAIN users (its JAAS config) and OAUTHBEARER token checks http.auth=basic and bearer share; empty: the first SASL listener by name (basic then also checks the SCRAM users, as PLAIN does)."},
		Def{Name: "http.ssl.principal.mapping.rules", Kind: KindString, Default: "DEFAULT",
			Doc: "How http.auth=mtls turns a client certificate's subject into a principal, with Kafka's ssl.principal.mapping.rules syntax."},
		Def{Name: "http.metrics.open", Kind: KindBool, Default: "true",
			Doc: "With http.auth set, serve /metrics (and /healthz) without authentication."},
	)
}

// HTTPAuthMethods are http.auth's methods (none: empty).
func HTTPAuthMethods(v string) []string {
	var out []string
	for _, m := range strings.Split(v, ",") {
		if m = strings.ToLower(strings.TrimSpace(m)); m != "" && m != "none" && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

func validHTTPAuth(v string) error {
	for _, m := range strings.Split(v, ",") {
		switch strings.ToLower(strings.TrimSpace(m)) {
		case "none", "mtls", "basic", "bearer":
		default:
			return fmt.Errorf("%q: want none, or any of mtls, basic, bearer", strings.TrimSpace(m))
		}
	}
	return nil
}

// validateHTTP checks the HTTP listener's settings as a whole.
func (c *Config) validateHTTP() error {
	if slices.Contains(HTTPAuthMethods(c.Get("http.auth")), "mtls") {
		if c.Get("http.ssl.keystore.location") == "" {
			return errors.New("http.auth=mtls needs HTTPS: set http.ssl.keystore.location")
		}
		if c.Get("http.ssl.truststore.location") == "" {
			return errors.New("http.auth=mtls needs http.ssl.truststore.location to check client certificates")
		}
	}
	return nil
}
