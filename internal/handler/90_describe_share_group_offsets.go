package handler

// DescribeShareGroupOffsets (key 90), versions 0-1 (KIP-932; v1 adds Lag,
// KIP-1226): per share-partition, its start offset, the leader epoch and
// (v1) the lag: the records from the start offset to the high watermark
// that are not yet acknowledged or archived.
//
// Kafka's share coordinator answers from __share_group_state for every
// partition. Berth answers at the partition leader, which holds the
// share-partition's live state (locks, counts) in memory and reads the
// persisted state from the share coordinator when it has not loaded the
// share-partition (after a restart, before the first fetch): a partition
// with no state yet (no ShareFetch of the group there) has StartOffset -1,
// as Kafka answers for an uninitialized share-partition; a partition led
// by another broker answers NOT_LEADER_OR_FOLLOWER (send the request to
// its leader; `berth queue` does). A null Topics (kadm's form) lists the
// partitions this broker leads that have state for the group: those it
// has loaded, and those whose state the share coordinators hold (set by
// AlterShareGroupOffsets, or loaded before a restart), read without
// loading them. The group must be a share group
// (GROUP_ID_NOT_FOUND otherwise) when this broker coordinates it; when it
// does not, the group is not checked, since state lives on the leaders.
//
// Berth adds tagged fields (berthmsg.ShareStatsTag*, numbers 1000 and up so that
// Kafka's own tags never collide) to each partition entry it has
// share-partition state for: the records available, in flight, delayed,
// the oldest available record's age and the redelivery, rejection,
// delivery-limit, DLQ and archiving counts and the window's end offset
// (docs/compatibility.md, key 90). Each value is a zigzag varint (kbin varlong). Stock clients skip
// unknown tags; `berth queue` reads them.
//
// Not honoured: authorization (no ACLs yet).

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/share"
	"github.com/berthmq/berth/internal/sharestate"
	"github.com/berthmq/berth/pkg/berthmsg"
)

// setShareStatsTags puts st into sp's tagged fields; hw is the
// partition's high watermark.
func setShareStatsTags(sp *kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition, st share.PartitionStats, hw int64, now time.Time) {
	age := int64(-1)
	if !st.OldestAvailableSince.IsZero() {
		age = max(now.Sub(st.OldestAvailableSince).Milliseconds(), 0)
	}
	for _, kv := range []struct {
		tag uint32
		v   int64
	}{
		{berthmsg.ShareStatsTagAvailable, st.Available + max(hw-st.EndOffset, 0)},
		{berthmsg.ShareStatsTagAcquired, st.Acquired},
		{berthmsg.ShareStatsTagDelayed, st.Delayed},
		{berthmsg.ShareStatsTagOldestAvailableAgeMs, age},
		{berthmsg.ShareStatsTagRedeliveries, int64(st.Redeliveries)},
		{berthmsg.ShareStatsTagRejected, int64(st.Rejected)},
		{berthmsg.ShareStatsTagDeliveryLimit, int64(st.DeliveryLimits)},
		{berthmsg.ShareStatsTagDLQWritten, int64(st.DLQWritten)},
		{berthmsg.ShareStatsTagArchiving, st.Archiving},
		{berthmsg.ShareStatsTagEndOffset, st.EndOffset},
	} {
		sp.UnknownTags.Set(kv.tag, kbin.AppendVarlong(nil, kv.v))
	}
}

func init() { register(90, 0, 1, (*Broker).describeShareGroupOffsets) }

func (b *Broker) describeShareGroupOffsets(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	im := b.image()
	for _, rg := range r.Groups {
		if b.groupDenied(req, opDescribe, rg.GroupID) {
			g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
			g.GroupID, g.ErrorCode = rg.GroupID, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		var denied []kmsg.DescribeShareGroupOffsetsResponseGroupTopic
		if rg.Topics != nil {
			allowed := []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{}
			for _, t := range rg.Topics {
				if !b.topicDenied(req, im, opDescribe, t.Topic, [16]byte{}, false) {
					allowed = append(allowed, t)
					continue
				}
				rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					sp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
					sp.Partition, sp.StartOffset, sp.ErrorCode = p, -1, kerr.TopicAuthorizationFailed.Code
					rt.Partitions = append(rt.Partitions, sp)
				}
				denied = append(denied, rt)
			}
			rg.Topics = allowed
		}
		g := b.describeShareOffsets(ctx, rg)
		if rg.Topics == nil { // every topic: only those the principal may describe
			kept := g.Topics[:0]
			for _, t := range g.Topics {
				if b.mayQuietly(req, opDescribe, rTopic, t.Topic) {
					kept = append(kept, t)
				}
			}
			g.Topics = kept
		}
		g.Topics = append(g.Topics, denied...)
		resp.Groups = append(resp.Groups, g)
	}
	return now(resp), nil
}

