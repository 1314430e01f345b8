package cli

import "strings"

// cutKV splits a key=value flag value (--config, --override), trimmed;
// ok is false without "=" or with an empty key.
func cutKV(s string) (string, string, bool) {
	k, v, ok := strings.Cut(s, "=")
	return strings.TrimSpace(k), strings.TrimSpace(v), ok && strings.TrimSpace(k) != ""
}
