package group

// Share groups (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe,
// session expiry, deletion and loading. The membership state machine is
// shareMembership (pure, no I/O); the coordinator keeps one per share
// group in its group map, beside classic and consumer groups (a group id
// names one group of one type), serializes the calls under the group's
// mu, writes the records each call returns to the group's
// __consumer_offsets partition and answers once they are durable,
// exactly as for KIP-848 consumer groups (persistShare mirrors persist).
//
// Other groups' APIs on a share group answer as Kafka's
// GroupMetadataManager does: JoinGroup INCONSISTENT_GROUP_PROTOCOL;
// SyncGroup, Heartbeat and LeaveGroup UNKNOWN_MEMBER_ID (it has no
// classic members); ConsumerGroupHeartbeat and ConsumerGroupDescribe
// GROUP_ID_NOT_FOUND "Group g is not a consumer group."; DescribeGroups
// as a group that does not exist (Kafka's classicGroup lookup fails).
// The offset APIs (OffsetCommit, OffsetFetch, OffsetDelete) answer
// GROUP_ID_NOT_FOUND, as Kafka's ShareGroup.validateOffset* do: share
// groups keep their progress in __share_group_state, not in committed
// offsets. Offset expiry never deletes a share group (Kafka's
// ShareGroup.shouldExpire is false).

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareProtocolType is the protocol type ListGroups reports for share
// groups (Kafka's ShareGroup.PROTOCOL_TYPE).
const shareProtocolType = "share"

// shareGroup is a share group's state in its group: the membership state
// machine and the write bookkeeping of persistShare. Guarded by the
// group's mu.
type shareGroup struct {
	sg *shareMembership
	// Writes, as consumerGroup's: heartbeats are answered once their
	// records are durable; one without records waits for those in
	// flight (waiters). A failed write leaves memory ahead of the log:
	// dirty makes the next change rewrite the whole group (Snapshot).
	inflight int
	waiters  []func(error)
	dirty    bool
}

// isShare reports whether g is a share group.
func (g *group) isShare() bool { return g.sh != nil }

// shareConfig is the membership config of share group id: the broker's,
// with the group's own session timeout and heartbeat interval
// (share.session.timeout.ms, share.heartbeat.interval.ms) where it has
// them.
func (c *Coordinator) shareConfig(id string) shareGroupConfig {
	cfg := shareGroupConfig{
		SessionTimeout:    c.cfg.ShareSessionTimeout,
		HeartbeatInterval: c.cfg.ShareHeartbeatInterval,
		MaxSize:           c.cfg.ShareMaxGroupSize,
		NewMemberID:       c.cfg.ShareNewMemberID,
	}
	if c.cfg.ShareGroupTimeouts != nil {
		if st, hb := c.cfg.ShareGroupTimeouts(id); st > 0 && hb > 0 && hb < st {
			cfg.SessionTimeout, cfg.HeartbeatInterval = st, hb
		}
	}
	return cfg
}

// groupTopics is the topic view share groups are built with: each
// lookup reads the resolver (the metadata image, a snapshot). It is
// called with the group's lock held, as the resolver allows.
type groupTopics struct{ c *Coordinator }

func (t groupTopics) GroupTopic(name string) (shareTopic, bool) {
	if t.c.topics == nil {
		return shareTopic{}, false
	}
	id, ok := t.c.topics.TopicID(name)
	if !ok {
		return shareTopic{}, false
	}
	for _, ti := range t.c.topics.Topics() {
		if ti.Name == name && ti.ID == id {
			return shareTopic{Name: name, ID: id, Partitions: ti.Partitions}, true
		}
	}
	return shareTopic{}, false
}

// ShareGroupHeartbeat serves a ShareGroupHeartbeat request (versions
// 0-1). respond is called exactly once, once the records the heartbeat
// wrote (if any, or those in flight for the group) are durable; possibly
// from another goroutine.
func (c *Coordinator) ShareGroupHeartbeat(req *kmsg.ShareGroupHeartbeatRequest, clientID, clientHost string, respond func(*kmsg.ShareGroupHeartbeatResponse)) {
	fail := func(code int16, msg string) { respond(shareHeartbeatError(req, code, msg)) }
	if code, msg := checkShareHeartbeat(req); code != 0 {
		fail(code, msg)
		return
	}
	g, code := c.acquire(req.GroupID, req.MemberEpoch == 0)
	if code != 0 {
		fail(code, "")
		return
	}
	if g == nil {
		fail(kerr.GroupIDNotFound.Code, "Share group "+req.GroupID+" not found.")
		return
	}
	var f fx
	defer c.release(g, &f)
	switch {
	case g.state == stateDead && !g.isShare():
		f.add(func() { fail(kerr.CoordinatorNotAvailable.Code, "") })
		return
	case !g.isShare() && !g.blank():
		f.add(func() { fail(kerr.GroupIDNotFound.Code, "Group "+g.id+" is not a share group.") })
		return
	case !g.isShare():
		// A group made by this join (acquire): it becomes a share group.
		g.sh = &shareGroup{sg: newShareMembership(g.id, c.shareConfig(g.id), groupTopics{c})}
		g.protocolType = shareProtocolType
	}
	now := c.cfg.Now()
	g.sh.sg.Reconfigure(c.shareConfig(g.id)) // the group's configs may have changed
	epoch := g.sh.sg.Epoch()
	resp, ch := g.sh.sg.Heartbeat(req, shareClient{ID: clientID, Host: clientHost}, now)
	if resp.ErrorCode != 0 {
		f.add(func() { respond(resp) })
		return
	}
	c.shareChanged(g, ch, epoch, now, &f)
	reply := func(err error) {
		if err != nil {
			c.log.Warn("writing share group records failed", "group", g.id, "err", err)
			fail(storeErrorCode(err, false), "")
			return
		}
		respond(resp)
	}
	sh := g.sh
	switch {
	case len(ch.Records) > 0 || sh.dirty:
		c.persistShare(g, ch.Records, reply)
	case sh.inflight > 0:
		// Answer no earlier than the writes this answer reflects.
		sh.waiters = append(sh.waiters, reply)
	default:
		f.add(func() { respond(resp) })
	}
}

