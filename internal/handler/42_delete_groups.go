package handler

// DeleteGroups (key 42), versions 0-3, handed to the group coordinator
// (internal/group/admin.go): only Empty groups (NON_EMPTY_GROUP
// otherwise; GROUP_ID_NOT_FOUND for unknown ones), deleted by tombstones
// for the group and its offsets, answered on the write loop once they are
// durable. A share group's share-partition state goes first: it is
// deleted at the share coordinators (DeleteShareGroupState), every broker
// drops its copies (BerthForgetShareGroup), then the group's records get
// their tombstones; if the state cannot be deleted the group is kept and
// answered COORDINATOR_NOT_AVAILABLE. A deleted group's dynamic configs
// (GROUP resource) are dropped too (configs.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(42, 0, 3, (*Broker).deleteGroups) }

func (b *Broker) deleteGroups(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.DeleteGroupsRequest)
	allowed, denied := b.splitGroups(req, opDelete, r.Groups)
	var deniedResp []kmsg.DeleteGroupsResponseGroup
	for _, g := range denied {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group, dg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		deniedResp = append(deniedResp, dg)
	}
	if len(allowed) == 0 {
		resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
		resp.Groups = deniedResp
		return now(resp), nil
	}
	rest := *r
	rest.Groups = allowed
	reply := later(req.Conn, func(respond func(*kmsg.DeleteGroupsResponse)) { b.Groups.DeleteGroups(&rest, respond) })
	return func() kmsg.Response {
		resp := reply()
		if dr, ok := resp.(*kmsg.DeleteGroupsResponse); ok {
			b.dropGroupConfigs(dr) // configs.go; on the write loop, where waiting belongs
			dr.Groups = append(dr.Groups, deniedResp...)
		}
		return resp
	}, nil
}
