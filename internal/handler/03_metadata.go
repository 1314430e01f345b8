package handler

// Metadata, versions 0-13. Topic ids (v10+) are served and accepted;
// auto-creation (v4+ AllowAutoTopicCreation, and always for v0-3) follows
// auto.create.topics.enable. Not honoured: authorized operations are sent
// as "not computed" (-2147483648) until ACLs exist.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/cluster"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(3, 0, 13, (*Broker).metadata) }

func (b *Broker) metadata(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.MetadataRequest)
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	im := b.image()
	for _, id := range im.BrokerIDs() {
		br, ok := endpointOn(im.Brokers[id], listenerOf(req))
		if !ok {
			continue
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = br.ID, br.Host, br.Port
		if br.Rack != "" {
			rack := br.Rack
			mb.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, mb)
	}
	cid := im.ClusterID
	resp.ClusterID = &cid
	resp.ControllerID = b.controllerID()
	resp.AuthorizedOperations = b.opsIf(r.Version >= 8 && r.IncludeClusterAuthorizedOperations, req, rCluster, clusterName)
	withOps := func(mt kmsg.MetadataResponseTopic) kmsg.MetadataResponseTopic {
		mt.AuthorizedOperations = b.opsIf(r.Version >= 8 && r.IncludeTopicAuthorizedOperations, req, rTopic, *mt.Topic)
		return mt
	}

	autoCreate := (r.Version < 4 || r.AllowAutoTopicCreation) && b.brokerValue(im, "auto.create.topics.enable") == "true"
	if r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0) {
		for _, name := range im.TopicNames() {
			if b.mayQuietly(req, opDescribe, rTopic, name) { // the others are hidden
				resp.Topics = append(resp.Topics, withOps(topicMetadata(im.Topics[name], 0)))
			}
		}
		return now(resp), nil
	}
	for _, rt := range r.Topics {
		var t *metadata.Topic
		switch {
		case rt.Topic != nil:
			t = im.Topic(*rt.Topic)
		case rt.TopicID != [16]byte{}:
			t = im.TopicByID(rt.TopicID)
			if t == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		}
		if t != nil && !b.authorized(req, opDescribe, rTopic, t.Name) {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID, mt.ErrorCode = rt.Topic, rt.TopicID, kerr.TopicAuthorizationFailed.Code // by id: no name
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		if t == nil && rt.Topic != nil {
			name := *rt.Topic
			errCode := kerr.UnknownTopicOrPartition.Code
			if err := validTopicName(name); err != nil {
				errCode = kerr.InvalidTopicException.Code
			} else if !b.authorized(req, opDescribe, rTopic, name) ||
				autoCreate && !b.mayQuietly(req, opCreate, rCluster, clusterName) && !b.authorized(req, opCreate, rTopic, name) {
				errCode = kerr.TopicAuthorizationFailed.Code
			} else if autoCreate {
				created, err := b.createTopic(ctx, topicSpec{name: name, partitions: -1, rf: -1})
				switch {
				case err == nil:
					t = created
				case errors.Is(err, kerr.TopicAlreadyExists) || errors.Is(err, metadata.ErrTopicExists):
					t = b.image().Topic(name)
				case errors.Is(err, cluster.ErrBrokersDown):
					// Retriable: the topic is created once enough
					// brokers are up (cluster.Topics.BrokersUp logs it), as Kafka's
					// auto-creation answers while it waits.
					errCode = kerr.LeaderNotAvailable.Code
				default:
					b.log.Warn("auto-creating topic failed", "topic", name, "err", err)
					errCode = code(err)
				}
			}
			if t == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = &name
				mt.ErrorCode = errCode
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		}
		if t == nil {
			continue
		}
		resp.Topics = append(resp.Topics, withOps(topicMetadata(t, 0)))
	}
	return now(resp), nil
}

func topicMetadata(t *metadata.Topic, errCode int16) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = t.Internal
	mt.ErrorCode = errCode
	mt.AuthorizedOperations = authzNotComputed
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.Index
		mp.Leader = p.Leader
		mp.LeaderEpoch = p.LeaderEpoch
		mp.Replicas = p.Replicas
		mp.ISR = p.ISR
		if p.Leader == metadata.NoLeader {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