// shareChanged applies what a change means outside the share group: the
// classic state Tick and ListGroups read, the epoch bumps (from epoch),
// and the
// removed members, reported (after locks are released) to
// Config.OnShareMembersRemoved.
func (c *Coordinator) shareChanged(g *group, ch shareChange, epoch int32, now time.Time, f *fx) {
	g.rebalances += int64(g.sh.sg.Epoch() - epoch)
	want := stateStable
	if g.sh.sg.Len() == 0 {
		want = stateEmpty
	}
	if g.state != want && g.state != stateDead {
		g.transition(want, now)
	}
	for _, r := range ch.Removed {
		c.log.Info("removing share group member", "group", g.id, "member", r.MemberID, "reason", r.Reason)
	}
	if len(ch.Removed) > 0 && c.cfg.OnShareMembersRemoved != nil {
		id, removed, hook := g.id, ch.Removed, c.cfg.OnShareMembersRemoved
		f.add(func() { hook(id, removed) })
	}
}

// persistShare queues recs (the whole group instead when an earlier
// write failed) and calls done, with no lock held, once they are durable
// or failed. g is a locked share group.
func (c *Coordinator) persistShare(g *group, recs []Record, done func(error)) {
	sh := g.sh
	if sh.dirty {
		recs = sh.sg.Snapshot()
		sh.dirty = false
	}
	sh.inflight++
	g.persisted = true
	c.write(g.partition, recs, func(err error) {
		g.mu.Lock()
		sh.inflight--
		if err != nil {
			sh.dirty = true
		}
		var ws []func(error)
		if sh.inflight == 0 {
			ws, sh.waiters = sh.waiters, nil
		}
		g.mu.Unlock()
		done(err)
		for _, w := range ws {
			w(err)
		}
	})
}

// tickShare expires the sessions of a share group's members.
func (c *Coordinator) tickShare(g *group, now time.Time, f *fx) {
	g.sh.sg.Reconfigure(c.shareConfig(g.id)) // a changed share.session.timeout.ms applies at once
	if at, ok := g.sh.sg.NextExpiry(); !ok || now.Before(at) {
		return
	}
	epoch := g.sh.sg.Epoch()
	ch := g.sh.sg.Expire(now)
	if len(ch.Records) == 0 && len(ch.Removed) == 0 {
		return
	}
	c.shareChanged(g, ch, epoch, now, f)
	c.persistShare(g, ch.Records, func(err error) {
		if err != nil {
			c.log.Warn("writing share group records failed", "group", g.id, "err", err)
		}
	})
}

