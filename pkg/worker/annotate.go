package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/pkg/berthmsg"
)

// ErrNotBerth: the broker does not serve BerthAnnotateShareRecords (it
// is not Berth, or an older one), so failures are acknowledged without
// their error text.
var ErrNotBerth = errors.New("worker: the broker does not take error texts (BerthAnnotateShareRecords)")

// annotator sends a failed record's error text to its partition leader
// (BerthAnnotateShareRecords) before the record is released or rejected.
type annotator struct {
	cl       *kgo.Client
	group    string
	member   *memberID
	maxText  int
	disabled atomic.Bool // the broker refused the key once: not Berth
}

// annotate attaches text to r on the broker; r must still be held.
func (a *annotator) annotate(ctx context.Context, r *kgo.Record, text string) error {
	if a.disabled.Load() {
		return ErrNotBerth
	}
	member := a.member.get()
	if member == "" {
		return errors.New("worker: the share member ID is not known yet")
	}
	if len(text) > a.maxText {
		text = text[:a.maxText] // the broker cuts on a rune boundary; this only bounds the request
	}
	id, leader, err := a.locate(ctx, r.Topic, r.Partition)
	if err != nil {
		return err
	}
	req := berthmsg.NewAnnotateShareRecordsRequest()
	req.GroupID, req.MemberID = a.group, member
	req.Topics = []berthmsg.AnnotateShareRecordsTopic{{TopicID: id, Partitions: []berthmsg.AnnotateShareRecordsPartition{{
		Partition: r.Partition, FirstOffset: r.Offset, LastOffset: r.Offset, ErrorText: text,
	}}}}
	kresp, err := a.cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		if ctx.Err() == nil && isBrokerTooOld(err) {
			a.disabled.Store(true)
			return fmt.Errorf("%w: %v", ErrNotBerth, err)
		}
		return fmt.Errorf("worker: annotating %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	resp := kresp.(*berthmsg.AnnotateShareRecordsResponse)
	if err := errFor(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return fmt.Errorf("worker: annotating %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := errFor(p.ErrorCode, p.ErrorMessage); err != nil {
				return fmt.Errorf("worker: annotating %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
		}
	}
	return nil
}

// locate returns topic's ID and partition's leader from a Metadata
// request (failures are rare enough not to need a cache, and a fresh
// answer follows leader moves).
func (a *annotator) locate(ctx context.Context, topic string, partition int32) ([16]byte, int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, a.cl)
	if err != nil {
		return [16]byte{}, -1, err
	}
	for _, rt := range resp.Topics {
		if rt.Topic == nil || *rt.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			return [16]byte{}, -1, err
		}
		for _, p := range rt.Partitions {
			if p.Partition == partition {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return [16]byte{}, -1, err
				}
				return rt.TopicID, p.Leader, nil
			}
		}
	}
	return [16]byte{}, -1, fmt.Errorf("worker: no metadata for %s/%d", topic, partition)
}

func errFor(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err != nil && msg != nil {
		return fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}

// isBrokerTooOld recognises kgo's refusal to send a key the broker did
// not list in ApiVersions (kgo keeps the error unexported).
func isBrokerTooOld(err error) bool {
	return err != nil && (errors.Is(err, kerr.UnsupportedVersion) ||
		strings.Contains(err.Error(), "broker is too old") ||
		strings.Contains(err.Error(), "request key is unknown"))
}
