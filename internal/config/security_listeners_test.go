package config

import (
	"strings"
	"testing"
)

func TestNamedListeners(t *testing.T) {
	c := Defaults()
	must := func(name, v string) {
		t.Helper()
		if err := c.Set(name, v, SourceFile); err != nil {
			t.Fatal(err)
		}
	}
	must("listeners", "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9095,SSL://127.0.0.1:9093")
	must("controller.quorum.voters", "1@127.0.0.1:9095")
	// INTERNAL is not in the map and is not a protocol: an error that says to map it.
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "add INTERNAL:PLAINTEXT") {
		t.Fatalf("unmapped listener: %v", err)
	}
	must("listener.security.protocol.map", "INTERNAL:SSL,PLAINTEXT:PLAINTEXT,SSL:SSL")
	// SSL listeners need a certificate.
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "ssl.keystore.location") {
		t.Fatalf("SSL without a keystore: %v", err)
	}
	must("ssl.keystore.location", "/some/where.pem")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	ls, err := c.KafkaListeners()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range ls {
		got = append(got, l.Name+"="+l.Protocol)
	}
	if strings.Join(got, " ") != "PLAINTEXT=PLAINTEXT INTERNAL=SSL SSL=SSL" {
		t.Fatalf("KafkaListeners: %v", got)
	}
	// The controller listener is PLAINTEXT when unmapped, and says so.
	if p, defaulted, err := c.ProtocolOf("CONTROLLER"); p != "PLAINTEXT" || !defaulted || err != nil {
		t.Fatalf("controller: %s %v %v", p, defaulted, err)
	}
	// Inter-broker: the first listener by default, then by name or protocol.
	if ib, _ := c.InterBrokerListener(); ib.Name != "PLAINTEXT" {
		t.Fatalf("default inter-broker listener %s", ib.Name)
	}
	must("inter.broker.listener.name", "internal")
	if ib, _ := c.InterBrokerListener(); ib.Name != "INTERNAL" || ib.Port != 9094 {
		t.Fatalf("inter-broker listener %+v", ib)
	}
	must("security.inter.broker.protocol", "SSL")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "only one of") {
		t.Fatalf("both inter-broker settings: %v", err)
	}
	must("inter.broker.listener.name", "")
	if ib, _ := c.InterBrokerListener(); ib.Name != "SSL" {
		t.Fatalf("security.inter.broker.protocol=SSL: %+v", ib)
	}
	must("inter.broker.listener.name", "NOPE")
	c.sources["security.inter.broker.protocol"] = SourceDefault
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "NOPE is not one of listeners") {
		t.Fatalf("unknown inter-broker listener: %v", err)
	}
	must("inter.broker.listener.name", "")

	// Advertised addresses by listener name; an unknown name is an error.
	must("advertised.listeners", "PLAINTEXT://kafka.example:19092,SSL://kafka.example:19093")
	for _, l := range ls {
		a, ok, err := c.Advertised(l)
		switch l.Name {
		case "PLAINTEXT":
			if !ok || err != nil || a.Host != "kafka.example" || a.Port != 19092 {
				t.Fatalf("advertised %s: %+v %v %v", l.Name, a, ok, err)
			}
		case "INTERNAL":
			if ok || err != nil {
				t.Fatalf("advertised INTERNAL: %+v %v %v", a, ok, err)
			}
		}
	}
	must("advertised.listeners", "OTHER://kafka.example:19092")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "OTHER, which is not a Kafka listener") {
		t.Fatalf("advertised unknown listener: %v", err)
	}
}

func TestTLSSettingsRefused(t *testing.T) {
	c := Defaults()
	for _, tc := range []struct{ name, value, want string }{
		{"ssl.keystore.type", "JKS", "convert the store to PEM"},
		{"listener.name.ssl.ssl.keystore.type", "PKCS12", "convert the store to PEM"},
		{"ssl.truststore.type", "JKS", "PEM"},
		{"ssl.enabled.protocols", "TLSv1.2,TLSv1.1", "TLSv1.1 is not supported"},
		{"ssl.protocol", "TLSv1", "TLSv1 is not supported"},
		{"ssl.client.auth", "maybe", "must be one of"},
		{"ssl.cipher.suites", "TLS_RSA_WITH_RC4_128_SHA", "insecure"},
	} {
		if err := c.Set(tc.name, tc.value, SourceFile); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: %v, want an error with %q", tc.name, tc.value, err, tc.want)
		}
	}
	for _, ok := range [][2]string{{"ssl.keystore.type", "PEM"}, {"ssl.enabled.protocols", "TLSv1.3"}, {"ssl.cipher.suites", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}} {
		if err := c.Set(ok[0], ok[1], SourceFile); err != nil {
			t.Errorf("%s=%s: %v", ok[0], ok[1], err)
		}
	}
	c.Set("listeners", "SSL://127.0.0.1:9093", SourceFile)
	c.Set("listener.name.ssl.ssl.keystore.location", "/k.pem", SourceFile)
	c.Set("ssl.client.auth", "required", SourceFile)
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "needs a truststore") {
		t.Fatalf("client auth without a truststore: %v", err)
	}
	c.Set("ssl.truststore.location", "/ca.pem", SourceFile)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// listener.name.SSL.x and listener.name.ssl.x are the same setting.
func TestListenerSettingCase(t *testing.T) {
	c := Defaults()
	if err := c.Set("listener.name.SSL.ssl.keystore.location", "/k.pem", SourceFile); err != nil {
		t.Fatal(err)
	}
	if got := c.ListenerGet("SSL", "", "ssl.keystore.location"); got != "/k.pem" {
		t.Fatalf("ListenerGet: %q", got)
	}
	if !c.ListenerSet("ssl", "", "ssl.keystore.location") {
		t.Fatal("ListenerSet: not set")
	}
}