// ShareGroupDescribe serves a ShareGroupDescribe request (versions 0-1).
func (c *Coordinator) ShareGroupDescribe(req *kmsg.ShareGroupDescribeRequest) *kmsg.ShareGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, id := range req.GroupIDs {
		g, code := c.acquire(id, false)
		var rg kmsg.ShareGroupDescribeResponseGroup
		switch {
		case code != 0:
			rg = kmsg.NewShareGroupDescribeResponseGroup()
			rg.GroupID, rg.ErrorCode = id, code
		case g == nil:
			rg = shareDescribeNotFound(id, false)
		case !g.isShare():
			rg = shareDescribeNotFound(id, true)
			g.mu.Unlock()
		default:
			rg = g.sh.sg.Describe()
			g.mu.Unlock()
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// loadShareGroup makes g the share group sg (loaded from its records).
func loadShareGroup(g *group, sg *shareMembership) {
	g.sh = &shareGroup{sg: sg}
	g.persisted = true
	g.protocolType = shareProtocolType
	g.state = stateEmpty
	if sg.Len() > 0 {
		g.state = stateStable
	}
}

// deleteShare deletes an empty share group (DeleteGroups): its records'
// tombstones, and (a code) NON_EMPTY_GROUP or GROUP_ID_NOT_FOUND.
func (c *Coordinator) deleteShare(g *group) ([]Record, int16) {
	recs, code := g.sh.sg.Delete()
	if code != 0 {
		return nil, code
	}
	g.state = stateDead
	g.deleting = true
	c.log.Info("deleting share group", "group", g.id)
	return recs, 0
}

// blank reports whether g holds nothing at all: a group just made by
// acquire, or one that would be dropped at the end of the operation.
func (g *group) blank() bool {
	return g.state == stateEmpty && g.generation == 0 && !g.persisted && len(g.members) == 0 &&
		len(g.pending) == 0 && len(g.offsets) == 0 && len(g.pendingCommits) == 0 &&
		(g.cg == nil || (g.cg.epoch == 0 && len(g.cg.members) == 0)) &&
		(g.sh == nil || (!g.sh.sg.Exists() && g.sh.inflight == 0))
}

// ShareMember reports whether member is a member of the share group
// groupID, for ShareFetch and ShareAcknowledge. known is false when this
// coordinator cannot tell (it does not own the group's __consumer_offsets
// partition, or is loading it): the caller then trusts the member, since
// the group's coordinator may be another broker.
func (c *Coordinator) ShareMember(groupID, member string) (ok, known bool) {
	g, code := c.acquire(groupID, false)
	if code != 0 {
		return false, false
	}
	if g == nil {
		return false, true
	}
	defer g.mu.Unlock()
	return g.isShare() && g.sh.sg.HasMember(member), true
}

// IsShareGroup reports whether groupID is a share group, for
// DescribeShareGroupOffsets. known is false when this coordinator cannot
// tell (it does not own the group's __consumer_offsets partition, or is
// loading it).
func (c *Coordinator) IsShareGroup(groupID string) (ok, known bool) {
	g, code := c.acquire(groupID, false)
	if code != 0 {
		return false, false
	}
	if g == nil {
		return false, true
	}
	defer g.mu.Unlock()
	return g.isShare(), true
}

// CreateShareGroup is AlterShareGroupOffsets' group check: a share
// group answers its member count (the caller refuses a group with
// members), and a group id no group has becomes an empty share group,
// durably, first, as Kafka 4.2 does, so that an operator can set a new
// group's start offsets before any consumer joins. A group of another
// type answers GROUP_ID_NOT_FOUND "Group g is not a share group." (as
// Kafka's GroupMetadataManager does for every share group API), one
// being deleted COORDINATOR_NOT_AVAILABLE; NOT_COORDINATOR and
// COORDINATOR_LOAD_IN_PROGRESS when this coordinator cannot tell.
// respond is called exactly once, possibly from another goroutine.
func (c *Coordinator) CreateShareGroup(groupID string, respond func(members int, code int16, msg string)) {
	g, code := c.acquire(groupID, true)
	if code != 0 {
		respond(0, code, "")
		return
	}
	var f fx
	defer c.release(g, &f)
	switch {
	case g.state == stateDead:
		f.add(func() { respond(0, kerr.CoordinatorNotAvailable.Code, "group "+groupID+" is being deleted") })
		return
	case !g.isShare() && !g.blank():
		f.add(func() { respond(0, kerr.GroupIDNotFound.Code, "Group "+groupID+" is not a share group.") })
		return
	case !g.isShare():
		// A group made by this call (acquire): it becomes a share group.
		g.sh = &shareGroup{sg: newShareMembership(g.id, c.shareConfig(g.id), groupTopics{c})}
		g.protocolType = shareProtocolType
	}
	sh, n := g.sh, g.sh.sg.Len()
	now := c.cfg.Now()
	epoch := sh.sg.Epoch()
	ch := sh.sg.Create()
	reply := func(err error) {
		if err != nil {
			c.log.Warn("writing share group records failed", "group", groupID, "err", err)
			respond(0, storeErrorCode(err, false), "")
			return
		}
		respond(n, 0, "")
	}
	switch {
	case len(ch.Records) > 0 || sh.dirty:
		if len(ch.Records) > 0 {
			c.log.Info("creating empty share group", "group", groupID)
		}
		c.shareChanged(g, ch, epoch, now, &f)
		c.persistShare(g, ch.Records, reply)
	case sh.inflight > 0:
		// Answer no earlier than the writes this answer reflects.
		sh.waiters = append(sh.waiters, reply)
	default:
		f.add(func() { respond(n, 0, "") })
	}
}

// ShareGroupMembers reports the number of members of the share group
// groupID, for DeleteShareGroupOffsets (which needs an empty group). ok is false when groupID is not a share group;
// code is NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS when this
// coordinator cannot tell.
func (c *Coordinator) ShareGroupMembers(groupID string) (n int, ok bool, code int16) {
	g, code := c.acquire(groupID, false)
	if code != 0 || g == nil {
		return 0, false, code
	}
	defer g.mu.Unlock()
	if !g.isShare() {
		return 0, false, 0
	}
	return g.sh.sg.Len(), true, 0
}
