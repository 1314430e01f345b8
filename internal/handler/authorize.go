package handler

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/server"
)

// authorized reports whether the request's principal may do op on the
// resource typ/name. Every key file asks it before it acts, as Kafka's
// KafkaApis does for that key (docs/compatibility.md lists the checks).
func (b *Broker) authorized(req *server.Request, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) bool {
	return b.Authorizer.Authorize(auth.Action{
		Principal: req.Conn.Principal(), Host: req.Conn.Host(),
		Op: op, Type: typ, Name: name,
	})
}
