package metadata

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
)

// NewClusterID returns a Kafka-style cluster id: 16 random bytes, base64url
// without padding (22 characters).
func NewClusterID() string {
	id := NewTopicID()
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// NewTopicID returns 16 random bytes, never all zero (Kafka reserves the
// zero UUID for "no id").
func NewTopicID() [16]byte {
	var id [16]byte
	for id == ([16]byte{}) {
		rand.Read(id[:]) // never fails (crypto/rand panics instead)
	}
	return id
}

// FormatUUID renders a topic id as Kafka does: base64url, no padding.
func FormatUUID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// ParseUUID parses FormatUUID's output.
func ParseUUID(s string) ([16]byte, error) {
	var id [16]byte
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		return id, fmt.Errorf("%w: bad uuid %q", ErrInvalidRecord, s)
	}
	copy(id[:], b)
	return id, nil
}

func validClusterID(s string) error {
	if s == "" || len(s) > 255 {
		return fmt.Errorf("%w: cluster id must be 1..255 characters", ErrInvalidRecord)
	}
	for _, r := range s {
		if r < 0x21 || r > 0x7e {
			return fmt.Errorf("%w: cluster id %q has a non-printable or space character", ErrInvalidRecord, s)
		}
	}
	return nil
}
