package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"
)

// JWKS is a JSON Web Key Set (RFC 7517) read from a file:// or https://
// URL (Kafka's sasl.oauthbearer.jwks.endpoint.url): the RSA and EC public
// keys that sign the tokens OAUTHBEARER accepts. It is re-read every
// Refresh, and at once (at most every few seconds) when a token names a
// key id it does not hold, as a rotated key appears. Safe for concurrent
// use.
type JWKS struct {
	URL     string
	Refresh time.Duration

	mu      sync.Mutex
	keys    map[string]crypto.PublicKey // by kid ("" for a key without one)
	fetched time.Time
	tried   time.Time
}

// NewJWKS reads the key set once; an error means the URL cannot serve it.
func NewJWKS(rawURL string, refresh time.Duration) (*JWKS, error) {
	j := &JWKS{URL: rawURL, Refresh: refresh}
	keys, err := j.fetch()
	if err != nil {
		return nil, err
	}
	j.keys, j.fetched, j.tried = keys, time.Now(), time.Now()
	return j, nil
}

// Key returns the key with id kid ("" when the token names none and the
// set holds exactly one key).
func (j *JWKS) Key(kid string) (crypto.PublicKey, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := time.Now()
	k, ok := j.lookup(kid)
	stale := j.Refresh > 0 && now.Sub(j.fetched) > j.Refresh
	if (!ok || stale) && now.Sub(j.tried) > 5*time.Second {
		j.tried = now
		if keys, err := j.fetch(); err == nil {
			j.keys, j.fetched = keys, now
			k, ok = j.lookup(kid)
		}
	}
	if !ok {
		return nil, fmt.Errorf("no key %q in the JWKS", kid)
	}
	return k, nil
}

func (j *JWKS) lookup(kid string) (crypto.PublicKey, bool) {
	if k, ok := j.keys[kid]; ok {
		return k, true
	}
	if kid == "" && len(j.keys) == 1 {
		for _, k := range j.keys {
			return k, true
		}
	}
	return nil, false
}

func (j *JWKS) fetch() (map[string]crypto.PublicKey, error) {
	u, err := url.Parse(j.URL)
	if err != nil {
		return nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url: %w", err)
	}
	var body []byte
	switch u.Scheme {
	case "file":
		body, err = os.ReadFile(u.Path)
	case "https", "http":
		body, err = httpGet(j.URL)
	default:
		return nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url %q: want a file:// or https:// URL", j.URL)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the JWKS %s: %w", j.URL, err)
	}
	keys, err := ParseJWKS(body)
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", j.URL, err)
	}
	return keys, nil
}

func httpGet(u string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %s", resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 4<<20))
}

// jwk is one key of a set, the members RSA and EC keys use.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// ParseJWKS parses a JWK Set: its RSA and EC (P-256, P-384, P-521)
// signing keys, by kid. Keys of other types, or for encryption only, are
// skipped; a set with no usable key is an error.
func ParseJWKS(b []byte) (map[string]crypto.PublicKey, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("not a JWK set: %w", err)
	}
	out := map[string]crypto.PublicKey{}
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		var pub crypto.PublicKey
		var err error
		switch k.Kty {
		case "RSA":
			pub, err = rsaKey(k)
		case "EC":
			pub, err = ecKey(k)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", k.Kid, err)
		}
		out[k.Kid] = pub
	}
	if len(out) == 0 {
		return nil, errors.New("no RSA or EC signing key")
	}
	return out, nil
}

func b64int(s string) (*big.Int, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) == 0 {
		return nil, fmt.Errorf("bad base64url integer")
	}
	return new(big.Int).SetBytes(b), nil
}

func rsaKey(k jwk) (*rsa.PublicKey, error) {
	n, err := b64int(k.N)
	if err != nil {
		return nil, fmt.Errorf("n: %w", err)
	}
	e, err := b64int(k.E)
	if err != nil || !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31-1 {
		return nil, fmt.Errorf("e: invalid exponent")
	}
	if n.BitLen() < 2048 {
		return nil, fmt.Errorf("RSA key of %d bits: want 2048 or more", n.BitLen())
	}
	return &rsa.PublicKey{N: n, E: int(e.Int64())}, nil
}

func ecKey(k jwk) (*ecdsa.PublicKey, error) {
	var c elliptic.Curve
	switch k.Crv {
	case "P-256":
		c = elliptic.P256()
	case "P-384":
		c = elliptic.P384()
	case "P-521":
		c = elliptic.P521()
	default:
		return nil, fmt.Errorf("unsupported curve %q", k.Crv)
	}
	xb, err1 := base64.RawURLEncoding.DecodeString(k.X)
	yb, err2 := base64.RawURLEncoding.DecodeString(k.Y)
	size := (c.Params().BitSize + 7) / 8
	if err1 != nil || err2 != nil || len(xb) != size || len(yb) != size {
		return nil, fmt.Errorf("bad EC point")
	}
	// ParseUncompressedPublicKey checks the point is on the curve.
	raw := append([]byte{4}, append(xb, yb...)...)
	pub, err := ecdsa.ParseUncompressedPublicKey(c, raw)
	if err != nil {
		return nil, fmt.Errorf("EC point not on the curve: %w", err)
	}
	return pub, nil
}
