package handler_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

func strp(s string) *string { return &s }

// shareAck builds a ShareAcknowledge of one partition.
func shareAck(group, member string, epoch int32, topicID [16]byte, part int32, version int16, batches ...kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareAcknowledgeRequest {
	r := kmsg.NewPtrShareAcknowledgeRequest()
	r.Version, r.GroupID, r.MemberID, r.ShareSessionEpoch = version, strp(group), strp(member), epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = topicID
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	rp.Partition, rp.AcknowledgementBatches = part, batches
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	return r
}

func ackBatch(first, last int64, types ...int8) kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch {
	return kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{FirstOffset: first, LastOffset: last, AcknowledgeTypes: types}
}

// The error codes of ShareFetch and ShareAcknowledge, as KIP-932 names
// them, on one broker.
func TestShareFetchAndAcknowledgeErrors(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "q", 1, nil)
	cl := tc.Client(t, n.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	md := kmsg.NewPtrMetadataRequest()
	mdt := kmsg.NewMetadataRequestTopic()
	mdt.Topic = strp("q")
	md.Topics = append(md.Topics, mdt)
	mresp, err := md.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics) != 1 {
		t.Fatalf("metadata: %v", err)
	}
	topicID := mresp.Topics[0].TopicID

	// fetchReq is a ShareFetch of partition 0 carrying acks.
	fetchReq := func(member string, epoch int32, wait int32, acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchRequest {
		r := kmsg.NewPtrShareFetchRequest()
		r.Version, r.GroupID, r.MemberID, r.ShareSessionEpoch = 1, strp("g"), strp(member), epoch
		r.MaxWaitMillis, r.MinBytes, r.MaxRecords, r.BatchSize = wait, 1, 100, 100
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = topicID
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.AcknowledgementBatches = acks
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		return r
	}
	send := func(r *kmsg.ShareFetchRequest) *kmsg.ShareFetchResponse {
		t.Helper()
		resp, err := r.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	fetch := func(member string, epoch int32, wait int32, acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchResponse {
		t.Helper()
		return send(fetchReq(member, epoch, wait, acks...))
	}
	ack := func(r *kmsg.ShareAcknowledgeRequest) *kmsg.ShareAcknowledgeResponse {
		t.Helper()
		resp, err := r.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	want := func(what string, got int16, w *kerr.Error) {
		t.Helper()
		wc := int16(0)
		if w != nil {
			wc = w.Code
		}
		if got != wc {
			t.Errorf("%s: code %v, want %v", what, kerr.ErrorForCode(got), w)
		}
	}

	// No member id: INVALID_REQUEST. A member not in the group:
	// UNKNOWN_MEMBER_ID (the coordinator is this node; it may be loading).
	r := kmsg.NewPtrShareFetchRequest()
	r.Version, r.GroupID = 1, strp("g")
	resp, err := r.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want("no member id", resp.ErrorCode, kerr.InvalidRequest)

	// m1 joins the share group (the first join creates __consumer_offsets).
	poll.Until(t, 30*time.Second, func() error {
		hb := kmsg.NewPtrShareGroupHeartbeatRequest()
		hb.Version, hb.GroupID, hb.MemberID, hb.MemberEpoch = 1, "g", "m1", 0
		hb.SubscribedTopicNames = []string{"q"}
		hr, err := hb.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(hr.ErrorCode)
	})
	want("member not in the group", fetch("stranger", 0, 0).ErrorCode, kerr.UnknownMemberID)
	want("ShareAcknowledge of a member not in the group", ack(shareAck("g", "stranger", 1, topicID, 0, 1)).ErrorCode, kerr.UnknownMemberID)

	// Sessions: none yet; epoch 0 opens; a wrong epoch; acks need one.
	want("no session", fetch("m1", 3, 0).ErrorCode, kerr.ShareSessionNotFound)
	want("ShareAcknowledge without session", ack(shareAck("g", "m1", 1, topicID, 0, 1)).ErrorCode, kerr.ShareSessionNotFound)
	want("piggybacked acks on epoch 0", fetch("m1", 0, 0, kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{1}}).ErrorCode, kerr.InvalidRequest)
	open := fetch("m1", 0, 0) // epoch 1 next; the share-partition starts at the high watermark (0)
	want("open", open.ErrorCode, nil)
	if open.AcquisitionLockTimeoutMillis != 30000 {
		t.Errorf("AcquisitionLockTimeoutMillis %d, want 30000", open.AcquisitionLockTimeoutMillis)
	}
	want("wrong epoch", fetch("m1", 7, 0).ErrorCode, kerr.InvalidShareSessionEpoch)
	want("ShareAcknowledge with epoch 0", ack(shareAck("g", "m1", 0, topicID, 0, 1)).ErrorCode, kerr.InvalidShareSessionEpoch)

	// A record, acquired by a long poll of the session (epoch 1).
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "q", Value: []byte("job")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := fetch("m1", 1, 10000)
	want("fetch", got.ErrorCode, nil)
	if len(got.Topics) != 1 || len(got.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch answered %d topics", len(got.Topics))
	}
	gp := got.Topics[0].Partitions[0]
	if len(gp.AcquiredRecords) != 1 || gp.AcquiredRecords[0].FirstOffset != 0 || gp.AcquiredRecords[0].LastOffset != 0 || gp.AcquiredRecords[0].DeliveryCount != 1 || len(gp.Records) == 0 {
		t.Fatalf("acquired %+v with %d bytes", gp.AcquiredRecords, len(gp.Records))
	}

	// Per-partition errors of ShareAcknowledge (epochs 2, 3, ...).
	epoch := int32(2)
	ackPart := func(what string, part int32, id [16]byte, version int16, w *kerr.Error, batches ...kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) {
		t.Helper()
		resp := ack(shareAck("g", "m1", epoch, id, part, version, batches...))
		epoch++
		want(what+" (top level)", resp.ErrorCode, nil)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("%s: %d topics answered", what, len(resp.Topics))
		}
		want(what, resp.Topics[0].Partitions[0].ErrorCode, w)
	}
	ackPart("not acquired", 0, topicID, 1, kerr.InvalidRecordState, ackBatch(5, 5, 1))
	ackPart("unknown type", 0, topicID, 1, kerr.InvalidRequest, ackBatch(0, 0, 9))
	ackPart("RENEW before v2", 0, topicID, 1, kerr.InvalidRequest, ackBatch(0, 0, 4))
	ackPart("types do not match the range", 0, topicID, 1, kerr.InvalidRequest, ackBatch(0, 1, 1, 1, 1))
	ackPart("unknown partition", 3, topicID, 1, kerr.UnknownTopicOrPartition, ackBatch(0, 0, 1))
	ackPart("unknown topic id", 0, [16]byte{1}, 1, kerr.UnknownTopicID, ackBatch(0, 0, 1))
	renew := shareAck("g", "m1", epoch, topicID, 0, 2, ackBatch(0, 0, 4))
	renew.IsRenewAck = true
	epoch++
	if resp := ack(renew); resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Errorf("RENEW: %v / %v", kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
	ackPart("accept", 0, topicID, 1, nil, ackBatch(0, 0, 1))
	// Offsets below the start offset are finished: acks of them are ignored.
	ackPart("accept a finished record again", 0, topicID, 1, nil, ackBatch(0, 0, 1))

	// A fetch that acknowledges partition 0 and forgets it in one request
	// (kgo does so when the partition's assignment moves) leaves it out of
	// the session: nothing more is acquired for it, not in this response
	// and not in the next, where the client would discard it.
	for _, v := range []string{"job2", "job3"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "q", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	got = fetch("m1", epoch, 10000)
	epoch++
	if gp := got.Topics[0].Partitions[0]; len(gp.AcquiredRecords) != 1 || gp.AcquiredRecords[0].FirstOffset != 1 {
		t.Fatalf("acquired %+v, want offsets 1-2", gp.AcquiredRecords)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "q", Value: []byte("job4")}).FirstErr(); err != nil {
		t.Fatal(err) // available to acquire: the session must not take it
	}
	leave := fetchReq("m1", epoch, 0, kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: 1, LastOffset: 2, AcknowledgeTypes: []int8{1}})
	leave.ForgottenTopicsData = append(leave.ForgottenTopicsData, kmsg.ShareFetchRequestForgottenTopicsData{TopicID: topicID, Partitions: []int32{0}})
	lresp := send(leave)
	epoch++
	want("acknowledge and forget", lresp.ErrorCode, nil)
	for _, rt := range lresp.Topics {
		for _, rp := range rt.Partitions {
			want("the forgotten partition's acknowledgement", rp.AcknowledgeErrorCode, nil)
		}
	}
	if a := acquired(lresp); len(a) > 0 {
		t.Errorf("acquired %+v for the partition just forgotten", a)
	}
	empty := fetchReq("m1", epoch, 0)
	empty.Topics = nil
	eresp := send(empty)
	epoch++
	want("fetch after forgetting", eresp.ErrorCode, nil)
	if a := acquired(eresp); len(a) > 0 {
		t.Errorf("acquired %+v from a session without partitions", a)
	}

	// -1 closes the session; the next request finds none.
	want("close", ack(shareAck("g", "m1", -1, topicID, 0, 1)).ErrorCode, nil)
	want("after close", ack(shareAck("g", "m1", epoch, topicID, 0, 1)).ErrorCode, kerr.ShareSessionNotFound)
}

// acquired lists the AcquiredRecords of every partition of resp.
func acquired(resp *kmsg.ShareFetchResponse) []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord {
	var out []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out = append(out, rp.AcquiredRecords...)
		}
	}
	return out
}
