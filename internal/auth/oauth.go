package auth

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// OAuthValidator checks OAUTHBEARER tokens (JWTs) as Kafka's JWT
// validators do. With a JWKS the signature must verify against one of its
// keys (RS*, PS*, ES*); without one, tokens must be unsecured (alg none),
// as Kafka's default OAuthBearerUnsecuredValidatorCallbackHandler takes
// them: for development only. exp is required; iss and aud are checked
// when expected values are set; the principal is the SubClaim claim.
type OAuthValidator struct {
	JWKS      *JWKS // nil: unsecured tokens
	Audience  []string
	Issuer    string
	SubClaim  string // default "sub"
	ClockSkew time.Duration
}

var signedMethods = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"}

// Validate checks a token and returns its principal name and expiry.
func (v *OAuthValidator) Validate(token string, now time.Time) (string, time.Time, error) {
	opts := []jwt.ParserOption{
		jwt.WithExpirationRequired(), jwt.WithLeeway(v.ClockSkew),
		jwt.WithTimeFunc(func() time.Time { return now }),
	}
	if v.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(v.Issuer))
	}
	if len(v.Audience) > 0 {
		opts = append(opts, jwt.WithAudience(v.Audience...))
	}
	var keyFunc jwt.Keyfunc
	if v.JWKS == nil {
		opts = append(opts, jwt.WithValidMethods([]string{"none"}))
		keyFunc = func(*jwt.Token) (any, error) { return jwt.UnsafeAllowNoneSignatureType, nil }
	} else {
		opts = append(opts, jwt.WithValidMethods(signedMethods))
		keyFunc = func(t *jwt.Token) (any, error) {
			kid, _ := t.Header["kid"].(string)
			return v.JWKS.Key(kid)
		}
	}
	claims := jwt.MapClaims{}
	if _, err := jwt.NewParser(opts...).ParseWithClaims(token, claims, keyFunc); err != nil {
		return "", time.Time{}, err
	}
	subClaim := v.SubClaim
	if subClaim == "" {
		subClaim = "sub"
	}
	sub, _ := claims[subClaim].(string)
	if strings.TrimSpace(sub) == "" {
		return "", time.Time{}, fmt.Errorf("token has no %q claim naming the principal", subClaim)
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return "", time.Time{}, errors.New("token has no exp claim")
	}
	return sub, exp.Time, nil
}

// OAuthClientFirst is a parsed OAUTHBEARER client message (RFC 7628):
// gs2-header %x01 auth=Bearer <token> %x01 [key=value %x01]* %x01.
type OAuthClientFirst struct {
	Authzid string
	Token   string
	Ext     map[string]string
}

// ParseOAuthClientFirst parses RFC 7628's initial client response.
func ParseOAuthClientFirst(msg string) (OAuthClientFirst, error) {
	var f OAuthClientFirst
	cb, rest, ok := strings.Cut(msg, ",")
	if !ok || (cb != "n" && cb != "y") {
		return f, errors.New("OAUTHBEARER: invalid GS2 header")
	}
	authz, rest, ok := strings.Cut(rest, ",")
	if !ok {
		return f, errors.New("OAUTHBEARER: truncated GS2 header")
	}
	if authz != "" {
		a, isA := strings.CutPrefix(authz, "a=")
		if !isA {
			return f, errors.New("OAUTHBEARER: invalid authzid")
		}
		name, err := saslName(a)
		if err != nil {
			return f, err
		}
		f.Authzid = name
	}
	if !strings.HasPrefix(rest, "\x01") || !strings.HasSuffix(rest, "\x01\x01") || len(rest) < 3 {
		return f, errors.New("OAUTHBEARER: want \\x01key=value...\\x01\\x01 after the GS2 header")
	}
	for _, kv := range strings.Split(rest[1:len(rest)-2], "\x01") {
		k, val, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return f, fmt.Errorf("OAUTHBEARER: invalid key-value pair")
		}
		if k == "auth" {
			scheme, tok, ok := strings.Cut(val, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
				return f, errors.New("OAUTHBEARER: auth value must be \"Bearer <token>\"")
			}
			f.Token = strings.TrimSpace(tok)
			continue
		}
		if f.Ext == nil {
			f.Ext = map[string]string{}
		}
		f.Ext[k] = val
	}
	if f.Token == "" {
		return f, errors.New("OAUTHBEARER: no auth=Bearer token")
	}
	return f, nil
}

// oauthInvalidToken is the server's error message of RFC 7628 §3.2.2
// that Kafka sends before it fails the exchange.
var oauthInvalidToken = []byte(`{"status":"invalid_token"}`)

type oauthSession struct {
	v       *OAuthValidator
	now     func() time.Time
	user    string
	exp     time.Time
	pending *Failure
	done    bool
}

func (s *oauthSession) Step(msg []byte) ([]byte, bool, error) {
	if s.pending != nil {
		// The client acknowledges the error message with a lone %x01.
		return nil, false, s.pending
	}
	if s.done {
		return nil, false, fail(s.user, "OAUTHBEARER: unexpected message after the exchange")
	}
	f, err := ParseOAuthClientFirst(string(msg))
	if err != nil {
		return nil, false, fail("", "%v", err)
	}
	sub, exp, err := s.v.Validate(f.Token, s.now())
	if err != nil {
		s.pending = fail(tokenSubject(f.Token), "invalid OAUTHBEARER token: %v", err)
		return oauthInvalidToken, false, nil
	}
	if f.Authzid != "" && f.Authzid != sub {
		return nil, false, fail(sub, "OAUTHBEARER: authorization id differs from the token's principal")
	}
	s.user, s.exp, s.done = sub, exp, true
	return nil, true, nil
}

// Pending implements Challenged.
func (s *oauthSession) Pending() *Failure { return s.pending }

func (s *oauthSession) Principal() Principal { return User(s.user) }
func (s *oauthSession) Expires() time.Time   { return s.exp }

// tokenSubject is the sub claim of a token that did not validate, for
// the log line only ("" when unreadable).
func tokenSubject(tok string) string {
	claims := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(tok, claims); err != nil {
		return ""
	}
	sub, _ := claims["sub"].(string)
	if len(sub) > 256 {
		sub = sub[:256]
	}
	return sub
}
