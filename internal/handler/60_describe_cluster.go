package handler

// DescribeCluster, versions 0-2. Endpoint type 1 (brokers) is served;
// type 2 (controllers) gets UNSUPPORTED_ENDPOINT_TYPE. Fenced brokers are
// listed when asked (v2+).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(60, 0, 2, (*Broker).describeCluster) }

func (b *Broker) describeCluster(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.DescribeClusterRequest)
	resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = r.EndpointType
	if r.Version >= 1 && r.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		return now(resp), nil
	}
	im := b.image()
	resp.ClusterID = im.ClusterID
	resp.ControllerID = b.controllerID()
	resp.ClusterAuthorizedOperations = b.opsIf(r.IncludeClusterAuthorizedOperations, req, rCluster, clusterName)
	for _, id := range im.BrokerIDs() {
		br, ok := endpointOn(im.Brokers[id], listenerOf(req))
		if !ok || br.Fenced && !r.IncludeFencedBrokers {
			continue
		}
		db := kmsg.NewDescribeClusterResponseBroker()
		db.NodeID, db.Host, db.Port, db.IsFenced = br.ID, br.Host, br.Port, br.Fenced
		if br.Rack != "" {
			rack := br.Rack
			db.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, db)
	}
	return now(resp), nil
}
