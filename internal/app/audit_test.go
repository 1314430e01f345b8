package app

import (
	"testing"

	"github.com/berthmq/berth/internal/config"
)

// audit.log.enable=auto turns the trail on for a shared cluster only.
func TestAuditEnabledAuto(t *testing.T) {
	for _, c := range []struct {
		set  map[string]string
		want bool
	}{
		{nil, false}, // berth serve with no flags: off
		{map[string]string{"audit.log.enable": "true"}, true},
		{map[string]string{"listeners": "SASL_PLAINTEXT://127.0.0.1:9092"}, true},
		{map[string]string{"listeners": "SASL_PLAINTEXT://127.0.0.1:9092", "audit.log.enable": "false"}, false},
		{map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092"}, false},
	} {
		cfg := config.Defaults()
		for k, v := range c.set {
			if err := cfg.Set(k, v, config.SourceFlag); err != nil {
				t.Fatal(err)
			}
		}
		if got := auditEnabled(cfg); got != c.want {
			t.Errorf("%v: audit on %v, want %v", c.set, got, c.want)
		}
	}
}
