package group

// TxnOffsetCommit (KIP-98, with KIP-447's group checks): offsets committed
// inside a transaction are pending until the transaction's marker reaches
// the group's __consumer_offsets partition (CompleteTxnOffsets, called by
// the WriteTxnMarkers handler once the marker is durable): COMMIT makes
// them the group's committed offsets, ABORT drops them.
//
// Berth does not write them as Kafka does (offset records in a
// transactional batch of the producer, resolved by the marker when the
// partition is loaded); it writes each pending offset as a Berth record
// (key version txnOffsetKeyVersion: group, topic, partition, producer id;
// value an OffsetCommitValue), and on the marker the offset records and
// the pending records' tombstones. A coordinator that loads the partition
// gets the pending offsets back from those records; a marker whose
// completion a crash interrupted is written again by the transaction
// coordinator (it is answered only once the completion is durable).
// OffsetFetch with RequireStable answers UNSTABLE_OFFSET_COMMIT for a
// partition with offsets pending (markUnstable). Not honoured yet: the
// group coordinator does not check with the transaction coordinator that
// the group's partition is in the producer's transaction.

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
)

// txnOffsetKeyVersion is the key version of Berth's pending transactional
// offset records, far from Kafka's (0-15 and counting).
const txnOffsetKeyVersion int16 = 32100

// txnOffsetKey names one pending transactional offset.
type txnOffsetKey struct {
	group      string
	tp         topicPartition
	producerID int64
}

func (k txnOffsetKey) bytes() []byte {
	b := kbin.AppendInt16(nil, txnOffsetKeyVersion)
	b = kbin.AppendString(b, k.group)
	b = kbin.AppendString(b, k.tp.topic)
	b = kbin.AppendInt32(b, k.tp.partition)
	return kbin.AppendInt64(b, k.producerID)
}

func isTxnOffsetKey(b []byte) bool {
	return len(b) >= 2 && int16(b[0])<<8|int16(b[1]) == txnOffsetKeyVersion
}

func decodeTxnOffsetKey(b []byte) (txnOffsetKey, error) {
	r := kbin.Reader{Src: b[2:]}
	k := txnOffsetKey{group: r.String()}
	k.tp.topic = r.String()
	k.tp.partition = r.Int32()
	k.producerID = r.Int64()
	if err := r.Complete(); err != nil {
		return txnOffsetKey{}, fmt.Errorf("%w: transactional offset key: %v", ErrCorruptRecord, err)
	}
	return k, nil
}

