package sharestate

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/peer"
	"github.com/berthmq/berth/internal/share"
)

// Route is where a share-partition's coordinator is: a node id and its
// Kafka address. It creates __share_group_state on first use.
type Route func(ctx context.Context, k share.Key) (node int32, addr string, err error)

// Client is a partition leader's way to its share-partitions' state: the
// local coordinator when this node is the coordinator, else
// ReadShareGroupState and WriteShareGroupState to the node that is. It
// retries (with backoff, until ctx ends) while the coordinator moves or
// loads. It implements sharepart.Store.
type Client struct {
	Self  int32
	Local *Coordinator
	Route Route
	// Peers carries the requests to other coordinators.
	Peers *peer.Pool
}

// Read implements sharepart.Store.
func (c *Client) Read(ctx context.Context, k share.Key, leaderEpoch int32) (share.Snapshot, bool, error) {
	var (
		snap share.Snapshot
		ok   bool
	)
	err := c.retry(ctx, k, func() error {
		var err error
		snap, ok, err = c.Local.Read(k, leaderEpoch)
		return err
	}, func(conn *peer.Conn) error {
		var err error
		snap, ok, err = remoteRead(ctx, conn, k, leaderEpoch)
		return err
	})
	return snap, ok, err
}

// PeekStates implements sharepart.StateReader: the states of keys, read
// without fencing anyone (leader epoch -1, as DescribeShareGroupOffsets
// reads), the keys of each other coordinator in one ReadShareGroupState
// request per group. Keys without state are in neither map; keys whose
// coordinator could not be found or answered with an error are in errs.
// No retries: a look, not a load.
func (c *Client) PeekStates(ctx context.Context, keys []share.Key) (states map[share.Key]share.Snapshot, errs map[share.Key]error) {
	states, errs = map[share.Key]share.Snapshot{}, map[share.Key]error{}
	type remote struct {
		addr string
		keys []share.Key
	}
	byNode := map[int32]*remote{}
	var nodes []int32
	for _, k := range keys {
		node, addr, err := c.Route(ctx, k)
		switch {
		case err != nil:
			errs[k] = err
		case node == c.Self:
			if s, ok, err := c.Local.Read(k, -1); err != nil {
				errs[k] = err
			} else if ok {
				states[k] = s
			}
		default:
			if byNode[node] == nil {
				byNode[node] = &remote{addr: addr}
				nodes = append(nodes, node)
			}
			byNode[node].keys = append(byNode[node].keys, k)
		}
	}
	for _, node := range nodes {
		rm := byNode[node]
		groups := map[string][]share.Key{}
		for _, k := range rm.keys {
			groups[k.Group] = append(groups[k.Group], k)
		}
		for group, ks := range groups {
			err := c.Peers.Do(ctx, rm.addr, func(conn *peer.Conn) error {
				return remotePeek(ctx, conn, group, ks, states, errs)
			})
			if err != nil {
				for _, k := range ks {
					if _, done := errs[k]; !done {
						if _, found := states[k]; !found {
							errs[k] = err
						}
					}
				}
			}
		}
	}
	return states, errs
}

// remotePeek reads the states of ks (all of group) in one request.
func remotePeek(ctx context.Context, conn *peer.Conn, group string, ks []share.Key, states map[share.Key]share.Snapshot, errs map[share.Key]error) error {
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = group
	for _, tp := range byTopic(ks) {
		t := kmsg.NewReadShareGroupStateRequestTopic()
		t.TopicID = tp.id
		for _, part := range tp.partitions {
			p := kmsg.NewReadShareGroupStateRequestTopicPartition()
			p.Partition, p.LeaderEpoch = part, -1
			t.Partitions = append(t.Partitions, p)
		}
		req.Topics = append(req.Topics, t)
	}
	raw, err := conn.Request(ctx, req, rpcTimeout)
	if err != nil {
		return err
	}
	for _, t := range raw.(*kmsg.ReadShareGroupStateResponse).Topics {
		for _, rp := range t.Partitions {
			k := share.Key{Group: group, TopicID: t.TopicID, Partition: rp.Partition}
			switch {
			case rp.ErrorCode != 0:
				errs[k] = kerr.ErrorForCode(rp.ErrorCode)
			case rp.StartOffset >= 0:
				states[k] = ReadResponseSnapshot(rp)
			}
		}
	}
	return nil
}

