package cli

import (
	"strings"

	"github.com/spf13/pflag"
)

type pflagFlag = pflag.Flag

func cutKV(s string) (string, string, bool) {
	k, v, ok := strings.Cut(s, "=")
	return strings.TrimSpace(k), strings.TrimSpace(v), ok && strings.TrimSpace(k) != ""
}
