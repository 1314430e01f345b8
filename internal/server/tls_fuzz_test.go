package server

import "testing"

// Key store bytes from anywhere: ParseKeyPair (PEM, PKCS#8, encrypted
// PKCS#8's ASN.1) never panics.
func FuzzParseKeyPair(f *testing.F) {
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n"), "pw")
	f.Add([]byte{}, "")
	f.Fuzz(func(t *testing.T, b []byte, password string) {
		_, _ = ParseKeyPair(b, b, password)
		_, _ = decryptPKCS8(b, password)
	})
}
