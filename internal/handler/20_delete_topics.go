package handler

// DeleteTopics, versions 0-6: by name, and by topic id (v6+). The topic's
// partition directories are removed when the deletion applies.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(20, 0, 6, (*Broker).deleteTopics) }

func (b *Broker) deleteTopics(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.DeleteTopicsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	targets := r.Topics
	for _, n := range r.TopicNames {
		n := n
		targets = append(targets, kmsg.DeleteTopicsRequestTopic{Topic: &n})
	}
	for _, rt := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		name := ""
		if rt.Topic != nil {
			name = *rt.Topic
		}
		var err error = kerr.TopicAuthorizationFailed
		if !b.topicDenied(req, b.image(), opDelete, name, rt.TopicID, name == "") {
			err = b.deleteTopic(ctx, rt)
		}
		if err != nil {
			st.ErrorCode = code(err)
			st.ErrorMessage = errMsg(err)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return now(resp), nil
}

func (b *Broker) deleteTopic(ctx context.Context, rt kmsg.DeleteTopicsRequestTopic) error {
	if b.brokerValue(b.image(), "delete.topic.enable") != "true" {
		return fmt.Errorf("%w: delete.topic.enable is false", kerr.TopicDeletionDisabled)
	}
	im := b.image()
	var t *metadata.Topic
	if rt.Topic != nil && *rt.Topic != "" {
		if t = im.Topic(*rt.Topic); t == nil {
			return fmt.Errorf("%w: no topic %q", kerr.UnknownTopicOrPartition, *rt.Topic)
		}
	} else {
		if t = im.TopicByID(rt.TopicID); t == nil {
			return fmt.Errorf("%w: no topic with that id", kerr.UnknownTopicID)
		}
	}
	if t.Internal || metadata.IsInternalTopic(t.Name) {
		return fmt.Errorf("%w: %s is an internal topic and cannot be deleted", kerr.InvalidRequest, t.Name)
	}
	if err := b.propose(ctx, metadata.Record{DeleteTopic: &metadata.DeleteTopic{Name: t.Name}}); err != nil {
		return err
	}
	b.log.Info("topic deleted", "topic", t.Name)
	return nil
}
