package auth

import "github.com/twmb/franz-go/pkg/kmsg"

// Action is one thing a principal asks to do, in Kafka's terms: an
// operation on a resource of a type, by name, from a host.
type Action struct {
	Principal Principal
	Host      string // the client's IP address, as ACLs name hosts
	Op        kmsg.ACLOperation
	Type      kmsg.ACLResourceType
	Name      string
}

// Authorizer decides actions. Implementations are safe for concurrent use
// and fast (the handlers ask once per topic or group of a request).
type Authorizer interface {
	Authorize(a Action) bool
}

// AllowAll authorizes everything: a node with no authorizer configured
// (authorizer.class.name empty), as Kafka without an authorizer.
type AllowAll struct{}

// Authorize implements Authorizer.
func (AllowAll) Authorize(Action) bool { return true }
