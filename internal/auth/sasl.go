package auth

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// SASL mechanism names, as Kafka spells them.
const (
	MechPlain       = "PLAIN"
	MechScramSHA256 = "SCRAM-SHA-256"
	MechScramSHA512 = "SCRAM-SHA-512"
	MechOAuthBearer = "OAUTHBEARER"
	MechGSSAPI      = "GSSAPI"
)

// Mechanisms are the SASL mechanisms Berth serves.
var Mechanisms = []string{MechPlain, MechScramSHA256, MechScramSHA512, MechOAuthBearer}

// ErrAuthFailed is the sentinel every authentication failure wraps: the
// handler maps it to SASL_AUTHENTICATION_FAILED.
var ErrAuthFailed = errors.New("authentication failed")

// Failure is a failed SASL exchange: who was tried and why. Reason is
// what the client is told; it never carries a secret.
type Failure struct {
	User   string // the user name the client claimed ("" if none parsed)
	Reason string
}

func (f *Failure) Error() string { return "authentication failed: " + f.Reason }

// Unwrap makes errors.Is(f, ErrAuthFailed) true.
func (f *Failure) Unwrap() error { return ErrAuthFailed }

func fail(user, format string, args ...any) *Failure {
	return &Failure{User: user, Reason: fmt.Sprintf(format, args...)}
}

// Session is one SASL exchange on the server side. Step takes the
// client's next message and returns the server's answer; done reports
// the exchange complete and successful. An error ends it: a *Failure for
// bad credentials or a malformed message.
type Session interface {
	Step(msg []byte) (resp []byte, done bool, err error)
	// Principal is who authenticated (after done).
	Principal() Principal
	// Expires is when the credential ends (an OAUTHBEARER token's exp);
	// zero when it does not.
	Expires() time.Time
}

// Challenged is implemented by a Session whose failure is told to the
// client as a server message first (OAUTHBEARER's error JSON): while
// Pending is true the exchange has already failed, Step answers the
// client's acknowledgement with the Failure.
type Challenged interface {
	Pending() *Failure
}

// ScramCredential is a user's stored SCRAM credential (RFC 5802): never
// the password.
type ScramCredential struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// ScramStore looks up SCRAM credentials by user and mechanism
// (SCRAM-SHA-256 or SCRAM-SHA-512).
type ScramStore interface {
	ScramCredential(user, mechanism string) (ScramCredential, bool)
}

// Authenticator is one listener's SASL configuration: the mechanisms it
// enables and where each finds its credentials. Safe for concurrent use.
type Authenticator struct {
	Enabled []string
	// Plain holds PLAIN users from the listener's JAAS config (user_NAME
	// entries), name → password; users not there are checked against
	// Scram.
	Plain map[string]string
	Scram ScramStore
	OAuth *OAuthValidator
	// Reauth is connections.max.reauth.ms by mechanism, as the listener
	// reads it (listener.name.<l>.<mech>.connections.max.reauth.ms, ...):
	// the KIP-368 session lifetime; 0 or absent: sessions do not end.
	Reauth map[string]time.Duration
	// Secret seeds the fake credentials an unknown SCRAM user is given,
	// so a failed exchange looks the same whether the user exists or not.
	Secret []byte
	Now    func() time.Time
}

// Enables reports whether mech is enabled.
func (a *Authenticator) Enables(mech string) bool { return slices.Contains(a.Enabled, mech) }

// Start begins an exchange with mech; ok=false when it is not enabled.
func (a *Authenticator) Start(mech string) (Session, bool) {
	if !a.Enables(mech) {
		return nil, false
	}
	switch mech {
	case MechPlain:
		return &plainSession{a: a}, true
	case MechScramSHA256, MechScramSHA512:
		return newScramSession(a, mech), true
	case MechOAuthBearer:
		if a.OAuth == nil {
			return nil, false
		}
		return &oauthSession{v: a.OAuth, now: a.now}, true
	}
	return nil, false
}

func (a *Authenticator) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// ParseMechanisms parses sasl.enabled.mechanisms: a comma list of Kafka's
// names. GSSAPI (Kerberos) and unknown names are refused.
func ParseMechanisms(s string) ([]string, error) {
	var out []string
	for _, m := range strings.Split(s, ",") {
		m = strings.ToUpper(strings.TrimSpace(m))
		switch {
		case m == "":
			continue
		case m == MechGSSAPI:
			return nil, errors.New("sasl.enabled.mechanisms: GSSAPI (Kerberos) is not supported; use SCRAM-SHA-512, SCRAM-SHA-256, PLAIN or OAUTHBEARER")
		case !slices.Contains(Mechanisms, m):
			return nil, fmt.Errorf("sasl.enabled.mechanisms: unknown mechanism %q (want %s)", m, strings.Join(Mechanisms, ", "))
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out, nil
}
