package handler

// What the metadata quorum keys share (DescribeQuorum 55, AddRaftVoter 80,
// RemoveRaftVoter 81): Kafka's names of the metadata log and controller
// listener, the checks and answers of a quorum change on the active
// controller, and codedError, a Kafka code with Berth's own message.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

// Kafka's name for the metadata log's topic, and its controller listener
// name, used in DescribeQuorum and the Raft voter APIs.
const (
	metadataTopic      = "__cluster_metadata"
	controllerListener = "CONTROLLER"
)

// checkQuorumRequest validates what AddRaftVoter and RemoveRaftVoter have
// in common: a node id, the cluster id when given, and that this node is
// the active controller. It returns the quorum as of the last Raft tick.
func (b *Broker) checkQuorumRequest(clusterID *string, id int32) (metadata.QuorumStatus, error) {
	if clusterID != nil && *clusterID != "" {
		if have := b.image().ClusterID; have != "" && *clusterID != have {
			return metadata.QuorumStatus{}, quorumErr(kerr.InconsistentClusterID, "the request is for cluster %q; this is cluster %q", *clusterID, have)
		}
	}
	if id < 0 {
		return metadata.QuorumStatus{}, quorumErr(kerr.InvalidRequest, "voter id %d: node ids are 0 or more", id)
	}
	q := b.Controller.Quorum()
	if !q.IsLeader {
		return q, quorumErr(kerr.NotController, "%s; quorum changes are made there", notLeader(b.NodeID, q.Leader))
	}
	return q, nil
}

// notLeader says that node self is not the active controller and which
// node is. Quorum is refreshed every Raft tick, so a node that has just
// been elected may still see itself as a follower for one tick.
func notLeader(self, leader int32) string {
	switch {
	case leader == self:
		return fmt.Sprintf("node %d has just become the active controller; retry shortly", self)
	case leader >= 0:
		return fmt.Sprintf("node %d is not the active controller (node %d is)", self, leader)
	}
	return fmt.Sprintf("node %d is not the active controller (none is known yet; retry shortly)", self)
}

// quorumChangeErr is the answer for an error from a Controller quorum
// change (nil stays nil).
func quorumChangeErr(err error, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return quorumErr(kerr.RequestTimedOut, "the quorum change did not apply within %v; it may still apply: "+
			"see `berth cluster quorum` before retrying", timeout)
	}
	return err
}

// quorumChanged returns the answer for a quorum change that returned err.
// The controller publishes its Quorum status before AddVoter, PromoteLearner
// and RemoveMember return, so a DescribeQuorum right after sees the change.
func (b *Broker) quorumChanged(err error, timeout time.Duration) error {
	if err != nil {
		return quorumChangeErr(err, timeout)
	}
	return nil
}

// memberIDs lists the voters (voter) or observers of q.
func memberIDs(q metadata.QuorumStatus, voter bool) []int32 {
	ids := []int32{}
	for _, m := range q.Members {
		if m.Voter == voter {
			ids = append(ids, m.NodeID)
		}
	}
	return ids
}

// logQuorumChange logs a voter change request's outcome.
func (b *Broker) logQuorumChange(req *server.Request, what string, id int32, err error) {
	switch c := code(err); {
	case err == nil:
		b.log.Info("metadata quorum: "+what, "node", id, "client", req.ClientID)
	case c == kerr.UnknownServerError.Code:
		b.log.Warn("metadata quorum: "+what+" failed", "node", id, "client", req.ClientID, "err", err)
	case c != kerr.NotController.Code:
		b.log.Info("metadata quorum: "+what+" refused", "node", id, "client", req.ClientID, "err", err)
	}
}

// codedError is a Kafka error code with a message of Berth's own: code()
// finds the code, errMsg sends only the message.
type codedError struct {
	ke  *kerr.Error
	msg string
}

func (e *codedError) Error() string { return e.msg }

func (e *codedError) Unwrap() error { return e.ke }

func quorumErr(ke *kerr.Error, format string, args ...any) error {
	return &codedError{ke: ke, msg: fmt.Sprintf(format, args...)}
}
