package handler

// ElectLeaders, versions 0-2 (KIP-183; the election type, KIP-460, from
// v1: 0 preferred, 1 unclean; v0 is always preferred). The active
// controller runs the elections through Config.Elector (the
// cluster.Supervisor); a node without one, or one that is not the active
// controller, answers NOT_CONTROLLER for the whole request so clients ask
// the controller, as Kafka does. A whole-request error is set at the top
// level (v1+) and on every partition named (the only place v0 has), as in
// Kafka's error response; kgo retries a NOT_CONTROLLER it finds there.
//
// A null topic list elects every partition, and the answer leaves out the
// partitions that needed no election (ELECTION_NOT_NEEDED), keeping one
// entry per topic, as Kafka does. A partition named twice is elected and
// answered once, under the topic's first entry. The request's timeout
// (60 s when 0 or less) bounds the wait: when it passes the whole request
// is answered REQUEST_TIMED_OUT, and elections already committed stay.
//
// Per-partition codes: ELECTION_NOT_NEEDED (already led by the preferred
// replica, or, for unclean, by a live leader), PREFERRED_LEADER_NOT_AVAILABLE,
// ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION, and
// INVALID_UPDATE_VERSION when the partition kept changing under the
// election. Not honoured: CLUSTER_AUTHORIZATION_FAILED (no ACLs yet).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/cluster"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(43, 0, 2, (*Broker).electLeaders) }

// Elector runs leader elections for ElectLeaders; *cluster.Supervisor
// implements it. parts nil means every partition; non-nil (even empty)
// means exactly those. It returns one result per partition, and fails as a
// whole with metadata.ErrNotLeader on a node that is not the active
// controller, or with ctx's error.
type Elector interface {
	ElectLeaders(ctx context.Context, typ cluster.ElectionType, parts []cluster.TopicPartition) ([]cluster.ElectionResult, error)
}

var _ Elector = (*cluster.Supervisor)(nil)

// defaultElectTimeout is the request's timeout when it gives none
// (Kafka's default for the field).
const defaultElectTimeout = 60 * time.Second

func (b *Broker) electLeaders(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.ElectLeadersRequest)
	targets := electTargets(r.Topics)
	typ := cluster.ElectionType(r.ElectionType) // v0: 0, preferred
	if !b.authorizedCluster(req, opAlter) {
		return now(electFailed(r, targets, kerr.ClusterAuthorizationFailed)), nil
	}
	if typ != cluster.Preferred && typ != cluster.Unclean {
		err := fmt.Errorf("%w: unknown election type %d (0 preferred, 1 unclean)", kerr.InvalidRequest, r.ElectionType)
		return now(electFailed(r, targets, err)), nil
	}
	if b.Elector == nil {
		err := fmt.Errorf("%w: leader elections run on the active controller", metadata.ErrNotLeader)
		return now(electFailed(r, targets, err)), nil
	}
	var parts []cluster.TopicPartition
	if targets != nil {
		parts = make([]cluster.TopicPartition, 0, len(targets.seen))
		for _, t := range targets.topics {
			for _, p := range targets.parts[t] {
				parts = append(parts, cluster.TopicPartition{Topic: t, Partition: p})
			}
		}
	}
	timeout := time.Duration(r.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = defaultElectTimeout
	}
	results, err := b.elect(ctx, typ, parts, timeout)
	if err != nil {
		if code(err) == kerr.UnknownServerError.Code {
			b.log.Warn("leader election failed", "client", req.ClientID, "err", err)
		}
		return now(electFailed(r, targets, err)), nil
	}
	resp := electAnswer(r, targets, results)
	b.logElections(req, typ, results)
	return now(resp), nil
}

