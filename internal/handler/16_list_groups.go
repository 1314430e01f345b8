package handler

// ListGroups (key 16), versions 0-5, from the group coordinator
// (internal/group/admin.go): the groups of the __consumer_offsets
// partitions this node leads, with a state filter (v4+) and a type filter
// (v5+): groups are classic, consumer (KIP-848) or share (KIP-932,
// protocol type share); no type filter lists every type. While a
// partition loads the answer carries COORDINATOR_LOAD_IN_PROGRESS.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(16, 0, 5, (*Broker).listGroups) }

func (b *Broker) listGroups(_ context.Context, req *server.Request) (server.Reply, error) {
	resp := b.Groups.ListGroups(req.Body.(*kmsg.ListGroupsRequest))
	if !b.mayQuietly(req, opDescribe, rCluster, clusterName) { // else only the groups it may describe
		kept := resp.Groups[:0]
		for _, g := range resp.Groups {
			if b.mayQuietly(req, opDescribe, rGroup, g.Group) {
				kept = append(kept, g)
			}
		}
		resp.Groups = kept
	}
	return now(resp), nil
}
