package group

import (
	"crypto/rand"
	"encoding/hex"
	"math"
	"unicode/utf16"
)

// PartitionFor is Kafka's placement of a group on __consumer_offsets:
// Utils.abs(groupId.hashCode()) % n, with Java's String.hashCode over the
// UTF-16 code units and Kafka's Utils.abs (which maps MinInt32 to 0, not
// to itself as Math.abs does).
func PartitionFor(groupID string, n int32) int32 {
	if n <= 0 {
		return 0
	}
	return kafkaAbs(javaStringHashCode(groupID)) % n
}

// javaStringHashCode is java.lang.String.hashCode: s[0]*31^(n-1) + ... +
// s[n-1] in int32 arithmetic over UTF-16 code units. Invalid UTF-8 counts
// as U+FFFD per bad byte (Java's decoder may fold a bad sequence into one).
func javaStringHashCode(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			h = 31*h + int32(r1)
			h = 31*h + int32(r2)
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// kafkaAbs is org.apache.kafka.common.utils.Utils.abs.
func kafkaAbs(n int32) int32 {
	if n == math.MinInt32 {
		return 0
	}
	if n < 0 {
		return -n
	}
	return n
}

// newUUID returns a random (version 4) UUID in its text form.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}
