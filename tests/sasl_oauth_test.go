package tests

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// writeJWKS writes a JWK set holding key's public half as kid.
func writeJWKS(t *testing.T, key *rsa.PrivateKey, kid string) string {
	t.Helper()
	set := map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
		"n": base64.RawURLEncoding.EncodeToString(key.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
	}}}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func signRS256(t *testing.T, key *rsa.PrivateKey, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func unsecuredToken(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func oauthClient(t *testing.T, addr, token string, opts ...kgo.Opt) *kgo.Client {
	return saslClient(t, addr, oauth.Auth{Token: token}.AsMechanism(), opts...)
}

// OAUTHBEARER with a JWKS file: a token signed by its key with the
// expected issuer and audience authenticates as User:<sub> and produces;
// an expired token, another audience or issuer, a token signed by another
// key and an unsecured token are refused with SASL_AUTHENTICATION_FAILED.
func TestSASLOAuthBearerJWKS(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwks := writeJWKS(t, key, "k1")
	n := startSASL(t, "PLAIN,OAUTHBEARER",
		tc.With("sasl.oauthbearer.jwks.endpoint.url", "file://"+jwks),
		tc.With("sasl.oauthbearer.expected.audience", "berth,other"),
		tc.With("sasl.oauthbearer.expected.issuer", "https://idp.example"),
		tc.With("sasl.oauthbearer.sub.claim.name", "client_id"),
		tc.With("sasl.oauthbearer.clock.skew.seconds", "5"),
		tc.With("connection.failed.authentication.delay.ms", "5"),
	)
	ctx := ctxT(t, 30*time.Second)
	claims := func(mod func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"client_id": "svc-orders", "sub": "ignored", "iss": "https://idp.example",
			"aud": "berth", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
		if mod != nil {
			mod(c)
		}
		return c
	}
	good := oauthClient(t, n.Addr(), signRS256(t, key, "k1", claims(nil)), kgo.DefaultProduceTopic("oauth-t"), kgo.AllowAutoTopicCreation())
	produceSync(t, good, &kgo.Record{Value: []byte("signed")})

	for name, tok := range map[string]string{
		"expired":       signRS256(t, key, "k1", claims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Minute).Unix() })),
		"no exp":        signRS256(t, key, "k1", claims(func(c jwt.MapClaims) { delete(c, "exp") })),
		"wrong aud":     signRS256(t, key, "k1", claims(func(c jwt.MapClaims) { c["aud"] = "somebody-else" })),
		"wrong iss":     signRS256(t, key, "k1", claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" })),
		"no principal":  signRS256(t, key, "k1", claims(func(c jwt.MapClaims) { delete(c, "client_id") })),
		"bad signature": signRS256(t, other, "k1", claims(nil)),
		"unsecured":     unsecuredToken(t, claims(nil)),
	} {
		err := oauthClient(t, n.Addr(), tok).Ping(ctx)
		if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "invalid OAUTHBEARER token") {
			t.Errorf("%s token: %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
	}
}

// With no JWKS configured, unsecured tokens (alg none) authenticate, as
// Kafka's default development validator accepts them; exp still counts.
func TestSASLOAuthBearerUnsecured(t *testing.T) {
	n := startSASL(t, "OAUTHBEARER", tc.With("connections.max.reauth.ms", "60000"))
	ctx := ctxT(t, 30*time.Second)
	tok := unsecuredToken(t, jwt.MapClaims{"sub": "dev", "exp": time.Now().Add(time.Hour).Unix()})
	cl := oauthClient(t, n.Addr(), tok, kgo.DefaultProduceTopic("oauth-dev"), kgo.AllowAutoTopicCreation())
	produceSync(t, cl, &kgo.Record{Value: []byte("dev")})
	expired := unsecuredToken(t, jwt.MapClaims{"sub": "dev", "exp": time.Now().Add(-time.Hour).Unix()})
	if err := oauthClient(t, n.Addr(), expired).Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("expired unsecured token: %v", err)
	}

	// KIP-368: the session ends with the token, before connections.max.reauth.ms.
	c := dialSASL(t, n.Addr())
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "OAUTHBEARER"
	if r, err := c.do(hs); err != nil || r.(*kmsg.SASLHandshakeResponse).ErrorCode != 0 {
		t.Fatalf("handshake: %v %+v", err, r)
	}
	soon := unsecuredToken(t, jwt.MapClaims{"sub": "dev", "exp": time.Now().Add(5 * time.Second).Unix()})
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 1, []byte("n,,\x01auth=Bearer "+soon+"\x01\x01")
	r, err := c.do(au)
	if err != nil {
		t.Fatal(err)
	}
	if ar := r.(*kmsg.SASLAuthenticateResponse); ar.ErrorCode != 0 || ar.SessionLifetimeMillis <= 0 || ar.SessionLifetimeMillis > 5000 {
		t.Fatalf("authenticate: %+v, want a session lifetime of at most the token's 5 s", ar)
	}
}
