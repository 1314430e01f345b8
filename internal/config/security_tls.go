package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
)

// TLS settings, with Kafka's names. Each may be set globally (ssl.x) or
// for one listener (listener.name.<l>.ssl.x); read them with
// ListenerGet. Keystores and truststores are PEM only.

func init() {
	brokerDefs = append(brokerDefs,
		Def{Name: "ssl.keystore.type", Kind: KindString, Default: "PEM", Valid: validStoreType("ssl.keystore.type"),
			Doc: "Key store format; only PEM (JKS and PKCS12 are refused)."},
		Def{Name: "ssl.keystore.location", Kind: KindString, Default: "",
			Doc: "PEM file holding the certificate chain and the private key; reloaded when it changes."},
		Def{Name: "ssl.keystore.password", Kind: KindString, Default: "",
			Doc: "Refused with PEM keystores (use ssl.key.password for an encrypted key)."},
		Def{Name: "ssl.key.password", Kind: KindString, Default: "",
			Doc: "Password of an encrypted PKCS#8 private key in the keystore."},
		Def{Name: "ssl.keystore.certificate.chain", Kind: KindString, Default: "",
			Doc: "Inline PEM certificate chain (with ssl.keystore.key), instead of ssl.keystore.location."},
		Def{Name: "ssl.keystore.key", Kind: KindString, Default: "",
			Doc: "Inline PEM private key (with ssl.keystore.certificate.chain)."},
		Def{Name: "ssl.truststore.type", Kind: KindString, Default: "PEM", Valid: validStoreType("ssl.truststore.type"),
			Doc: "Trust store format; only PEM."},
		Def{Name: "ssl.truststore.location", Kind: KindString, Default: "",
			Doc: "PEM file of the CA certificates that client (and peer) certificates are checked against; reloaded when it changes."},
		Def{Name: "ssl.truststore.password", Kind: KindString, Default: "",
			Doc: "Refused with PEM truststores."},
		Def{Name: "ssl.truststore.certificates", Kind: KindString, Default: "",
			Doc: "Inline PEM CA certificates, instead of ssl.truststore.location."},
		Def{Name: "ssl.client.auth", Kind: KindString, Default: "none", Valid: oneOf("none", "requested", "required"),
			Doc: "Client certificates on SSL listeners: none, requested or required (mTLS)."},
		Def{Name: "ssl.enabled.protocols", Kind: KindList, Default: "TLSv1.2,TLSv1.3", Valid: validTLSVersions,
			Doc: "TLS versions served: TLSv1.2 and/or TLSv1.3."},
		Def{Name: "ssl.protocol", Kind: KindString, Default: "TLSv1.3", Valid: validTLSVersions,
			Doc: "Highest TLS version (TLSv1.2 or TLSv1.3)."},
		Def{Name: "ssl.cipher.suites", Kind: KindList, Default: "", Valid: validCipherSuites,
			Doc: "TLS 1.2 cipher suites (Go/IANA names); empty: Go's secure defaults."},
		Def{Name: "ssl.principal.mapping.rules", Kind: KindString, Default: "DEFAULT",
			Doc: "Rules mapping a client certificate's subject to a principal (Kafka's syntax)."},
		Def{Name: "ssl.endpoint.identification.algorithm", Kind: KindString, Default: "https", Valid: oneOf("https", ""),
			Doc: "https: brokers check a peer's certificate names its host; empty: do not."},
	)
}

func validStoreType(name string) func(string) error {
	return func(s string) error {
		if strings.EqualFold(s, "PEM") {
			return nil
		}
		return fmt.Errorf("%s %s is not supported: convert the store to PEM (openssl pkcs12 -in store.p12 -nodes, or keytool -importkeystore to PKCS12 first) and set %s=PEM", name, s, name)
	}
}

// TLSVersion maps Kafka's protocol names to crypto/tls versions; TLSv1
// and TLSv1.1 are refused.
func TLSVersion(s string) (uint16, error) {
	switch strings.TrimSpace(s) {
	case "TLSv1.2":
		return tls.VersionTLS12, nil
	case "TLSv1.3", "TLS":
		return tls.VersionTLS13, nil
	case "TLSv1", "TLSv1.1", "SSLv3", "SSL":
		return 0, fmt.Errorf("%s is not supported: Berth serves TLSv1.2 and TLSv1.3 only", s)
	}
	return 0, fmt.Errorf("unknown TLS version %q (want TLSv1.2 or TLSv1.3)", s)
}

func validTLSVersions(s string) error {
	for _, v := range strings.Split(s, ",") {
		if _, err := TLSVersion(v); err != nil {
			return err
		}
	}
	return nil
}

// CipherSuite finds a TLS 1.2 cipher suite by its Go/IANA name.
func CipherSuite(name string) (uint16, error) {
	name = strings.TrimSpace(name)
	for _, cs := range tls.CipherSuites() {
		if cs.Name == name {
			return cs.ID, nil
		}
	}
	for _, cs := range tls.InsecureCipherSuites() {
		if cs.Name == name {
			return 0, fmt.Errorf("cipher suite %s is insecure and not served", name)
		}
	}
	return 0, fmt.Errorf("unknown cipher suite %q (see Go's tls.CipherSuites)", name)
}

func validCipherSuites(s string) error {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	for _, n := range strings.Split(s, ",") {
		if _, err := CipherSuite(n); err != nil {
			return err
		}
	}
	return nil
}

// validateTLS checks listener's TLS settings as a whole (file contents
// are checked when the node loads them).
func (c *Config) validateTLS(listener string) error {
	get := func(n string) string { return c.ListenerGet(listener, "", n) }
	prefix := "listener " + listener + ": "
	if get("ssl.keystore.password") != "" {
		return errors.New(prefix + "ssl.keystore.password is not used with PEM keystores; leave it empty (an encrypted key's password is ssl.key.password)")
	}
	if get("ssl.truststore.password") != "" {
		return errors.New(prefix + "ssl.truststore.password is not used with PEM truststores; leave it empty")
	}
	loc, chain, key := get("ssl.keystore.location"), get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
	switch {
	case loc != "" && (chain != "" || key != ""):
		return errors.New(prefix + "set ssl.keystore.location or ssl.keystore.certificate.chain with ssl.keystore.key, not both")
	case loc == "" && (chain == "") != (key == ""):
		return errors.New(prefix + "ssl.keystore.certificate.chain and ssl.keystore.key go together")
	case loc == "" && chain == "":
		return errors.New(prefix + "a TLS listener needs a certificate: set ssl.keystore.location (a PEM file with the certificate chain and the key) or listener.name." + strings.ToLower(listener) + ".ssl.keystore.location")
	}
	if get("ssl.truststore.location") != "" && get("ssl.truststore.certificates") != "" {
		return errors.New(prefix + "set ssl.truststore.location or ssl.truststore.certificates, not both")
	}
	if get("ssl.client.auth") != "none" && get("ssl.truststore.location") == "" && get("ssl.truststore.certificates") == "" {
		return errors.New(prefix + "ssl.client.auth=" + get("ssl.client.auth") + " needs a truststore to check client certificates: set ssl.truststore.location")
	}
	return nil
}

// IsSensitive reports whether a broker setting holds a secret (a
// password, a private key, a JAAS configuration with credentials):
// DescribeConfigs reports it as Kafka does, sensitive with no value.
func IsSensitive(name string) bool {
	if _, _, key, ok := splitListenerName(name); ok {
		name = key
	}
	return strings.HasSuffix(name, ".password") || name == "ssl.keystore.key" || name == "sasl.jaas.config" ||
		strings.HasSuffix(name, ".sasl.jaas.config")
}
