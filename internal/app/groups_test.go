package app

import (
	"strings"
	"testing"

	"github.com/berthmq/berth/internal/config"
)

// The share group settings are checked against their bounds as Kafka
// does; the defaults pass.
func TestShareGroupBounds(t *testing.T) {
	for _, tc := range []struct {
		set  map[string]string
		want string // "" for no error
	}{
		{nil, ""},
		{map[string]string{"group.share.session.timeout.ms": "50000"}, ""},
		{map[string]string{"group.share.session.timeout.ms": "30000"}, "group.share.session.timeout.ms (30000) must be between"},
		{map[string]string{"group.share.session.timeout.ms": "70000"}, "group.share.session.timeout.ms (70000) must be between"},
		{map[string]string{"group.share.heartbeat.interval.ms": "20000"}, "group.share.heartbeat.interval.ms (20000) must be between"},
		{map[string]string{"group.share.min.session.timeout.ms": "1000", "group.share.session.timeout.ms": "5000"}, "must be less than group.share.session.timeout.ms"},
	} {
		cfg := config.Defaults()
		for k, v := range tc.set {
			if err := cfg.Set(k, v, config.SourceFile); err != nil {
				t.Fatal(err)
			}
		}
		err := shareGroupBounds(cfg)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.set, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: got %v, want %q", tc.set, err, tc.want)
		}
	}
}
