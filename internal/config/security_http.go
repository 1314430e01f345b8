package config

import "errors"

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
		Def{Name: "http.auth", Kind: KindString, Default: "none", Valid: oneOf("none", "mtls"),
			Doc: "none, or mtls: every HTTP request needs a client certificate the truststore signed."},
		Def{Name: "http.metrics.open", Kind: KindBool, Default: "true",
			Doc: "With http.auth=mtls, serve /metrics (and /healthz) without a client certificate."},
	)
}

// validateHTTP checks the HTTP listener's settings as a whole.
func (c *Config) validateHTTP() error {
	if c.Get("http.auth") == "mtls" {
		if c.Get("http.ssl.keystore.location") == "" {
			return errors.New("http.auth=mtls needs HTTPS: set http.ssl.keystore.location")
		}
		if c.Get("http.ssl.truststore.location") == "" {
			return errors.New("http.auth=mtls needs http.ssl.truststore.location to check client certificates")
		}
	}
	return nil
}