// Write implements sharepart.Store.
func (c *Client) Write(ctx context.Context, k share.Key, u share.Update) error {
	return c.retry(ctx, k, func() error { return c.Local.Write(k, u) },
		func(conn *peer.Conn) error { return remoteWrite(ctx, conn, k, u) })
}

// Initialize implements sharepart.StateAdmin: k's state restarts at
// start with a new state epoch.
func (c *Client) Initialize(ctx context.Context, k share.Key, start int64) error {
	return c.retry(ctx, k, func() error { return c.Local.Initialize(k, start) },
		func(conn *peer.Conn) error { return remoteInitialize(ctx, conn, k, start) })
}

// Delete implements sharepart.StateAdmin: k's state is removed.
func (c *Client) Delete(ctx context.Context, k share.Key) error {
	return c.retry(ctx, k, func() error { return c.Local.Delete(k) },
		func(conn *peer.Conn) error { return remoteDelete(ctx, conn, k) })
}

// DeleteStates implements sharepart.StateAdmin: the states of keys are
// removed at their coordinators, the local one directly, each other in
// one DeleteShareGroupState request per group; keys that fail with a
// retriable error (a coordinator moving or loading) are tried again, with
// backoff, until ctx ends.
func (c *Client) DeleteStates(ctx context.Context, keys []share.Key) error {
	backoff := 20 * time.Millisecond
	for {
		failed, err := c.deleteOnce(ctx, keys)
		if len(failed) == 0 {
			return nil
		}
		if !IsRetriable(err) {
			return err
		}
		keys = failed
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%d share-partitions left; last error: %v)", ctx.Err(), len(keys), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// deleteOnce tries to delete the states of keys once; it returns the keys
// not deleted and the last error (a non-retriable one first).
func (c *Client) deleteOnce(ctx context.Context, keys []share.Key) (failed []share.Key, last error) {
	fail := func(err error, ks ...share.Key) {
		failed = append(failed, ks...)
		if last == nil || IsRetriable(last) {
			last = err
		}
	}
	type remote struct {
		addr   string
		groups map[string][]share.Key
	}
	byNode := map[int32]*remote{}
	var nodes []int32
	for _, k := range keys {
		node, addr, err := c.Route(ctx, k)
		switch {
		case err != nil:
			fail(err, k)
		case node == c.Self:
			if err := c.Local.Delete(k); err != nil {
				fail(err, k)
			}
		default:
			rm := byNode[node]
			if rm == nil {
				rm = &remote{addr: addr, groups: map[string][]share.Key{}}
				byNode[node] = rm
				nodes = append(nodes, node)
			}
			rm.groups[k.Group] = append(rm.groups[k.Group], k)
		}
	}
	for _, node := range nodes {
		rm := byNode[node]
		for group, ks := range rm.groups {
			var errs map[share.Key]error
			err := c.Peers.Do(ctx, rm.addr, func(conn *peer.Conn) error {
				var err error
				errs, err = remoteDeleteMany(ctx, conn, group, ks)
				return err
			})
			if err != nil {
				fail(err, ks...)
				continue
			}
			for k, err := range errs {
				fail(err, k)
			}
		}
	}
	return failed, last
}

// remoteDeleteMany deletes the states of ks (all of group) in one request
// and returns the keys that failed.
func remoteDeleteMany(ctx context.Context, conn *peer.Conn, group string, ks []share.Key) (map[share.Key]error, error) {
	req := kmsg.NewPtrDeleteShareGroupStateRequest()
	req.GroupID = group
	for _, tp := range byTopic(ks) {
		t := kmsg.NewDeleteShareGroupStateRequestTopic()
		t.TopicID = tp.id
		for _, part := range tp.partitions {
			p := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
			p.Partition = part
			t.Partitions = append(t.Partitions, p)
		}
		req.Topics = append(req.Topics, t)
	}
	raw, err := conn.Request(ctx, req, rpcTimeout)
	if err != nil {
		return nil, err
	}
	answered := map[share.Key]bool{}
	errs := map[share.Key]error{}
	for _, t := range raw.(*kmsg.DeleteShareGroupStateResponse).Topics {
		for _, rp := range t.Partitions {
			k := share.Key{Group: group, TopicID: t.TopicID, Partition: rp.Partition}
			answered[k] = true
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				errs[k] = err
			}
		}
	}
	for _, k := range ks {
		if !answered[k] {
			errs[k] = fmt.Errorf("%w: DeleteShareGroupState response without %s", kerr.UnknownServerError, CoordinatorKey(k))
		}
	}
	return errs, nil
}

