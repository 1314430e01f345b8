package handler

// BerthForgetShareGroup (key 32001, Berth's own), version 0 (flexible),
// broker to broker: a share group was deleted (DeleteGroups), and its
// coordinator, once the group's state is deleted at the share
// coordinators, tells every other live broker to drop what it holds of
// the group in memory: its share-partitions' state, timers and pending
// writes, and the group's share sessions. INVALID_REQUEST for an empty
// group id. The wire type is pkg/berthmsg (docs/compatibility.md, "Berth
// extensions").

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/pkg/berthmsg"
)

func init() {
	registerBerth(berthmsg.ForgetShareGroupKey, berthmsg.ForgetShareGroupName, 0, 0,
		func() kmsg.Request { return berthmsg.NewForgetShareGroupRequest() }, (*Broker).forgetShareGroup)
}

func (b *Broker) forgetShareGroup(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*berthmsg.ForgetShareGroupRequest)
	resp := r.ResponseKind().(*berthmsg.ForgetShareGroupResponse)
	var err error
	switch {
	case !b.authorizedCluster(req, opClusterAction):
		err = kerr.ClusterAuthorizationFailed
	case r.GroupID == "":
		err = fmt.Errorf("%w: empty group id", kerr.InvalidRequest)
	case b.Shares != nil:
		b.Shares.ForgetGroup(r.GroupID)
		b.log.Info("share group deleted elsewhere; its share-partitions forgotten", "group", r.GroupID)
	}
	resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
	return now(resp), nil
}
