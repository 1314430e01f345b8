package handler

import (
	"slices"

	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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

// connListener is the listener a connection came in on ("" without one).
func connListener(c *server.Conn) string {
	if c == nil {
		return ""
	}
	return c.Listener
}

// hintOn rewrites one KIP-951 leader hint (a node endpoint in a Produce,
// Fetch, ShareFetch or ShareAcknowledge answer) to the listener's
// endpoint; false: the broker has no such listener, drop the hint.
func hintOn(im *metadata.Image, listener string, id int32, host *string, port *int32) bool {
	if listener == "" {
		return true
	}
	br, ok := im.Broker(id)
	if !ok {
		return true
	}
	if br, ok = endpointOn(br, listener); !ok {
		return false
	}
	*host, *port = br.Host, br.Port
	return true
}

// The leader hints of each response kind on the client's listener.

func produceHintsOn(im *metadata.Image, listener string, resp *kmsg.ProduceResponse) {
	resp.Brokers = slices.DeleteFunc(resp.Brokers, func(b kmsg.ProduceResponseBroker) bool { return !hintOn(im, listener, b.NodeID, &b.Host, &b.Port) })
	for i := range resp.Brokers {
		hintOn(im, listener, resp.Brokers[i].NodeID, &resp.Brokers[i].Host, &resp.Brokers[i].Port)
	}
}

func fetchHintsOn(im *metadata.Image, listener string, resp *kmsg.FetchResponse) {
	if resp == nil {
		return
	}
	resp.Brokers = slices.DeleteFunc(resp.Brokers, func(b kmsg.FetchResponseBroker) bool { return !hintOn(im, listener, b.NodeID, &b.Host, &b.Port) })
	for i := range resp.Brokers {
		hintOn(im, listener, resp.Brokers[i].NodeID, &resp.Brokers[i].Host, &resp.Brokers[i].Port)
	}
}

func shareFetchHintsOn(im *metadata.Image, listener string, resp *kmsg.ShareFetchResponse) {
	resp.NodeEndpoints = slices.DeleteFunc(resp.NodeEndpoints, func(b kmsg.ShareFetchResponseNodeEndpoint) bool {
		return !hintOn(im, listener, b.NodeID, &b.Host, &b.Port)
	})
	for i := range resp.NodeEndpoints {
		hintOn(im, listener, resp.NodeEndpoints[i].NodeID, &resp.NodeEndpoints[i].Host, &resp.NodeEndpoints[i].Port)
	}
}

func shareAckHintsOn(im *metadata.Image, listener string, resp *kmsg.ShareAcknowledgeResponse) {
	resp.NodeEndpoints = slices.DeleteFunc(resp.NodeEndpoints, func(b kmsg.ShareAcknowledgeResponseNodeEndpoint) bool {
		return !hintOn(im, listener, b.NodeID, &b.Host, &b.Port)
	})
	for i := range resp.NodeEndpoints {
		hintOn(im, listener, resp.NodeEndpoints[i].NodeID, &resp.NodeEndpoints[i].Host, &resp.NodeEndpoints[i].Port)
	}
}
