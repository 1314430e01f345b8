package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"
)

// SCRAM iteration bounds, Kafka's (ScramMechanism's minIterations and
// AlterUserScramCredentials' check).
const (
	ScramMinIterations = 4096
	ScramMaxIterations = 16384
)

// ScramHash is the hash of a SCRAM mechanism; nil for another name.
func ScramHash(mech string) func() hash.Hash {
	switch mech {
	case MechScramSHA256:
		return sha256.New
	case MechScramSHA512:
		return sha512.New
	}
	return nil
}

// SaltedPassword is RFC 5802's Hi(password, salt, i): PBKDF2 with the
// mechanism's HMAC.
func SaltedPassword(mech string, password, salt []byte, iterations int) ([]byte, error) {
	h := ScramHash(mech)
	if h == nil {
		return nil, fmt.Errorf("unknown SCRAM mechanism %q", mech)
	}
	return pbkdf2.Key(h, string(password), salt, iterations, h().Size())
}

// ScramKeys derives the stored credential's StoredKey and ServerKey from
// a salted password: StoredKey = H(HMAC(salted, "Client Key")),
// ServerKey = HMAC(salted, "Server Key").
func ScramKeys(mech string, salted []byte) (storedKey, serverKey []byte) {
	h := ScramHash(mech)
	clientKey := hmacOf(h, salted, []byte("Client Key"))
	d := h()
	d.Write(clientKey)
	return d.Sum(nil), hmacOf(h, salted, []byte("Server Key"))
}

func hmacOf(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// scramCheckPassword reports whether password matches cred (PLAIN over
// the SCRAM store).
func scramCheckPassword(mech string, cred ScramCredential, password []byte) bool {
	salted, err := SaltedPassword(mech, password, cred.Salt, cred.Iterations)
	if err != nil {
		return false
	}
	stored, _ := ScramKeys(mech, salted)
	return subtle.ConstantTimeCompare(stored, cred.StoredKey) == 1
}

// scramSession is the server side of SCRAM-SHA-256/512 (RFC 5802, RFC
// 7677) without channel binding, as Kafka serves it.
type scramSession struct {
	a    *Authenticator
	mech string
	h    func() hash.Hash

	step            int
	user            string
	gs2Header       string
	clientFirstBare string
	serverFirst     string
	nonce           string
	cred            ScramCredential
	known           bool
}

func newScramSession(a *Authenticator, mech string) *scramSession {
	return &scramSession{a: a, mech: mech, h: ScramHash(mech)}
}

// ScramClientFirst is a parsed client-first message.
type ScramClientFirst struct {
	GS2Header string // "n,," or "n,a=authzid,"
	Authzid   string
	User      string
	Nonce     string
	Bare      string            // client-first-message-bare
	Ext       map[string]string // extensions (Kafka's tokenauth)
}

// ParseScramClientFirst parses RFC 5802's client-first-message.
func ParseScramClientFirst(msg string) (ScramClientFirst, error) {
	var f ScramClientFirst
	cb, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return f, fmt.Errorf("client-first: no GS2 header")
	}
	switch {
	case cb == "n" || cb == "y":
	case strings.HasPrefix(cb, "p="):
		return f, fmt.Errorf("client-first: channel binding is not supported")
	default:
		return f, fmt.Errorf("client-first: invalid GS2 channel-binding flag %q", cb)
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return f, fmt.Errorf("client-first: truncated GS2 header")
	}
	if authz != "" {
		a, isA := strings.CutPrefix(authz, "a=")
		if !isA {
			return f, fmt.Errorf("client-first: invalid authzid")
		}
		name, err := saslName(a)
		if err != nil {
			return f, err
		}
		f.Authzid = name
	}
	f.GS2Header = cb + "," + authz + ","
	f.Bare = bare
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return f, fmt.Errorf("client-first: want n=user,r=nonce")
	}
	user, err := saslName(attrs[0][2:])
	if err != nil {
		return f, err
	}
	f.User, f.Nonce = user, attrs[1][2:]
	if f.User == "" || f.Nonce == "" || strings.ContainsAny(f.Nonce, ",") {
		return f, fmt.Errorf("client-first: empty user or nonce")
	}
	for _, a := range attrs[2:] {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return f, fmt.Errorf("client-first: invalid extension %q", a)
		}
		if k == "m" {
			return f, fmt.Errorf("client-first: mandatory extension not supported")
		}
		if f.Ext == nil {
			f.Ext = map[string]string{}
		}
		f.Ext[k] = v
	}
	return f, nil
}

