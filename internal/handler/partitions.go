package handler

// The lookups many keys share: a request's topic by name or id, the local
// leader replica of a partition, the min.insync.replicas check of acks=all
// writes, and a share-partition this node leads.

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/server"
)

// lookupTopic finds a request's topic by name, or by id when byID.
func lookupTopic(im *metadata.Image, name string, id [16]byte, byID bool) (*metadata.Topic, error) {
	if byID {
		if t := im.TopicByID(id); t != nil {
			return t, nil
		}
		return nil, kerr.UnknownTopicID
	}
	if t := im.Topic(name); t != nil {
		return t, nil
	}
	return nil, kerr.UnknownTopicOrPartition
}

// partition returns the local leader replica of a topic partition.
func (b *Broker) partition(t *metadata.Topic, idx int32) (*replica.Partition, error) {
	mp := t.Partition(idx)
	if mp == nil {
		return nil, fmt.Errorf("%w: topic %q has no partition %d", kerr.UnknownTopicOrPartition, t.Name, idx)
	}
	if mp.Leader != b.NodeID {
		return nil, kerr.NotLeaderForPartition
	}
	p := b.Replicas.Get(t.Name, idx)
	if p == nil || p.TopicID != t.ID {
		// Metadata knows it but the log is not open (yet): retriable.
		return nil, kerr.NotLeaderForPartition
	}
	return p, nil
}

// checkMinISR refuses acks=all writes while fewer replicas are in sync than
// min.insync.replicas asks for.
func (b *Broker) checkMinISR(t *metadata.Topic, p *replica.Partition) error {
	mp := t.Partition(p.Index)
	if min := p.Config().MinInsyncReplicas; len(mp.ISR) < min {
		return fmt.Errorf("%w: %d in-sync replica(s), min.insync.replicas is %d", kerr.NotEnoughReplicas, len(mp.ISR), min)
	}
	return nil
}

// sharePartition resolves a share-partition this node leads.
func (b *Broker) sharePartition(im *metadata.Image, topicID [16]byte, part int32) (*metadata.Topic, *replica.Partition, error) {
	t, err := lookupTopic(im, "", topicID, true)
	if err != nil {
		return nil, nil, err
	}
	p, err := b.partition(t, part)
	return t, p, err
}

// internalTopicRefused is Kafka's refusal of a client's Produce (what
// "append") or DeleteRecords ("delete records of") on an internal topic:
// coordinators write those, and __berth_audit is the audit trail. Brokers
// may append (the audit writer's Produce to another node's partition):
// with an authorizer, principals with CLUSTER_ACTION; without one, the
// broker-to-broker client id (Kafka's own check is by client id too).
func (b *Broker) internalTopicRefused(req *server.Request, t *metadata.Topic, what string) error {
	if t == nil || !t.Internal {
		return nil
	}
	if what == "append to" {
		if b.authzOn && b.mayQuietly(req, opClusterAction, rCluster, clusterName) ||
			!b.authzOn && strings.HasPrefix(req.ClientID, peerClientIDPrefix) {
			return nil
		}
	}
	return &codedError{kerr.InvalidTopicException, fmt.Sprintf("cannot %s internal topic %s", what, t.Name)}
}

// peerClientIDPrefix starts the client id of every broker-to-broker
// connection (app: berth-broker-<node id>).
const peerClientIDPrefix = "berth-broker-"
