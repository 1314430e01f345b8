package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

type memStore map[string]ScramCredential // user/mech

func (m memStore) ScramCredential(user, mech string) (ScramCredential, bool) {
	c, ok := m[user+"/"+mech]
	return c, ok
}

func newCred(t testing.TB, mech, password string, iters int) ScramCredential {
	salt := []byte("0123456789abcdef")
	salted, err := SaltedPassword(mech, []byte(password), salt, iters)
	if err != nil {
		t.Fatal(err)
	}
	stored, server := ScramKeys(mech, salted)
	return ScramCredential{Salt: salt, Iterations: iters, StoredKey: stored, ServerKey: server}
}

func scramLogin(a *Authenticator, mech, user, pass string) (Principal, error) {
	m := scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
	if mech == MechScramSHA512 {
		m = scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	}
	cs, msg, err := m.Authenticate(context.Background(), "broker")
	if err != nil {
		return Principal{}, err
	}
	s, ok := a.Start(mech)
	if !ok {
		return Principal{}, errors.New("not enabled")
	}
	for i := 0; i < 4; i++ {
		out, done, err := s.Step(msg)
		if err != nil {
			return Principal{}, err
		}
		cdone, next, err := cs.Challenge(out)
		if err != nil {
			return Principal{}, fmt.Errorf("client: %w", err)
		}
		if done {
			if !cdone {
				return Principal{}, errors.New("server done, client not")
			}
			return s.Principal(), nil
		}
		msg = next
	}
	return Principal{}, errors.New("exchange did not end")
}

func TestScramExchangeWithFranzGoClient(t *testing.T) {
	a := &Authenticator{Enabled: Mechanisms, Secret: []byte("s"), Scram: memStore{
		"alice/SCRAM-SHA-256": newCred(t, MechScramSHA256, "pw256", 4096),
		"alice/SCRAM-SHA-512": newCred(t, MechScramSHA512, "pw512", 4096),
		"a,b=c/SCRAM-SHA-256": newCred(t, MechScramSHA256, "odd", 4096),
	}}
	for _, c := range []struct {
		mech, user, pass string
		ok               bool
	}{
		{MechScramSHA256, "alice", "pw256", true},
		{MechScramSHA512, "alice", "pw512", true},
		{MechScramSHA256, "a,b=c", "odd", true},
		{MechScramSHA256, "alice", "pw512", false},
		{MechScramSHA512, "alice", "wrong", false},
		{MechScramSHA512, "nobody", "x", false},
	} {
		p, err := scramLogin(a, c.mech, c.user, c.pass)
		if c.ok && (err != nil || p != User(c.user)) {
			t.Errorf("%s %s: %v %v", c.mech, c.user, p, err)
		}
		if !c.ok && !errors.Is(err, ErrAuthFailed) {
			t.Errorf("%s %s with a wrong password: %v, want ErrAuthFailed", c.mech, c.user, err)
		}
	}
	// PLAIN checks the same store.
	for pass, ok := range map[string]bool{"pw512": true, "pw256": false, "nope": false} {
		s, _ := a.Start(MechPlain)
		_, done, err := s.Step([]byte("\x00alice\x00" + pass))
		if done != ok || (err == nil) != ok {
			t.Errorf("PLAIN alice/%s: done %v err %v", pass, done, err)
		}
	}
}

func TestOAuthInvalidTokenChallenge(t *testing.T) {
	a := &Authenticator{Enabled: []string{MechOAuthBearer}, OAuth: &OAuthValidator{}}
	tok, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "x", "exp": time.Now().Add(-time.Hour).Unix()}).
		SignedString(jwt.UnsafeAllowNoneSignatureType)
	s, _ := a.Start(MechOAuthBearer)
	out, done, err := s.Step([]byte("n,,\x01auth=Bearer " + tok + "\x01\x01"))
	if err != nil || done || string(out) != `{"status":"invalid_token"}` {
		t.Fatalf("first step: %q %v %v", out, done, err)
	}
	if _, _, err := s.Step([]byte("\x01")); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("after the acknowledgement: %v", err)
	}
	tok, _ = jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "dev", "exp": time.Now().Add(time.Hour).Unix()}).
		SignedString(jwt.UnsafeAllowNoneSignatureType)
	s, _ = a.Start(MechOAuthBearer)
	if _, done, err := s.Step([]byte("n,,\x01auth=Bearer " + tok + "\x01\x01")); !done || err != nil || s.Principal() != User("dev") || s.Expires().IsZero() {
		t.Fatalf("valid unsecured token: %v %v %v", done, err, s.Principal())
	}
}