// elect runs the Elector with the request's timeout. The Elector may wait
// for the Supervisor's round before it looks at ctx, so the answer does not
// wait for it past the deadline: the election then finishes, or fails on
// the expired ctx, on its own.
func (b *Broker) elect(ctx context.Context, typ cluster.ElectionType, parts []cluster.TopicPartition, timeout time.Duration) ([]cluster.ElectionResult, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	type outcome struct {
		res []cluster.ElectionResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		defer cancel()
		res, err := b.Elector.ElectLeaders(ctx, typ, parts)
		done <- outcome{res, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-ctx.Done():
		select {
		case o := <-done: // finished at the deadline: take its answer
			return o.res, o.err
		default:
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w: elections not finished within %v; those already made stay", kerr.RequestTimedOut, timeout)
		}
		return nil, ctx.Err()
	}
}

// electTargetSet is the partitions a request names, deduplicated, in the
// order first named.
type electTargetSet struct {
	topics []string
	parts  map[string][]int32
	seen   map[cluster.TopicPartition]bool
}

// electTargets returns the partitions named, or nil for a null topic list
// (every partition).
func electTargets(topics []kmsg.ElectLeadersRequestTopic) *electTargetSet {
	if topics == nil {
		return nil
	}
	s := &electTargetSet{parts: map[string][]int32{}, seen: map[cluster.TopicPartition]bool{}}
	for _, rt := range topics {
		if _, ok := s.parts[rt.Topic]; !ok {
			s.topics = append(s.topics, rt.Topic)
			s.parts[rt.Topic] = []int32{}
		}
		for _, p := range rt.Partitions {
			tp := cluster.TopicPartition{Topic: rt.Topic, Partition: p}
			if !s.seen[tp] {
				s.seen[tp] = true
				s.parts[rt.Topic] = append(s.parts[rt.Topic], p)
			}
		}
	}
	return s
}

// electFailed answers the whole request with err: at the top level (v1+)
// and on every partition named.
func electFailed(r *kmsg.ElectLeadersRequest, targets *electTargetSet, err error) *kmsg.ElectLeadersResponse {
	resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.ErrorCode = code(err)
	if targets == nil {
		return resp
	}
	for _, t := range targets.topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t
		for _, p := range targets.parts[t] {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, resp.ErrorCode, errMsg(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// electAnswer builds the response from the Elector's results: in the
// order named, or for a null topic list in the Elector's order without the
// partitions that needed no election.
func electAnswer(r *kmsg.ElectLeadersRequest, targets *electTargetSet, results []cluster.ElectionResult) *kmsg.ElectLeadersResponse {
	resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
	row := func(tp cluster.TopicPartition, err error) kmsg.ElectLeadersResponseTopicPartition {
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition, rp.ErrorCode, rp.ErrorMessage = tp.Partition, code(err), errMsg(err)
		return rp
	}
	if targets == nil {
		index := map[string]int{}
		for _, res := range results {
			i, ok := index[res.Topic]
			if !ok {
				i = len(resp.Topics)
				index[res.Topic] = i
				rt := kmsg.NewElectLeadersResponseTopic()
				rt.Topic = res.Topic
				resp.Topics = append(resp.Topics, rt)
			}
			if !errors.Is(res.Err, cluster.ErrElectionNotNeeded) {
				resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, row(res.TopicPartition, res.Err))
			}
		}
		return resp
	}
	byPart := make(map[cluster.TopicPartition]error, len(results))
	for _, res := range results {
		byPart[res.TopicPartition] = res.Err
	}
	for _, t := range targets.topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t
		for _, p := range targets.parts[t] {
			tp := cluster.TopicPartition{Topic: t, Partition: p}
			err, ok := byPart[tp]
			if !ok {
				err = fmt.Errorf("%w: the controller returned no result for %s-%d", kerr.UnknownServerError, t, p)
			}
			rt.Partitions = append(rt.Partitions, row(tp, err))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// logElections logs a request that changed leaders (the Supervisor logs
// each unclean election itself).
func (b *Broker) logElections(req *server.Request, typ cluster.ElectionType, results []cluster.ElectionResult) {
	elected, failed := 0, 0
	for _, res := range results {
		switch {
		case res.Err == nil:
			elected++
		case !errors.Is(res.Err, cluster.ErrElectionNotNeeded):
			failed++
		}
	}
	if elected == 0 && failed == 0 {
		return
	}
	kind := "preferred"
	if typ == cluster.Unclean {
		kind = "unclean"
	}
	b.log.Info("leader elections requested", "type", kind, "client", req.ClientID, "elected", elected, "not_elected", failed)
}