// retry runs local or remote at k's coordinator until it succeeds, fails
// for good or ctx ends.
func (c *Client) retry(ctx context.Context, k share.Key, local func() error, remote func(*peer.Conn) error) error {
	backoff := 20 * time.Millisecond
	for {
		err := c.once(ctx, k, local, remote)
		if err == nil || !IsRetriable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

func (c *Client) once(ctx context.Context, k share.Key, local func() error, remote func(*peer.Conn) error) error {
	node, addr, err := c.Route(ctx, k)
	if err != nil {
		return err
	}
	if node == c.Self {
		return local()
	}
	return c.Peers.Do(ctx, addr, remote)
}

// rpcTimeout bounds one request to another coordinator.
const rpcTimeout = 10 * time.Second

func remoteRead(ctx context.Context, conn *peer.Conn, k share.Key, leaderEpoch int32) (share.Snapshot, bool, error) {
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = k.Group
	t := kmsg.NewReadShareGroupStateRequestTopic()
	t.TopicID = k.TopicID
	p := kmsg.NewReadShareGroupStateRequestTopicPartition()
	p.Partition, p.LeaderEpoch = k.Partition, leaderEpoch
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	raw, err := conn.Request(ctx, req, rpcTimeout)
	if err != nil {
		return share.Snapshot{}, false, err
	}
	resp := raw.(*kmsg.ReadShareGroupStateResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return share.Snapshot{}, false, fmt.Errorf("%w: ReadShareGroupState response without the partition", kerr.UnknownServerError)
	}
	rp := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		return share.Snapshot{}, false, err
	}
	if rp.StartOffset < 0 {
		return share.Snapshot{StateEpoch: rp.StateEpoch}, false, nil
	}
	return ReadResponseSnapshot(rp), true, nil
}

func remoteWrite(ctx context.Context, conn *peer.Conn, k share.Key, u share.Update) error {
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = k.Group
	t := kmsg.NewWriteShareGroupStateRequestTopic()
	t.TopicID = k.TopicID
	t.Partitions = append(t.Partitions, WriteRequestPartition(k.Partition, u))
	req.Topics = append(req.Topics, t)
	raw, err := conn.Request(ctx, req, rpcTimeout)
	if err != nil {
		return err
	}
	resp := raw.(*kmsg.WriteShareGroupStateResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("%w: WriteShareGroupState response without the partition", kerr.UnknownServerError)
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

func remoteInitialize(ctx context.Context, conn *peer.Conn, k share.Key, start int64) error {
	req := kmsg.NewPtrInitializeShareGroupStateRequest()
	req.GroupID = k.Group
	t := kmsg.NewInitializeShareGroupStateRequestTopic()
	t.TopicID = k.TopicID
	p := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
	p.Partition, p.StartOffset = k.Partition, start
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	raw, err := conn.Request(ctx, req, rpcTimeout)
	if err != nil {
		return err
	}
	resp := raw.(*kmsg.InitializeShareGroupStateResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("%w: InitializeShareGroupState response without the partition", kerr.UnknownServerError)
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

func remoteDelete(ctx context.Context, conn *peer.Conn, k share.Key) error {
	req := kmsg.NewPtrDeleteShareGroupStateRequest()
	req.GroupID = k.Group
	t := kmsg.NewDeleteShareGroupStateRequestTopic()
	t.TopicID = k.TopicID
	p := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
	p.Partition = k.Partition
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	raw, err := conn.Request(ctx, req, rpcTimeout)
	if err != nil {
		return err
	}
	resp := raw.(*kmsg.DeleteShareGroupStateResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("%w: DeleteShareGroupState response without the partition", kerr.UnknownServerError)
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// --- wire forms ------------------------------------------------------

// WriteRequestPartition is u as a WriteShareGroupState partition (Berth's
// fields in each state batch's tags).
func WriteRequestPartition(partition int32, u share.Update) kmsg.WriteShareGroupStateRequestTopicPartition {
	p := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	p.Partition, p.StateEpoch, p.LeaderEpoch, p.StartOffset = partition, u.StateEpoch, u.LeaderEpoch, u.StartOffset
	p.DeliveryCompleteCount = u.DeliveryCompleteCount
	for _, b := range u.StateBatches {
		wb := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
		wb.FirstOffset, wb.LastOffset, wb.DeliveryState, wb.DeliveryCount = b.FirstOffset, b.LastOffset, b.DeliveryState, b.DeliveryCount
		wb.UnknownTags = b.BerthTags()
		p.StateBatches = append(p.StateBatches, wb)
	}
	return p
}

// WriteRequestUpdate is the update a WriteShareGroupState partition
// carries.
func WriteRequestUpdate(p kmsg.WriteShareGroupStateRequestTopicPartition) share.Update {
	u := share.Update{StateEpoch: p.StateEpoch, LeaderEpoch: p.LeaderEpoch, StartOffset: p.StartOffset,
		DeliveryCompleteCount: p.DeliveryCompleteCount}
	for _, wb := range p.StateBatches {
		b := share.StateBatch{FirstOffset: wb.FirstOffset, LastOffset: wb.LastOffset, DeliveryState: wb.DeliveryState, DeliveryCount: wb.DeliveryCount}
		b.SetBerthTags(wb.UnknownTags)
		u.StateBatches = append(u.StateBatches, b)
	}
	return u
}

// SetReadResponse fills a ReadShareGroupState partition from s (ok false:
// no state, start offset -1).
func SetReadResponse(rp *kmsg.ReadShareGroupStateResponseTopicPartition, s share.Snapshot, ok bool) {
	if !ok {
		rp.StateEpoch, rp.StartOffset = s.StateEpoch, -1
		return
	}
	rp.StateEpoch, rp.StartOffset = s.StateEpoch, s.StartOffset
	for _, b := range s.StateBatches {
		rb := kmsg.NewReadShareGroupStateResponseTopicPartitionStateBatch()
		rb.FirstOffset, rb.LastOffset, rb.DeliveryState, rb.DeliveryCount = b.FirstOffset, b.LastOffset, b.DeliveryState, b.DeliveryCount
		rb.UnknownTags = b.BerthTags()
		rp.StateBatches = append(rp.StateBatches, rb)
	}
	rp.UnknownTags.Set(tagLeaderEpoch, appendInt32(nil, s.LeaderEpoch))
}

// ReadResponseSnapshot is the state a ReadShareGroupState partition
// carries.
func ReadResponseSnapshot(rp kmsg.ReadShareGroupStateResponseTopicPartition) share.Snapshot {
	s := share.Snapshot{StateEpoch: rp.StateEpoch, StartOffset: rp.StartOffset}
	for _, rb := range rp.StateBatches {
		b := share.StateBatch{FirstOffset: rb.FirstOffset, LastOffset: rb.LastOffset, DeliveryState: rb.DeliveryState, DeliveryCount: rb.DeliveryCount}
		b.SetBerthTags(rb.UnknownTags)
		s.StateBatches = append(s.StateBatches, b)
	}
	rp.UnknownTags.Each(func(tag uint32, v []byte) {
		if tag == tagLeaderEpoch && len(v) == 4 {
			s.LeaderEpoch = int32(uint32(v[0])<<24 | uint32(v[1])<<16 | uint32(v[2])<<8 | uint32(v[3]))
		}
	})
	return s
}

// tagLeaderEpoch is Berth's tag on a ReadShareGroupState partition: the
// leader epoch of the last write.
const tagLeaderEpoch = 1000

func appendInt32(dst []byte, v int32) []byte {
	return append(dst, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// topicPartitions is one topic's partitions of a request.
type topicPartitions struct {
	id         [16]byte
	partitions []int32
}

// byTopic groups keys by topic, topics in the order they first appear and
// partitions in key order, as the state RPCs carry them.
func byTopic(ks []share.Key) []topicPartitions {
	var out []topicPartitions
	at := map[[16]byte]int{}
	for _, k := range ks {
		i, ok := at[k.TopicID]
		if !ok {
			out = append(out, topicPartitions{id: k.TopicID})
			i = len(out) - 1
			at[k.TopicID] = i
		}
		out[i].partitions = append(out[i].partitions, k.Partition)
	}
	return out
}
