package auth

import (
	"testing"
)

// The SASL message parsers take bytes from unauthenticated clients: they
// must never panic, whatever arrives.

func FuzzScramClientFirst(f *testing.F) {
	for _, s := range []string{"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL", "y,a=user,n=user,r=abc,tokenauth=true",
		"p=tls-unique,,n=u,r=x", "n,,n=a=2Cb=3D,r=x", "n,,n=a=,r=x", "", ",", "n,,", "n,,n=,r="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		first, err := ParseScramClientFirst(s)
		if err == nil && (first.User == "" || first.Nonce == "") {
			t.Fatalf("accepted %q without a user or nonce", s)
		}
		a := &Authenticator{Enabled: Mechanisms, Secret: []byte("k"), Scram: memStore{}}
		sess, _ := a.Start(MechScramSHA512)
		if _, _, err := sess.Step([]byte(s)); err == nil {
			_, _, _ = sess.Step([]byte("c=biws,r=x,p=AAAA"))
		}
	})
}

func FuzzScramClientFinal(f *testing.F) {
	for _, s := range []string{"c=biws,r=abc,p=dHpiVnA=", "c=biws,r=abc", "p=", ",p=!!", "c=,r=,p="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseScramClientFinal(s)
	})
}

func FuzzOAuthClientFirst(f *testing.F) {
	for _, s := range []string{"n,,\x01auth=Bearer abc.def.\x01\x01", "n,a=x,\x01auth=Bearer t\x01k=v\x01\x01",
		"\x01", "n,,\x01\x01", "n,,\x01auth=Bearer\x01\x01", "y,,\x01auth=bearer  x \x01\x01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseOAuthClientFirst(s)
		if err == nil && c.Token == "" {
			t.Fatalf("accepted %q without a token", s)
		}
		a := &Authenticator{Enabled: Mechanisms, OAuth: &OAuthValidator{}}
		sess, _ := a.Start(MechOAuthBearer)
		_, _, _ = sess.Step([]byte(s))
		_, _, _ = sess.Step([]byte("\x01"))
	})
}

func FuzzPlainMessage(f *testing.F) {
	for _, s := range []string{"\x00admin\x00admin-secret", "a\x00b\x00c", "", "\x00\x00", "\x00a\x00b\x00c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a := &Authenticator{Enabled: Mechanisms, Plain: map[string]string{"admin": "admin-secret"}, Scram: memStore{}}
		sess, _ := a.Start(MechPlain)
		_, done, err := sess.Step([]byte(s))
		if done && s != "\x00admin\x00admin-secret" && s != "admin\x00admin\x00admin-secret" {
			t.Fatalf("%q authenticated", s)
		}
		_ = err
	})
}

func FuzzJAAS(f *testing.F) {
	for _, s := range []string{
		`org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret";`,
		`a required k="v\"\\";b optional;`, `x required k="unterminated`, `;;`, `a b c=d;`, `"q" required;`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		es, err := ParseJAAS(s)
		if err == nil && len(es) == 0 {
			t.Fatal("no entries and no error")
		}
		_, _ = PlainUsers(s)
	})
}
