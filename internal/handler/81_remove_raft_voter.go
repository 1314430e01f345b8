package handler

// RemoveRaftVoter, version 0 (KIP-853): removes a voter from the metadata
// quorum (metadata.Controller.RemoveMember), on the active controller only
// (NOT_CONTROLLER elsewhere, as AddRaftVoter). Berth also removes an
// observer this way (Kafka has no observer membership to remove); the
// removed node leaves `controllers` and stops receiving the metadata log.
//
// A member must be removed by another one (it might never learn that its
// removal committed). So when the active controller itself is to be
// removed, it first hands its role to the most up-to-date voter and
// answers NOT_CONTROLLER; the client asks again, now at the new active
// controller, which removes it. (Kafka lets the leader remove itself and
// resign after the change commits; the outcome is the same.)
//
// Codes: VOTER_NOT_FOUND (not a member, or the last voter: Kafka uses the
// same code for both), REQUEST_TIMED_OUT (another quorum change has not
// applied yet, or the removal did not apply within 30 s), INVALID_REQUEST
// (a negative id; the controller cannot hand its role over because no
// other voter is up), INCONSISTENT_CLUSTER_ID. VoterDirectoryId is
// ignored: Berth has no directory ids.

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(81, 0, 0, (*Broker).removeRaftVoter) }

// removeVoterTimeout bounds a removal (the request has no timeout field),
// the leadership hand-over included.
const removeVoterTimeout = 30 * time.Second

func (b *Broker) removeRaftVoter(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.RemoveRaftVoterRequest)
	resp := r.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
	var err error = kerr.ClusterAuthorizationFailed
	if b.authorizedCluster(req, opAlter) {
		err = b.removeVoter(ctx, r)
	}
	resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
	b.logQuorumChange(req, "remove voter", r.VoterID, err)
	return now(resp), nil
}

func (b *Broker) removeVoter(ctx context.Context, r *kmsg.RemoveRaftVoterRequest) error {
	q, err := b.checkQuorumRequest(r.ClusterID, r.VoterID)
	if err != nil {
		return err
	}
	id := r.VoterID
	m, member := q.Member(id)
	voters := memberIDs(q, true)
	switch {
	case !member:
		return quorumErr(kerr.VoterNotFound, "node %d is not a member of the metadata quorum (voters %v, observers %v)",
			id, voters, memberIDs(q, false))
	case m.Voter && len(voters) == 1:
		return quorumErr(kerr.VoterNotFound, "node %d is the last voter; the quorum cannot be left without one", id)
	}
	ctx, cancel := context.WithTimeout(ctx, removeVoterTimeout)
	defer cancel()
	if id == b.NodeID {
		return b.resignToBeRemoved(ctx)
	}
	return b.quorumChanged(b.Controller.RemoveMember(ctx, metadata.RaftID(id)), removeVoterTimeout)
}

// resignToBeRemoved hands the active controller role to another voter, so
// that one can remove this node, and answers NOT_CONTROLLER.
func (b *Broker) resignToBeRemoved(ctx context.Context) error {
	err := b.Controller.TransferLeadership(ctx, 0)
	switch {
	case errors.Is(err, metadata.ErrInvalidQuorumChange):
		return quorumErr(kerr.InvalidRequest, "node %d is the active controller and no other voter is up to take over, "+
			"so removing it would leave the quorum without a leader; start another voter first", b.NodeID)
	case err != nil:
		return quorumChangeErr(err, removeVoterTimeout)
	}
	leader := b.Controller.Quorum().Leader
	if l := b.Controller.Leader(); l != 0 {
		leader = metadata.NodeID(l)
	}
	b.log.Info("metadata quorum: handed the active controller role over so that this node can be removed", "to", leader)
	return quorumErr(kerr.NotController, "node %d was the active controller and has handed the role to node %d so that "+
		"another node can remove it; send the request again (to the new active controller)", b.NodeID, leader)
}
