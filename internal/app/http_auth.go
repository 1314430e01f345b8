package app

// Authentication on the HTTP listener (http.auth): a client certificate
// (mtls), HTTP Basic against the same users as SASL PLAIN and SCRAM
// (basic), or an OAuth bearer JWT checked as OAUTHBEARER checks it
// (bearer). The principal goes with the request to the schema registry,
// which authorizes it through the ACLs.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/schemareg"
)

// httpAuthn authenticates HTTP requests.
type httpAuthn struct {
	mtls, basic, bearer bool
	mapper              *auth.PrincipalMapper // mtls principals
	plain               *auth.Authenticator   // basic: PLAIN over the listener's users and the SCRAM store
	oauth               *auth.OAuthValidator  // bearer
	delay               *auth.FailureDelay
	onFail              func(p auth.Principal, host, method, reason string)
	scram               scramImage // the SCRAM users, for the Basic cache's key

	// passed caches Basic credentials that passed, by a hash of the user,
	// the password and the user's current SCRAM keys (so a changed or
	// deleted credential misses): checking a password against a SCRAM
	// credential costs its PBKDF2 iterations (about 2 ms), which every
	// request would otherwise pay.
	mu     sync.Mutex
	passed map[[32]byte]bool
}

// maxPassed bounds the Basic cache; it is emptied when full.
const maxPassed = 10000

// basicKey is the Basic cache's key for user and pass.
func (a *httpAuthn) basicKey(user, pass string) [32]byte {
	h := sha256.New()
	h.Write([]byte(user))
	h.Write([]byte{0})
	h.Write([]byte(pass))
	for _, mech := range []string{auth.MechScramSHA512, auth.MechScramSHA256} {
		if c, ok := a.scram.ScramCredential(user, mech); ok {
			h.Write([]byte{0})
			h.Write(c.StoredKey)
		}
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// principalKey carries a request's principal in its context.
type principalKey struct{}

// requestPrincipal is the principal http.auth established (ANONYMOUS
// without authentication).
func requestPrincipal(r *http.Request) auth.Principal {
	if p, ok := r.Context().Value(principalKey{}).(auth.Principal); ok {
		return p
	}
	return auth.Anonymous
}

// newHTTPAuthn builds http.auth's methods; nil when it is none.
func (n *Node) newHTTPAuthn(cfg *config.Config) (*httpAuthn, error) {
	methods := config.HTTPAuthMethods(cfg.Get("http.auth"))
	if len(methods) == 0 {
		return nil, nil
	}
	a := &httpAuthn{mtls: slices.Contains(methods, "mtls"), basic: slices.Contains(methods, "basic"),
		bearer: slices.Contains(methods, "bearer"), delay: n.sasl.Delay}
	var err error
	if a.mapper, err = auth.ParsePrincipalMappingRules(cfg.Get("http.ssl.principal.mapping.rules")); err != nil {
		return nil, fmt.Errorf("http.ssl.principal.mapping.rules: %w", err)
	}
	// The SASL listener whose users (PLAIN's JAAS users) and OAUTHBEARER
	// validator the HTTP listener shares.
	var src *auth.Authenticator
	name := cfg.Get("http.sasl.listener")
	if name != "" {
		if src = n.sasl.Listeners[name]; src == nil {
			return nil, fmt.Errorf("http.sasl.listener %s is not a SASL listener", name)
		}
	} else {
		names := make([]string, 0, len(n.sasl.Listeners))
		for l := range n.sasl.Listeners {
			names = append(names, l)
		}
		slices.Sort(names)
		if len(names) > 0 {
			src = n.sasl.Listeners[names[0]]
		}
	}
	a.scram = scramImage(n.image)
	a.plain = &auth.Authenticator{Enabled: []string{auth.MechPlain}, Scram: a.scram}
	if src != nil {
		a.plain.Plain = src.Plain
		a.oauth = src.OAuth
	}
	if a.bearer && a.oauth == nil {
		return nil, errors.New("http.auth=bearer needs a SASL listener with OAUTHBEARER enabled (its JWKS, issuer and audience check the tokens; name it with http.sasl.listener)")
	}
	return a, nil
}

// wrap authenticates every request but the open paths.
func (a *httpAuthn) wrap(h http.Handler, open func(path string) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if open(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		p, method, err := a.authenticate(r)
		if err != nil {
			host := hostOf(r.RemoteAddr)
			if a.onFail != nil {
				a.onFail(p, r.RemoteAddr, method, err.Error())
			}
			if d := a.delay.Fail(host, time.Now()); d > 0 {
				select {
				case <-time.After(d):
				case <-r.Context().Done():
				}
			}
			if a.basic {
				w.Header().Add("WWW-Authenticate", `Basic realm="berth"`)
			}
			if a.bearer {
				w.Header().Add("WWW-Authenticate", `Bearer error="invalid_token"`)
			}
			schemareg.WriteError(w, &schemareg.Error{Status: http.StatusUnauthorized, Code: http.StatusUnauthorized,
				Message: "Unauthorized: " + err.Error()})
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// authenticate returns the request's principal, or why it has none.
func (a *httpAuthn) authenticate(r *http.Request) (auth.Principal, string, error) {
	if a.mtls && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		p, err := a.mapper.Principal(r.TLS.VerifiedChains[0][0])
		return p, "mtls", err
	}
	authz := r.Header.Get("Authorization")
	scheme, cred, _ := strings.Cut(authz, " ")
	switch {
	case a.basic && strings.EqualFold(scheme, "Basic"):
		user, pass, ok := r.BasicAuth()
		if !ok {
			return auth.Principal{}, "basic", errors.New("malformed Basic credentials")
		}
		key := a.basicKey(user, pass)
		a.mu.Lock()
		ok = a.passed[key]
		a.mu.Unlock()
		if ok {
			return auth.User(user), "basic", nil
		}
		s, _ := a.plain.Start(auth.MechPlain)
		if _, _, err := s.Step([]byte("\x00" + user + "\x00" + pass)); err != nil {
			return auth.User(user), "basic", errors.New("invalid username or password")
		}
		a.mu.Lock()
		if a.passed == nil || len(a.passed) >= maxPassed {
			a.passed = map[[32]byte]bool{}
		}
		a.passed[key] = true
		a.mu.Unlock()
		return s.Principal(), "basic", nil
	case a.bearer && strings.EqualFold(scheme, "Bearer"):
		name, _, err := a.oauth.Validate(strings.TrimSpace(cred), time.Now())
		if err != nil {
			return auth.Principal{}, "bearer", fmt.Errorf("invalid token: %v", err)
		}
		return auth.User(name), "bearer", nil
	}
	var want []string
	if a.mtls {
		want = append(want, "a client certificate signed by http.ssl.truststore.location")
	}
	if a.basic {
		want = append(want, "HTTP Basic credentials (a SCRAM or PLAIN user)")
	}
	if a.bearer {
		want = append(want, "an OAuth bearer token")
	}
	return auth.Principal{}, "none", fmt.Errorf("authentication required: give %s", strings.Join(want, " or "))
}

func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// tlsNeedsClientCert: with mtls, the TLS listener asks for certificates.
func tlsNeedsClientCert(cfg *config.Config) bool {
	return slices.Contains(config.HTTPAuthMethods(cfg.Get("http.auth")), "mtls")
}