func TestJWKSECKey(t *testing.T) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	raw, _ := k.PublicKey.Bytes() // 0x04 || X || Y
	set, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "EC", "crv": "P-256", "kid": "e1",
		"x": base64.RawURLEncoding.EncodeToString(raw[1:33]), "y": base64.RawURLEncoding.EncodeToString(raw[33:]),
	}, {"kty": "oct", "kid": "sym", "k": "AAAA"}}})
	keys, err := ParseJWKS(set)
	if err != nil || len(keys) != 1 {
		t.Fatalf("%v %v", keys, err)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"sub": "ec", "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = "e1"
	s, _ := tok.SignedString(k)
	v := &OAuthValidator{JWKS: &JWKS{keys: keys, fetched: time.Now(), tried: time.Now()}}
	if sub, _, err := v.Validate(s, time.Now()); err != nil || sub != "ec" {
		t.Fatalf("ES256 token: %q %v", sub, err)
	}
	if _, err := ParseJWKS([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}]}`)); err == nil {
		t.Fatal("a bad EC point was accepted")
	}
}

func TestPlainUsersJAAS(t *testing.T) {
	users, err := PlainUsers(`org.apache.kafka.common.security.plain.PlainLoginModule required
		username="admin" password="admin-secret"
		user_admin="admin-secret" user_alice="a\"l\\ice;=" user_bare=word;`)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 3 || users["admin"] != "admin-secret" || users["alice"] != `a"l\ice;=` || users["bare"] != "word" {
		t.Fatalf("%q", users)
	}
	for _, bad := range []string{
		``, `org.x.Y required`, `org.apache.kafka.common.security.plain.PlainLoginModule always user_a="b";`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required user_a;`,
		`org.apache.kafka.common.security.scram.ScramLoginModule required;`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required; org.apache.kafka.common.security.plain.PlainLoginModule required;`,
	} {
		if _, err := PlainUsers(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestFailureDelayGrowsAndDecays(t *testing.T) {
	f := &FailureDelay{Base: 100 * time.Millisecond, Max: 5 * time.Second, Decay: 30 * time.Second}
	t0 := time.Unix(1000, 0)
	var got []time.Duration
	for i := 0; i < 8; i++ {
		got = append(got, f.Fail("10.0.0.1", t0.Add(time.Duration(i)*time.Millisecond)))
	}
	want := "[100ms 200ms 400ms 800ms 1.6s 3.2s 5s 5s]"
	if fmt.Sprint(got) != want {
		t.Fatalf("delays %v, want %s", got, want)
	}
	if d := f.Fail("10.0.0.2", t0); d != 100*time.Millisecond {
		t.Fatalf("another address: %v", d)
	}
	if d := f.Fail("10.0.0.1", t0.Add(10*time.Minute)); d != 100*time.Millisecond {
		t.Fatalf("after 10 quiet minutes: %v, want the base again", d)
	}
}

func TestParseMechanisms(t *testing.T) {
	if m, err := ParseMechanisms(" scram-sha-512, PLAIN,PLAIN "); err != nil || strings.Join(m, ",") != "SCRAM-SHA-512,PLAIN" {
		t.Fatalf("%v %v", m, err)
	}
	if _, err := ParseMechanisms("GSSAPI"); err == nil || !strings.Contains(err.Error(), "GSSAPI") {
		t.Fatalf("GSSAPI: %v", err)
	}
	if _, err := ParseMechanisms("DIGEST-MD5"); err == nil {
		t.Fatal("unknown mechanism accepted")
	}
}

// A JWKS served over HTTP is re-read when a token names a key id it does
// not hold (a rotated key), at most every few seconds.
func TestJWKSURLRotation(t *testing.T) {
	k1, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	set := func(kid string, k *ecdsa.PrivateKey) []byte {
		raw, _ := k.PublicKey.Bytes()
		b, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "EC", "crv": "P-256", "kid": kid,
			"x": base64.RawURLEncoding.EncodeToString(raw[1:33]), "y": base64.RawURLEncoding.EncodeToString(raw[33:])}}})
		return b
	}
	var served atomic.Pointer[[]byte]
	b := set("k1", k1)
	served.Store(&b)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(*served.Load()) }))
	defer srv.Close()
	j, err := NewJWKS(srv.URL, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	v := &OAuthValidator{JWKS: j}
	sign := func(kid string, k *ecdsa.PrivateKey) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"sub": kid, "exp": time.Now().Add(time.Hour).Unix()})
		tok.Header["kid"] = kid
		s, _ := tok.SignedString(k)
		return s
	}
	if _, _, err := v.Validate(sign("k1", k1), time.Now()); err != nil {
		t.Fatal(err)
	}
	b2 := set("k2", k2)
	served.Store(&b2)
	j.mu.Lock()
	j.tried = time.Time{} // the last fetch was long enough ago
	j.mu.Unlock()
	if sub, _, err := v.Validate(sign("k2", k2), time.Now()); err != nil || sub != "k2" {
		t.Fatalf("rotated key: %q %v", sub, err)
	}
	if _, err := NewJWKS("ftp://x/jwks", time.Hour); err == nil {
		t.Fatal("an ftp:// JWKS URL was accepted")
	}
}
