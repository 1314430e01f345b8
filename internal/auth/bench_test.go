package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"strings"
	"testing"
)

// BenchmarkScramHandshake measures the server side of a whole
// SCRAM-SHA-512 exchange (client-first to server-final) with a 4096
// iteration credential; the client's proof comes from its cached salted
// password, as a client that reconnects has it, so only the server's work
// is timed. The server never runs PBKDF2 for SCRAM: it checks the proof
// with HMACs against the stored keys.
func BenchmarkScramHandshake(b *testing.B) {
	for _, mech := range []string{MechScramSHA256, MechScramSHA512} {
		b.Run(mech, func(b *testing.B) {
			cred := newCred(b, mech, "pw", ScramMinIterations)
			salted, _ := SaltedPassword(mech, []byte("pw"), cred.Salt, cred.Iterations)
			h := ScramHash(mech)
			clientKey := hmacOf(h, salted, []byte("Client Key"))
			a := &Authenticator{Enabled: Mechanisms, Secret: []byte("k"), Scram: memStore{"alice/" + mech: cred}}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				var nb [18]byte
				rand.Read(nb[:])
				bare := "n=alice,r=" + base64.RawStdEncoding.EncodeToString(nb[:])
				s, _ := a.Start(mech)
				sf, _, err := s.Step([]byte("n,," + bare))
				if err != nil {
					b.Fatal(err)
				}
				nonce := strings.TrimPrefix(strings.Split(string(sf), ",")[0], "r=")
				noProof := "c=biws,r=" + nonce
				sig := hmacOf(h, cred.StoredKey, []byte(bare+","+string(sf)+","+noProof))
				proof := make([]byte, len(sig))
				subtle.XORBytes(proof, clientKey, sig)
				if _, done, err := s.Step([]byte(noProof + ",p=" + base64.StdEncoding.EncodeToString(proof))); !done || err != nil {
					b.Fatal(done, err)
				}
			}
		})
	}
}

// BenchmarkPlainOverScram is PLAIN checked against a SCRAM-SHA-512
// credential: the server recomputes the salted password (4096 PBKDF2
// iterations) on every login.
func BenchmarkPlainOverScram(b *testing.B) {
	a := &Authenticator{Enabled: Mechanisms, Scram: memStore{"alice/" + MechScramSHA512: newCred(b, MechScramSHA512, "pw", ScramMinIterations)}}
	for b.Loop() {
		s, _ := a.Start(MechPlain)
		if _, done, err := s.Step([]byte("\x00alice\x00pw")); !done || err != nil {
			b.Fatal(done, err)
		}
	}
}
