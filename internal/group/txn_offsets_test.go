package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
)

func txnCommit(t *testing.T, c *Coordinator, groupID string, pid int64, off int64) int16 {
	t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 3
	req.TransactionalID, req.Group, req.ProducerID, req.Generation = "tx", groupID, pid, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = 0, off, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	var got int16 = -1
	c.TxnOffsetCommit(req, func(resp *kmsg.TxnOffsetCommitResponse) { got = resp.Topics[0].Partitions[0].ErrorCode })
	return got
}

func txnFetched(t *testing.T, c *Coordinator, groupID string) int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group = groupID
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = "t", []int32{0}
	req.Topics = append(req.Topics, rt)
	resp := c.OffsetFetch(req)
	return resp.Topics[0].Partitions[0].Offset
}

func txnComplete(t *testing.T, c *Coordinator, groupID string, pid int64, commit bool) {
	t.Helper()
	var err error = kerr.UnknownServerError
	c.CompleteTxnOffsets(metadata.PartitionForKey(groupID, c.cfg.OffsetsTopicPartitions), pid, commit, func(e error) { err = e })
	if err != nil {
		t.Fatalf("CompleteTxnOffsets: %v", err)
	}
}

// Transactional offsets are pending until the marker: COMMIT applies
// them, ABORT drops them, and a coordinator that loads the partition gets
// the still-pending ones back from the log.
func TestTxnOffsetsPendingUntilMarker(t *testing.T) {
	h := newHarness(t)
	c := h.newCoordinator()
	h.loadAll(c)

	if ec := txnCommit(t, c, "g", 7, 10); ec != 0 {
		t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(ec))
	}
	if o := txnFetched(t, c, "g"); o != -1 {
		t.Fatalf("offset %d before the marker, want none (-1)", o)
	}
	stable := kmsg.NewPtrOffsetFetchRequest()
	stable.Version, stable.Group, stable.RequireStable = 7, "g", true
	st := kmsg.NewOffsetFetchRequestTopic()
	st.Topic, st.Partitions = "t", []int32{0, 1}
	stable.Topics = append(stable.Topics, st)
	if ps := c.OffsetFetch(stable).Topics[0].Partitions; ps[0].ErrorCode != kerr.UnstableOffsetCommit.Code || ps[1].ErrorCode != 0 {
		t.Fatalf("RequireStable with offsets pending on t-0: %v, %v", kerr.ErrorForCode(ps[0].ErrorCode), kerr.ErrorForCode(ps[1].ErrorCode))
	}
	txnComplete(t, c, "g", 7, true)
	if o := txnFetched(t, c, "g"); o != 10 {
		t.Fatalf("offset %d after COMMIT, want 10", o)
	}
	if ps := c.OffsetFetch(stable).Topics[0].Partitions; ps[0].ErrorCode != 0 || ps[0].Offset != 10 {
		t.Fatalf("RequireStable after COMMIT: %v, offset %d", kerr.ErrorForCode(ps[0].ErrorCode), ps[0].Offset)
	}

	if ec := txnCommit(t, c, "g", 7, 20); ec != 0 {
		t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(ec))
	}
	txnComplete(t, c, "g", 7, false)
	if o := txnFetched(t, c, "g"); o != 10 {
		t.Fatalf("offset %d after ABORT, want 10", o)
	}
	txnComplete(t, c, "g", 7, true) // a marker written again: nothing pending
	if o := txnFetched(t, c, "g"); o != 10 {
		t.Fatalf("offset %d after a repeated marker, want 10", o)
	}

	// Pending at a failover: the next coordinator replays it and commits
	// it on the marker.
	if ec := txnCommit(t, c, "g", 8, 30); ec != 0 {
		t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(ec))
	}
	c2 := h.newCoordinator()
	h.loadAll(c2)
	if o := txnFetched(t, c2, "g"); o != 10 {
		t.Fatalf("offset %d after reload, want 10", o)
	}
	txnComplete(t, c2, "g", 8, true)
	if o := txnFetched(t, c2, "g"); o != 30 {
		t.Fatalf("offset %d after COMMIT on the new coordinator, want 30", o)
	}
	// And a completed one stays completed after another reload.
	c3 := h.newCoordinator()
	h.loadAll(c3)
	txnComplete(t, c3, "g", 8, false)
	if o := txnFetched(t, c3, "g"); o != 30 {
		t.Fatalf("offset %d after a late ABORT of a completed transaction, want 30", o)
	}
}

// KIP-447: a member id must be a member, a generation the current one.
func TestTxnOffsetCommitChecksMember(t *testing.T) {
	h := newHarness(t)
	c := h.newCoordinator()
	h.loadAll(c)
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 3
	req.Group, req.ProducerID, req.Generation, req.MemberID = "g", 1, 3, "ghost"
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	var got int16
	c.TxnOffsetCommit(req, func(resp *kmsg.TxnOffsetCommitResponse) { got = resp.Topics[0].Partitions[0].ErrorCode })
	if got != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %v", kerr.ErrorForCode(got))
	}
}