// loadTxnOffset replays a pending transactional offset record (c.mu not
// held).
func (c *Coordinator) loadTxnOffset(p int32, r Record) {
	k, err := decodeTxnOffsetKey(r.Key)
	var o offset
	if err == nil && r.Value != nil {
		o, err = decodeOffsetValue(r.Value)
	}
	if err != nil {
		c.log.Warn("skipping __consumer_offsets record", "partition", p, "err", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := c.parts[p]
	if ps == nil || !ps.loading {
		return
	}
	if r.Value == nil {
		delete(ps.txnOffsets, k)
		return
	}
	if ps.txnOffsets == nil {
		ps.txnOffsets = map[txnOffsetKey]offset{}
	}
	ps.txnOffsets[k] = o
}

// TxnOffsetCommit serves a TxnOffsetCommit request; respond is called once
// the pending offsets are durable (or the write failed).
func (c *Coordinator) TxnOffsetCommit(req *kmsg.TxnOffsetCommitRequest, respond func(*kmsg.TxnOffsetCommitResponse)) {
	now := c.cfg.Now()
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	var items []commitItem
	for ti, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		name, topicCode := c.commitTopic(req.Version >= 6, t.Topic, t.TopicID)
		for pi, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			meta := derefString(p.Metadata)
			if rp.ErrorCode = c.commitCode(name, topicCode, p.Partition, meta); rp.ErrorCode == 0 {
				o := offset{offset: p.Offset, leaderEpoch: p.LeaderEpoch, metadata: meta, commitMillis: now.UnixMilli()}
				if req.Version < 2 {
					o.leaderEpoch = -1
				}
				items = append(items, commitItem{ti: ti, pi: pi, tp: topicPartition{name, p.Partition}, o: o})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	setAll := func(code int16) {
		for _, it := range items {
			resp.Topics[it.ti].Partitions[it.pi].ErrorCode = code
		}
	}
	if len(items) == 0 {
		respond(resp)
		return
	}
	g, code := c.acquire(req.Group, true)
	if code != 0 {
		setAll(code)
		respond(resp)
		return
	}
	var f fx
	defer c.release(g, &f)
	if code := validateTxnCommit(g, req); code != 0 {
		setAll(code)
		f.add(func() { respond(resp) })
		return
	}
	keys := make([]txnOffsetKey, len(items))
	recs := make([]Record, len(items))
	for i, it := range items {
		keys[i] = txnOffsetKey{group: g.id, tp: it.tp, producerID: req.ProducerID}
		recs[i] = Record{Key: keys[i].bytes(), Value: offsetRecord(g.id, it.tp, it.o).Value}
	}
	p := g.partition
	c.write(p, recs, func(err error) {
		if err != nil {
			c.log.Warn("writing transactional offset commit failed", "group", req.Group, "err", err)
			setAll(storeErrorCode(err, true))
			respond(resp)
			return
		}
		c.mu.Lock()
		if ps := c.parts[p]; ps != nil && !ps.loading {
			if ps.txnOffsets == nil {
				ps.txnOffsets = map[txnOffsetKey]offset{}
			}
			for i, it := range items {
				ps.txnOffsets[keys[i]] = it.o
			}
		}
		c.mu.Unlock()
		respond(resp)
	})
}

// validateTxnCommit is Kafka's check of a transactional commit: a member
// id, when given, must be a member; a generation (member epoch), when
// given, the current one.
func validateTxnCommit(g *group, req *kmsg.TxnOffsetCommitRequest) int16 {
	switch {
	case g.isShare():
		return kerr.GroupIDNotFound.Code
	case g.state == stateDead:
		return kerr.CoordinatorNotAvailable.Code
	case g.isConsumer():
		if req.MemberID == "" && req.Generation < 0 {
			return 0
		}
		m := g.cg.members[req.MemberID]
		switch {
		case m == nil:
			return kerr.UnknownMemberID.Code
		case req.Generation != m.epoch:
			return kerr.IllegalGeneration.Code
		}
		return 0
	case g.fenced(req.InstanceID, req.MemberID):
		return kerr.FencedInstanceID.Code
	case req.MemberID != "" && g.members[req.MemberID] == nil:
		return kerr.UnknownMemberID.Code
	case req.Generation >= 0 && req.Generation != g.generation:
		return kerr.IllegalGeneration.Code
	}
	return 0
}

// CompleteTxnOffsets ends producerID's pending offsets on partition p once
// its COMMIT (commit) or ABORT marker is durable there: committed, they
// become the groups' offsets. done is called once that is durable (nil
// at once when the producer has none pending); an error means the caller
// must not consider the marker written.
func (c *Coordinator) CompleteTxnOffsets(p int32, producerID int64, commit bool, done func(error)) {
	c.mu.Lock()
	ps := c.parts[p]
	switch {
	case ps == nil:
		err := c.notOwned(p)
		c.mu.Unlock()
		done(err)
		return
	case ps.loading:
		c.mu.Unlock()
		done(kerr.CoordinatorLoadInProgress)
		return
	}
	pending := map[txnOffsetKey]offset{}
	for k, o := range ps.txnOffsets {
		if k.producerID == producerID {
			pending[k] = o
		}
	}
	c.mu.Unlock()
	if len(pending) == 0 {
		done(nil)
		return
	}
	keys := slices.SortedFunc(maps.Keys(pending), func(a, b txnOffsetKey) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.tp.topic, b.tp.topic), cmp.Compare(a.tp.partition, b.tp.partition))
	})
	var recs []Record
	if commit {
		for _, k := range keys {
			recs = append(recs, offsetRecord(k.group, k.tp, pending[k]))
		}
	}
	for _, k := range keys {
		recs = append(recs, Record{Key: k.bytes()})
	}
	c.write(p, recs, func(err error) {
		if err != nil {
			done(err)
			return
		}
		c.mu.Lock()
		if ps2 := c.parts[p]; ps2 == ps {
			for _, k := range keys {
				delete(ps.txnOffsets, k)
			}
		}
		c.mu.Unlock()
		if commit {
			for i := 0; i < len(keys); {
				j := i
				for j < len(keys) && keys[j].group == keys[i].group {
					j++
				}
				c.applyTxnOffsets(keys[i].group, keys[i:j], pending)
				i = j
			}
		}
		done(nil)
	})
	c.flush()
}

// applyTxnOffsets makes committed transactional offsets a group's
// offsets, as a durable OffsetCommit does.
func (c *Coordinator) applyTxnOffsets(id string, keys []txnOffsetKey, pending map[txnOffsetKey]offset) {
	g, code := c.acquire(id, true)
	if code != 0 || g == nil {
		return // the partition moved: its next coordinator loads the offsets
	}
	var f fx
	defer c.release(g, &f)
	if g.removed {
		return
	}
	g.nextSeq++
	seq := g.nextSeq
	for _, k := range keys {
		o := pending[k]
		o.seq = seq
		if cur, ok := g.offsets[k.tp]; !ok || cur.seq <= seq {
			g.offsets[k.tp] = o
		}
	}
}

// markUnstable sets UNSTABLE_OFFSET_COMMIT (and no offset) on the
// partitions of got that have transactional offsets of group pending, for
// OffsetFetch with RequireStable.
func (c *Coordinator) markUnstable(group string, got []fetchTopic) {
	c.mu.Lock()
	pending := map[topicPartition]bool{}
	if ps := c.parts[metadata.PartitionForKey(group, c.cfg.OffsetsTopicPartitions)]; ps != nil {
		for k := range ps.txnOffsets {
			if k.group == group {
				pending[k.tp] = true
			}
		}
	}
	c.mu.Unlock()
	for i := range got {
		for j := range got[i].parts {
			if fp := &got[i].parts[j]; fp.code == 0 && pending[topicPartition{got[i].name, fp.partition}] {
				fp.o, fp.code = noOffset, kerr.UnstableOffsetCommit.Code
			}
		}
	}
}
