package tests

// A slow worker whose lock expired cannot acknowledge the job another
// worker now holds, and a worker that renews its lock keeps the job: the
// raw KIP-932 protocol (ShareFetch, ShareAcknowledge with explicit share
// sessions), so nothing on the client side filters the stale ack.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// rawShareMember is a share group member speaking the protocol by hand.
type rawShareMember struct {
	t       *testing.T
	cl      *kgo.Client
	group   string
	id      string
	epoch   int32 // next share session epoch
	topicID [16]byte
	// maxRecords, if set, is a strict record limit for each fetch
	// (ShareAcquireMode record_limit); else 100 records, batch-wise.
	maxRecords int32
}

func newRawShareMember(t *testing.T, ctx context.Context, addr, group, id, topic string, topicID [16]byte) *rawShareMember {
	cl := tc.Client(t, addr)
	poll.Until(t, 30*time.Second, func() error {
		_, err := shareHeartbeat(ctx, cl, group, id, 0, []string{topic})
		return err
	})
	return &rawShareMember{t: t, cl: cl, group: group, id: id, topicID: topicID}
}

// fetch sends one ShareFetch of partition 0 (waiting at most wait) and
// returns the acquired ranges.
func (m *rawShareMember) fetch(ctx context.Context, wait time.Duration) []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord {
	m.t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = 2
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &m.group, &m.id, m.epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = int32(wait.Milliseconds()), 1, 1<<20, 100, 100
	if m.maxRecords > 0 {
		req.MaxRecords, req.BatchSize, req.ShareAcquireMode = m.maxRecords, m.maxRecords, 1
	}
	t := kmsg.NewShareFetchRequestTopic()
	t.TopicID = m.topicID
	p := kmsg.NewShareFetchRequestTopicPartition()
	p.PartitionMaxBytes = 1 << 20
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		m.t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		m.t.Fatalf("%s: ShareFetch: %v", m.id, err)
	}
	m.epoch++
	var out []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				m.t.Fatalf("%s: ShareFetch partition: %v", m.id, err)
			}
			out = append(out, rp.AcquiredRecords...)
		}
	}
	return out
}

// ack acknowledges offset with typ (1 accept, 2 release, 3 reject, 4
// renew) and returns the
// partition's error.
func (m *rawShareMember) ack(ctx context.Context, offset int64, typ int8) error {
	m.t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.Version = 2
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &m.group, &m.id, m.epoch
	req.IsRenewAck = typ == 4
	t := kmsg.NewShareAcknowledgeRequestTopic()
	t.TopicID = m.topicID
	p := kmsg.NewShareAcknowledgeRequestTopicPartition()
	b := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = offset, offset, []int8{typ}
	p.AcknowledgementBatches = append(p.AcknowledgementBatches, b)
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		m.t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		m.t.Fatalf("%s: ShareAcknowledge: %v", m.id, err)
	}
	m.epoch++
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

func TestShareStaleAckRefusedAndRenewKeepsJob(t *testing.T) {
	n := tc.Start(t,
		tc.With("group.share.record.lock.duration.ms", "1000"),
		tc.With("group.share.retry.backoff.initial.ms", "0"))
	tc.CreateTopic(t, n.Addr(), "jobs", 1, nil)
	ctx := ctxT(t, 90*time.Second)
	adm := tc.Admin(t, n.Addr())
	td, err := adm.ListTopics(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	id := td["jobs"].ID
	slow := newRawShareMember(t, ctx, n.Addr(), "workers", "slow-worker", "jobs", id)
	other := newRawShareMember(t, ctx, n.Addr(), "workers", "other-worker", "jobs", id)
	slow.fetch(ctx, 0) // opens the session; the share-partition starts at the end
	other.fetch(ctx, 0)
	prod := tc.Client(t, n.Addr())
	produceSync(t, prod, &kgo.Record{Topic: "jobs", Value: []byte("job")})

	var got []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	poll.Until(t, 10*time.Second, func() error {
		if got = slow.fetch(ctx, 500*time.Millisecond); len(got) == 0 {
			return fmt.Errorf("slow worker acquired nothing yet")
		}
		return nil
	})
	job := got[0].FirstOffset
	// The slow worker's 1 s lock runs out; the other worker takes the job.
	poll.Until(t, 10*time.Second, func() error {
		for _, a := range other.fetch(ctx, 500*time.Millisecond) {
			if a.FirstOffset <= job && job <= a.LastOffset {
				if a.DeliveryCount != 2 {
					t.Fatalf("second delivery has count %d", a.DeliveryCount)
				}
				return nil
			}
		}
		return fmt.Errorf("other worker has not got the job")
	})
	if err := slow.ack(ctx, job, 1); err != kerr.InvalidRecordState {
		t.Fatalf("the slow worker's stale ACCEPT: %v, want INVALID_RECORD_STATE", err)
	}
	// The other worker renews its lock (KIP-1222) for longer than the
	// lock duration: the job stays its own, the slow worker gets nothing.
	for range 4 {
		if err := other.ack(ctx, job, 4); err != nil {
			t.Fatalf("RENEW: %v", err)
		}
		if got := slow.fetch(ctx, 500*time.Millisecond); len(got) != 0 {
			t.Fatalf("slow worker acquired %v while the job's lock was renewed", got)
		}
	}
	if err := other.ack(ctx, job, 1); err != nil {
		t.Fatalf("the holder's ACCEPT: %v", err)
	}
	if got := slow.fetch(ctx, 1500*time.Millisecond); len(got) != 0 {
		t.Fatalf("an accepted job acquired again: %v", got)
	}
}
