package handler

// AddRaftVoter, versions 0-1 (KIP-853; v1's AckWhenCommitted, KIP-1186, is
// accepted and Berth always answers once the change has committed and
// applied on the active controller). Served by the active controller only;
// any other node answers NOT_CONTROLLER, as ElectLeaders does, so clients
// ask the controller (in Kafka a broker forwards the request there).
//
// An observer is promoted (metadata.Controller.PromoteLearner) once it has
// caught up with the log; its recorded controller address is kept and the
// request's listeners are ignored. A node that is not a member becomes a
// voter at once (AddVoter) at the address of the request's CONTROLLER
// listener (or its only listener); letting the node join as an observer
// first and promoting it is safer, since a voter that is not running
// counts towards the majority from the moment it is added: the request is
// refused (INVALID_REQUEST) when the voters heard from, without the new
// one, would not be a majority of the new voter set.
//
// Codes, as Kafka's Raft client uses them: DUPLICATE_VOTER (already a
// voter), REQUEST_TIMED_OUT (another quorum change has not applied yet, the
// observer has not caught up, or the change did not apply within
// TimeoutMillis: retry), INVALID_REQUEST (a negative id, a non-member
// without a usable listener, a change the quorum refuses),
// INCONSISTENT_CLUSTER_ID (the request names another cluster).
// VoterDirectoryId is ignored: Berth has no directory ids.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(80, 0, 1, (*Broker).addRaftVoter) }

// defaultAddVoterTimeout is AddRaftVoter's TimeoutMillis default.
const defaultAddVoterTimeout = 15 * time.Second

func (b *Broker) addRaftVoter(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.AddRaftVoterRequest)
	resp := r.ResponseKind().(*kmsg.AddRaftVoterResponse)
	timeout := time.Duration(r.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = defaultAddVoterTimeout
	}
	var err error = kerr.ClusterAuthorizationFailed
	if b.authorizedCluster(req, opAlter) {
		err = b.addVoter(ctx, r, timeout)
	}
	resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
	b.logQuorumChange(req, "add voter", r.VoterID, err)
	return now(resp), nil
}

func (b *Broker) addVoter(ctx context.Context, r *kmsg.AddRaftVoterRequest, timeout time.Duration) error {
	q, err := b.checkQuorumRequest(r.ClusterID, r.VoterID)
	if err != nil {
		return err
	}
	id := r.VoterID
	m, member := q.Member(id)
	if member && m.Voter {
		return quorumErr(kerr.DuplicateVoter, "node %d is already a voter (voters %v)", id, memberIDs(q, true))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if member {
		if !b.Controller.CaughtUp(id) {
			return notCaughtUp(m, q)
		}
		err := b.Controller.PromoteLearner(ctx, metadata.RaftID(id))
		if errors.Is(err, metadata.ErrInvalidQuorumChange) && !b.Controller.CaughtUp(id) {
			return notCaughtUp(m, b.Controller.Quorum())
		}
		return b.quorumChanged(err, timeout)
	}
	addr, err := voterAddress(r.Listeners)
	if err != nil {
		return quorumErr(kerr.InvalidRequest, "node %d is not a member of the metadata quorum and %v; "+
			"start it with the cluster's controller.quorum.voters (which must not name it) so that it joins as an observer, "+
			"then promote it, or give its controller listener as host:port", id, err)
	}
	if live, need := liveVoters(q), (len(memberIDs(q, true))+1)/2+1; live < need {
		return quorumErr(kerr.InvalidRequest, "adding node %d as a voter before it has joined would leave the quorum "+
			"without a majority (%d of %d voters would be up, %d needed) until it catches up; start it with the cluster's "+
			"controller.quorum.voters (which must not name it) so that it joins as an observer, then promote it",
			id, live, len(memberIDs(q, true))+1, need)
	}
	return b.quorumChanged(b.Controller.AddVoter(ctx, metadata.RaftID(id), addr), timeout)
}

// liveVoters counts the voters the active controller heard from within
// the last election timeout, itself included.
func liveVoters(q metadata.QuorumStatus) int {
	n := 0
	for _, m := range q.Members {
		if m.Voter && m.RecentActive {
			n++
		}
	}
	return n
}

// notCaughtUp is the answer for an observer that is not ready to vote.
func notCaughtUp(m metadata.QuorumMember, q metadata.QuorumStatus) error {
	heard := "never heard from since the controller took over"
	if !m.LastHeard.IsZero() {
		heard = fmt.Sprintf("last heard %s ago", time.Since(m.LastHeard).Round(time.Millisecond))
	}
	return quorumErr(kerr.RequestTimedOut, "observer %d has not caught up with the metadata log (at index %d, committed %d, %s); "+
		"wait until `berth cluster quorum` shows it without lag and retry", m.NodeID, m.Match, q.Committed, heard)
}

// voterAddress picks the controller address from AddRaftVoter's
// listeners: the CONTROLLER listener, or the only one.
func voterAddress(ls []kmsg.AddRaftVoterRequestListener) (string, error) {
	var pick *kmsg.AddRaftVoterRequestListener
	for i := range ls {
		if ls[i].Name == controllerListener {
			pick = &ls[i]
		}
	}
	if pick == nil && len(ls) == 1 {
		pick = &ls[0]
	}
	switch {
	case len(ls) == 0:
		return "", errors.New("the request gives no listener")
	case pick == nil:
		return "", fmt.Errorf("none of the %d listeners is named %s", len(ls), controllerListener)
	case pick.Host == "" || pick.Port == 0:
		return "", fmt.Errorf("listener %s has no host or port (%q, %d)", pick.Name, pick.Host, pick.Port)
	}
	return net.JoinHostPort(pick.Host, strconv.Itoa(int(pick.Port))), nil
}
