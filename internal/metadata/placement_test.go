package metadata

import "testing"

// The expected values come from Java's formula, s[0]*31^(n-1) + ... +
// s[n-1] in int32 arithmetic over UTF-16 code units, worked out by hand
// ("ab" = 97*31 + 98 = 3105) or with that arithmetic elsewhere.
func TestPartitionForKeyMatchesJava(t *testing.T) {
	for _, tc := range []struct {
		group string
		hash  int32
		p50   int32
	}{
		{"", 0, 0},
		{"a", 97, 47},
		{"ab", 3105, 5},
		{"é", 233, 33},
		{"group-1", 293427299, 49},
		{"my-group", -1906497762, 12},
		{"console-consumer-12345", 158455506, 6},
		// A supplementary character is two UTF-16 units:
		// 0xD83D*31 + 0xDE00.
		{"\U0001F600", 1772899, 49},
		// The classic Java puzzler: hashCode is Integer.MIN_VALUE, which
		// Kafka's Utils.abs maps to 0 (Math.abs would stay negative).
		{"polygenelubricants", -2147483648, 0},
	} {
		if h := javaStringHashCode(tc.group); h != tc.hash {
			t.Errorf("hashCode(%q) = %d, want %d", tc.group, h, tc.hash)
		}
		if p := PartitionForKey(tc.group, 50); p != tc.p50 {
			t.Errorf("PartitionForKey(%q, 50) = %d, want %d", tc.group, p, tc.p50)
		}
	}
	if p := PartitionForKey("my-group", 1); p != 0 {
		t.Errorf("one partition: got %d", p)
	}
	if p := PartitionForKey("my-group", 0); p != 0 {
		t.Errorf("no partitions: got %d", p)
	}
}
