package handler

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

// listenerOf is the name of the listener a request came in on; "" for a
// request without a connection (tests), which sees every broker's
// inter-broker address.
func listenerOf(req *server.Request) string {
	if req == nil || req.Conn == nil {
		return ""
	}
	return req.Conn.Listener
}

// endpointOn is br as a client of listener sees it: its Host and Port
// replaced by its endpoint of that listener, as Kafka answers Metadata,
// FindCoordinator and DescribeCluster with the endpoints of the listener
// the request arrived on. ok is false when br has no such listener; the
// broker is then left out of the answer. listener "" keeps br as
// registered.
func endpointOn(br metadata.Broker, listener string) (metadata.Broker, bool) {
	if listener == "" {
		return br, true
	}
	e, ok := br.Endpoint(listener)
	if !ok {
		return br, false
	}
	br.Host, br.Port = e.Host, e.Port
	return br, true
}

// coordinatorOn gives a coordinator the address of listener, or
// COORDINATOR_NOT_AVAILABLE when it has none (Kafka's answer for a
// coordinator not reachable on the client's listener).
func coordinatorOn(node *metadata.Broker, listener string) error {
	br, ok := endpointOn(*node, listener)
	if !ok {
		return fmt.Errorf("%w: broker %d has no listener %s", kerr.CoordinatorNotAvailable, node.ID, listener)
	}
	*node = br
	return nil
}