// saslName decodes RFC 5802's saslname (=2C is ',', =3D is '=').
func saslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", fmt.Errorf("invalid '=' escape in SCRAM name")
		}
		i += 2
	}
	return b.String(), nil
}

// ScramClientFinal is a parsed client-final-message.
type ScramClientFinal struct {
	ChannelBinding string // base64 of the GS2 header
	Nonce          string
	Proof          []byte
	WithoutProof   string
}

// ParseScramClientFinal parses RFC 5802's client-final-message.
func ParseScramClientFinal(msg string) (ScramClientFinal, error) {
	var f ScramClientFinal
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return f, fmt.Errorf("client-final: no proof")
	}
	f.WithoutProof = msg[:i]
	proof, err := base64.StdEncoding.DecodeString(msg[i+3:])
	if err != nil {
		return f, fmt.Errorf("client-final: invalid proof encoding")
	}
	f.Proof = proof
	attrs := strings.Split(f.WithoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return f, fmt.Errorf("client-final: want c=...,r=...,p=...")
	}
	f.ChannelBinding, f.Nonce = attrs[0][2:], attrs[1][2:]
	return f, nil
}

func (s *scramSession) Step(msg []byte) ([]byte, bool, error) {
	switch s.step {
	case 0:
		s.step++
		f, err := ParseScramClientFirst(string(msg))
		if err != nil {
			return nil, false, fail("", "%s: %v", s.mech, err)
		}
		s.user = f.User
		if f.Authzid != "" && f.Authzid != f.User {
			return nil, false, fail(f.User, "%s: authorization id differs from the username", s.mech)
		}
		if f.Ext["tokenauth"] == "true" {
			return nil, false, fail(f.User, "%s: delegation tokens are not supported", s.mech)
		}
		s.gs2Header, s.clientFirstBare = f.GS2Header, f.Bare
		if s.a.Scram != nil {
			s.cred, s.known = s.a.Scram.ScramCredential(f.User, s.mech)
		}
		if !s.known { // answer as for a real user, fail at the proof
			s.cred = ScramCredential{
				Salt:       hmacOf(sha256.New, s.a.Secret, []byte(s.mech+"\x00"+f.User))[:16],
				Iterations: ScramMinIterations,
			}
		}
		var rnd [24]byte
		rand.Read(rnd[:])
		s.nonce = f.Nonce + base64.RawURLEncoding.EncodeToString(rnd[:])
		s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) +
			",i=" + strconv.Itoa(s.cred.Iterations)
		return []byte(s.serverFirst), false, nil
	case 1:
		s.step++
		f, err := ParseScramClientFinal(string(msg))
		if err != nil {
			return nil, false, fail(s.user, "%s: %v", s.mech, err)
		}
		if f.ChannelBinding != base64.StdEncoding.EncodeToString([]byte(s.gs2Header)) {
			return nil, false, fail(s.user, "%s: channel binding does not match the GS2 header", s.mech)
		}
		// Kafka checks only that the nonce ends with the server's:
		// librdkafka up to 2.x sends the client nonce twice.
		if !strings.HasSuffix(f.Nonce, s.nonce) {
			return nil, false, fail(s.user, "%s: invalid nonce in the final client message", s.mech)
		}
		authMsg := []byte(s.clientFirstBare + "," + s.serverFirst + "," + f.WithoutProof)
		if !s.known || len(f.Proof) != s.h().Size() {
			return nil, false, fail(s.user, "invalid credentials with SASL mechanism %s", s.mech)
		}
		sig := hmacOf(s.h, s.cred.StoredKey, authMsg)
		clientKey := make([]byte, len(sig))
		subtle.XORBytes(clientKey, f.Proof, sig)
		d := s.h()
		d.Write(clientKey)
		if subtle.ConstantTimeCompare(d.Sum(nil), s.cred.StoredKey) != 1 {
			return nil, false, fail(s.user, "invalid credentials with SASL mechanism %s", s.mech)
		}
		return []byte("v=" + base64.StdEncoding.EncodeToString(hmacOf(s.h, s.cred.ServerKey, authMsg))), true, nil
	}
	return nil, false, fail(s.user, "%s: unexpected message after the exchange", s.mech)
}

func (s *scramSession) Principal() Principal { return User(s.user) }
func (s *scramSession) Expires() time.Time   { return time.Time{} }
