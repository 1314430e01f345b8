package server

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
)

// ParseKeyPair reads a PEM certificate chain (leaf first) and a PEM
// private key: PKCS#8, PKCS#1 RSA or SEC 1 EC, or an encrypted PKCS#8 key
// (PBES2 with PBKDF2 and AES-CBC, as openssl pkcs8 -topk8 -v2 aes-256-cbc
// and Kafka's PEM keystores write it) decrypted with password. chain and
// key may be the same bytes (a keystore file holding both).
func ParseKeyPair(chain, key []byte, password string) (*tls.Certificate, error) {
	var certs [][]byte
	for rest := chain; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			certs = append(certs, b.Bytes)
		}
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block (the keystore holds the certificate chain, leaf first, and the private key)")
	}
	var keyBlock *pem.Block
	for rest := key; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		switch b.Type {
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY":
			keyBlock = b
		}
		if keyBlock != nil {
			break
		}
	}
	if keyBlock == nil {
		return nil, errors.New("no PEM private key block (PRIVATE KEY, ENCRYPTED PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)")
	}
	der := keyBlock.Bytes
	switch {
	case keyBlock.Type == "ENCRYPTED PRIVATE KEY":
		if password == "" {
			return nil, errors.New("the private key is encrypted: set ssl.key.password")
		}
		var err error
		if der, err = decryptPKCS8(der, password); err != nil {
			return nil, err
		}
	case x509.IsEncryptedPEMBlock(keyBlock): //nolint:staticcheck // detected to refuse it
		return nil, errors.New("legacy OpenSSL-encrypted keys (Proc-Type: 4,ENCRYPTED) are not supported: convert with openssl pkcs8 -topk8 -v2 aes-256-cbc")
	case password != "":
		return nil, errors.New("ssl.key.password is set but the private key is not encrypted")
	}
	pk, err := parsePrivateKey(der)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(certs[0])
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	pemCert := tls.Certificate{Certificate: certs, PrivateKey: pk, Leaf: leaf}
	// Check that the key belongs to the certificate.
	raw := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certs[0]})
	k8, err := x509.MarshalPKCS8PrivateKey(pk)
	if err != nil {
		return nil, err
	}
	if _, err := tls.X509KeyPair(raw, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k8})); err != nil {
		return nil, fmt.Errorf("the private key does not match the certificate: %w", err)
	}
	return &pemCert, nil
}

func parsePrivateKey(der []byte) (any, error) {
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	return nil, errors.New("the private key is not PKCS#8, PKCS#1 or SEC 1 (wrong ssl.key.password?)")
}

var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA384 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
)

type encryptedPKCS8 struct {
	Algo pkix.AlgorithmIdentifier
	Data []byte
}

type pbes2Params struct {
	KDF    pkix.AlgorithmIdentifier
	Scheme pkix.AlgorithmIdentifier
}

type pbkdf2Params struct {
	Salt      []byte
	Iter      int
	KeyLength int                      `asn1:"optional"`
	PRF       pkix.AlgorithmIdentifier `asn1:"optional"`
}

// decryptPKCS8 decrypts an EncryptedPrivateKeyInfo (RFC 5208, 8018):
// PBES2, PBKDF2 with HMAC-SHA1/256/384/512, AES-128/192/256-CBC.
func decryptPKCS8(der []byte, password string) ([]byte, error) {
	var e encryptedPKCS8
	if _, err := asn1.Unmarshal(der, &e); err != nil {
		return nil, fmt.Errorf("encrypted private key: %w", err)
	}
	if !e.Algo.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("encrypted private key: scheme %v is not supported (use PBES2: openssl pkcs8 -topk8 -v2 aes-256-cbc)", e.Algo.Algorithm)
	}
	var p pbes2Params
	if _, err := asn1.Unmarshal(e.Algo.Parameters.FullBytes, &p); err != nil {
		return nil, fmt.Errorf("encrypted private key: PBES2 parameters: %w", err)
	}
	if !p.KDF.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("encrypted private key: key derivation %v is not supported (PBKDF2 is)", p.KDF.Algorithm)
	}
	var kp pbkdf2Params
	if _, err := asn1.Unmarshal(p.KDF.Parameters.FullBytes, &kp); err != nil {
		return nil, fmt.Errorf("encrypted private key: PBKDF2 parameters: %w", err)
	}
	var h func() hash.Hash
	switch prf := kp.PRF.Algorithm; {
	case len(prf) == 0 || prf.Equal(oidHMACSHA1):
		h = sha1.New
	case prf.Equal(oidHMACSHA256):
		h = sha256.New
	case prf.Equal(oidHMACSHA384):
		h = sha512.New384
	case prf.Equal(oidHMACSHA512):
		h = sha512.New
	default:
		return nil, fmt.Errorf("encrypted private key: PBKDF2 PRF %v is not supported", prf)
	}
	var keyLen int
	switch s := p.Scheme.Algorithm; {
	case s.Equal(oidAES128CBC):
		keyLen = 16
	case s.Equal(oidAES192CBC):
		keyLen = 24
	case s.Equal(oidAES256CBC):
		keyLen = 32
	default:
		return nil, fmt.Errorf("encrypted private key: cipher %v is not supported (AES-CBC is: openssl pkcs8 -topk8 -v2 aes-256-cbc)", s)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(p.Scheme.Parameters.FullBytes, &iv); err != nil || len(iv) != aes.BlockSize {
		return nil, errors.New("encrypted private key: bad AES IV")
	}
	if kp.Iter < 1 || kp.Iter > 10_000_000 {
		return nil, fmt.Errorf("encrypted private key: PBKDF2 iteration count %d out of range", kp.Iter)
	}
	k, err := pbkdf2.Key(h, password, kp.Salt, kp.Iter, keyLen)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	if len(e.Data) == 0 || len(e.Data)%aes.BlockSize != 0 {
		return nil, errors.New("encrypted private key: data is not a whole number of blocks")
	}
	out := make([]byte, len(e.Data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, e.Data)
	pad := int(out[len(out)-1])
	if pad < 1 || pad > aes.BlockSize || pad > len(out) {
		return nil, errors.New("encrypted private key: wrong ssl.key.password (bad padding)")
	}
	for _, b := range out[len(out)-pad:] {
		if int(b) != pad {
			return nil, errors.New("encrypted private key: wrong ssl.key.password (bad padding)")
		}
	}
	return out[:len(out)-pad], nil
}
