package app

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/schemareg"
)

// Every route of the registry's API has an action: an endpoint added to
// schemareg without one would be refused to everyone but super users.
func TestRegistryActionsCoverEveryRoute(t *testing.T) {
	for _, p := range schemareg.Patterns() {
		a, ok := actionOf(schemareg.Route{Pattern: p, Subject: "s", ID: "1"})
		if !ok {
			t.Errorf("%s: no action", p)
			continue
		}
		method := strings.Fields(p)[0]
		// A change names its audit method and needs more than READ.
		if method != "GET" && !strings.HasPrefix(p, "POST /subjects/{subject}") && !strings.HasPrefix(p, "POST /compatibility") {
			if a.change == "" || !a.check || a.op == kmsg.ACLOperationRead || a.op == kmsg.ACLOperationDescribe {
				t.Errorf("%s: a change mapped to %+v", p, a)
			}
		}
		if strings.Contains(p, "{subject}") && (!a.check || a.name != "s") {
			t.Errorf("%s: not checked on its subject: %+v", p, a)
		}
	}
	if a, _ := actionOf(schemareg.Route{Pattern: "POST /subjects/{subject}/versions", Subject: "s"}); a.op != kmsg.ACLOperationWrite {
		t.Errorf("register: %v, want WRITE", a.op)
	}
	if _, ok := actionOf(schemareg.Route{Pattern: "GET /nothing"}); ok {
		t.Error("an unknown route has an action")
	}
}