func (b *Broker) describeShareOffsets(ctx context.Context, rg kmsg.DescribeShareGroupOffsetsRequestGroup) kmsg.DescribeShareGroupOffsetsResponseGroup {
	g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
	g.GroupID = rg.GroupID
	fail := func(err error) kmsg.DescribeShareGroupOffsetsResponseGroup {
		g.ErrorCode, g.ErrorMessage = code(err), errMsg(err)
		return g
	}
	switch {
	case rg.GroupID == "":
		return fail(fmt.Errorf("%w: empty group id", kerr.InvalidGroupID))
	case b.Shares == nil: // a handler built without share-partitions (tests)
		return fail(kerr.UnknownServerError)
	}
	if b.Groups != nil {
		if ok, known := b.Groups.IsShareGroup(rg.GroupID); known && !ok {
			return fail(fmt.Errorf("%w: group %s is not a share group or does not exist", kerr.GroupIDNotFound, rg.GroupID))
		}
	}
	im := b.image()
	topics := rg.Topics
	var (
		known    map[share.Key]share.PartitionStats // read already (null Topics)
		knownErr map[share.Key]error
	)
	if topics == nil {
		topics, known, knownErr = b.shareTopicsWithState(ctx, im, rg.GroupID)
	}
	for _, rt := range topics {
		t := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		t.Topic = rt.Topic
		mt, terr := lookupTopic(im, rt.Topic, [16]byte{}, false)
		if mt != nil {
			t.TopicID = mt.ID
		}
		for _, part := range rt.Partitions {
			sp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			sp.Partition, sp.StartOffset, sp.LeaderEpoch = part, -1, -1
			err := terr
			if err == nil {
				p, perr := b.partition(mt, part)
				if err = perr; err == nil {
					sp.LeaderEpoch = p.LeaderEpoch()
					k := share.Key{Group: rg.GroupID, TopicID: mt.ID, Partition: part}
					st, ok := known[k]
					if perr, failed := knownErr[k]; failed {
						err = perr
					} else if !ok {
						st, ok, err = b.Shares.Peek(ctx, k)
					}
					if ok {
						sp.StartOffset = st.StartOffset
						sp.Lag = max(p.HighWatermark()-st.StartOffset-st.Acknowledged-st.Archiving-st.Archived, 0)
						setShareStatsTags(&sp, st, p.HighWatermark(), time.Now())
					}
				}
			}
			sp.ErrorCode, sp.ErrorMessage = code(err), errMsg(err)
			t.Partitions = append(t.Partitions, sp)
		}
		g.Topics = append(g.Topics, t)
	}
	return g
}

// shareTopicsWithState lists, sorted, the partitions this broker leads
// on which group has share-partition state, with their stats (and the
// keys whose state could not be read, listed too so the answer shows
// the error): the share-partitions it has loaded, and every other
// partition it leads of a non-internal topic whose state the share
// coordinators hold, read in one batch per coordinator. Without
// __share_group_state nothing has state but what is loaded.
func (b *Broker) shareTopicsWithState(ctx context.Context, im *metadata.Image, group string) (
	[]kmsg.DescribeShareGroupOffsetsRequestGroupTopic, map[share.Key]share.PartitionStats, map[share.Key]error) {
	held := map[string][]int32{}
	seen := map[share.Key]bool{}
	for _, s := range b.Shares.AllStats() {
		if s.Key.Group == group {
			held[s.Topic] = append(held[s.Topic], s.Key.Partition)
			seen[s.Key] = true
		}
	}
	var (
		stats map[share.Key]share.PartitionStats
		errs  map[share.Key]error
	)
	if im.Topic(sharestate.Topic) != nil {
		var keys []share.Key
		names := map[[16]byte]string{}
		for _, name := range im.TopicNames() {
			t := im.Topic(name)
			if t == nil || t.Internal {
				continue
			}
			names[t.ID] = name
			for _, p := range t.Partitions {
				if k := (share.Key{Group: group, TopicID: t.ID, Partition: p.Index}); p.Leader == b.NodeID && !seen[k] {
					keys = append(keys, k)
				}
			}
		}
		stats, errs = b.Shares.PeekMany(ctx, keys)
		for _, k := range keys {
			_, ok := stats[k]
			_, failed := errs[k]
			if ok || failed {
				held[names[k.TopicID]] = append(held[names[k.TopicID]], k.Partition)
			}
		}
	}
	var topics []kmsg.DescribeShareGroupOffsetsRequestGroupTopic
	for name, ps := range held {
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		topics = append(topics, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: name, Partitions: ps})
	}
	sort.Slice(topics, func(i, j int) bool { return topics[i].Topic < topics[j].Topic })
	return topics, stats, errs
}
