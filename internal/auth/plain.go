package auth

import (
	"bytes"
	"crypto/subtle"
	"time"
)

// plainSession is SASL PLAIN (RFC 4616): one message,
// authzid NUL authcid NUL password. The password is checked against the
// listener's JAAS users, then against the user's stored SCRAM credential
// (SCRAM-SHA-512 first) by recomputing its keys.
type plainSession struct {
	a    *Authenticator
	user string
}

func (s *plainSession) Step(msg []byte) ([]byte, bool, error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return nil, false, fail("", "invalid PLAIN message: want authzid NUL username NUL password")
	}
	authz, user, pass := string(parts[0]), string(parts[1]), parts[2]
	if user == "" || len(pass) == 0 {
		return nil, false, fail(user, "PLAIN: empty username or password")
	}
	if authz != "" && authz != user {
		return nil, false, fail(user, "PLAIN: authorization id differs from the username")
	}
	if want, ok := s.a.Plain[user]; ok {
		if subtle.ConstantTimeCompare([]byte(want), pass) == 1 {
			s.user = user
			return nil, true, nil
		}
		return nil, false, fail(user, "invalid username or password")
	}
	if s.a.Scram != nil {
		for _, mech := range []string{MechScramSHA512, MechScramSHA256} {
			if cred, ok := s.a.Scram.ScramCredential(user, mech); ok {
				if scramCheckPassword(mech, cred, pass) {
					s.user = user
					return nil, true, nil
				}
				return nil, false, fail(user, "invalid username or password")
			}
		}
	}
	return nil, false, fail(user, "invalid username or password")
}

func (s *plainSession) Principal() Principal { return User(s.user) }
func (s *plainSession) Expires() time.Time   { return time.Time{} }
