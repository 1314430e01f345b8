package group

// DeleteGroups (versions 0-3), DescribeGroups (0-6), ListGroups (0-5) and
// the snapshots for metrics and the CLI, for classic, consumer and share
// groups (share groups' own are in share.go).

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups serves a DeleteGroups request: only Empty groups are
// deleted, by tombstones for the group and all its offsets; a share
// group's share-partition state is deleted first (Config.OnShareGroupDelete).
// respond is called once every deletion is durable (or failed).
func (c *Coordinator) DeleteGroups(req *kmsg.DeleteGroupsRequest, respond func(*kmsg.DeleteGroupsResponse)) {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	var (
		mu      sync.Mutex // guards resp's codes and waiting
		waiting = 1        // this call plus one per write
	)
	finish := func() {
		mu.Lock()
		waiting--
		last := waiting == 0
		mu.Unlock()
		if last {
			respond(resp)
		}
	}
	for i, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		resp.Groups = append(resp.Groups, rg)
		g, code := c.acquire(id, false)
		if code != 0 || g == nil {
			if code == 0 {
				code = kerr.GroupIDNotFound.Code
			}
			resp.Groups[i].ErrorCode = code
			continue
		}
		var f fx
		switch {
		case g.state == stateDead:
			resp.Groups[i].ErrorCode = kerr.GroupIDNotFound.Code
		case g.isShare(), g.state == stateEmpty:
			var recs []Record
			if g.isShare() {
				var code int16
				if recs, code = c.deleteShare(g); code != 0 {
					resp.Groups[i].ErrorCode = code
					break
				}
			} else {
				recs = c.deleteGroup(g)
			}
			mu.Lock()
			waiting++
			mu.Unlock()
			i := i
			// written ends the deletion: code is the group's answer when
			// the deletion failed before the tombstones (0: err decides).
			written := func(err error, code int16) {
				g.mu.Lock()
				g.deleting = false
				if err != nil {
					// Not deleted after all.
					if code == 0 {
						c.log.Warn("writing group tombstones failed", "group", g.id, "err", err)
					}
					if g.state == stateDead && !g.removed {
						if g.isShare() {
							g.sh.sg.UndoDelete()
						}
						g.state = stateEmpty
					}
				}
				g.mu.Unlock()
				if err == nil {
					c.reap(g)
				}
				mu.Lock()
				if err != nil {
					if code == 0 {
						code = storeErrorCode(err, false)
					}
					resp.Groups[i].ErrorCode = code
				}
				mu.Unlock()
				finish()
			}
			writeTombstones := func() { c.write(g.partition, recs, func(err error) { written(err, 0) }) }
			if hook := c.cfg.OnShareGroupDelete; g.isShare() && hook != nil {
				id := g.id
				f.add(func() {
					hook(id, func(err error) {
						if err != nil {
							c.log.Warn("deleting share group state failed; the group is kept", "group", id, "err", err)
							written(err, kerr.CoordinatorNotAvailable.Code)
							return
						}
						writeTombstones()
						c.flush()
					})
				})
				break
			}
			writeTombstones()
		default:
			resp.Groups[i].ErrorCode = kerr.NonEmptyGroup.Code
		}
		c.release(g, &f)
	}
	finish()
}

// deleteGroup marks g Dead until its tombstones are durable, and returns
// them: one per offset (including commits still in flight) and the
// group's.
func (c *Coordinator) deleteGroup(g *group) []Record {
	g.state = stateDead
	g.deleting = true
	tps := make(map[topicPartition]bool)
	for tp := range g.offsets {
		tps[tp] = true
	}
	for tp := range g.pendingCommits {
		tps[tp] = true
	}
	var recs []Record
	for _, tp := range slices.SortedFunc(maps.Keys(tps), compareTP) {
		recs = append(recs, offsetTombstone(g.id, tp))
	}
	c.log.Info("deleting group", "group", g.id, "offsets", len(tps))
	if g.isConsumer() {
		return append(recs, g.cg.tombstones(g.id)...)
	}
	return append(recs, groupTombstone(g.id))
}

// DescribeGroups serves a DescribeGroups request. Members carry their
// metadata and assignment only while the group is Stable, as in Kafka.
// A consumer group is described as Kafka's ConsumerGroup.asDescribedGroup
// does: protocol type "consumer", its assignor as the protocol, and each
// member's subscription and assignment in the consumer protocol's
// encoding.
func (c *Coordinator) DescribeGroups(req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = id
		g, code := c.acquire(id, false)
		switch {
		case code != 0:
			rg.ErrorCode = code
		case g == nil || g.isShare():
			// A share group is not a classic group: Kafka answers as
			// for a group that does not exist.
			if g != nil {
				g.mu.Unlock()
			}
			rg.State = stateDead.String()
			if req.Version >= 6 { // KIP-1043
				rg.ErrorCode = kerr.GroupIDNotFound.Code
			}
		case g.isConsumer() && g.state != stateDead:
			c.describeConsumerAsClassic(g, &rg)
			g.mu.Unlock()
		default:
			rg.State = g.state.String()
			rg.ProtocolType = g.protocolType
			stable := g.state == stateStable
			if stable {
				rg.Protocol = g.protocol
			}
			for _, m := range g.ordered() {
				rm := kmsg.NewDescribeGroupsResponseGroupMember()
				rm.MemberID, rm.InstanceID = m.id, m.instanceID
				rm.ClientID, rm.ClientHost = m.clientID, m.clientHost
				if stable {
					rm.ProtocolMetadata = m.metadataFor(g.protocol)
					rm.MemberAssignment = m.assignment
				}
				rg.Members = append(rg.Members, rm)
			}
			g.mu.Unlock()
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// ListGroups serves a ListGroups request: the groups of the loaded
// partitions, filtered by state (v4+) and type (v5+: "classic",
// "consumer" or "share"; no filter lists every type). While a partition loads the answer carries
// COORDINATOR_LOAD_IN_PROGRESS.
func (c *Coordinator) ListGroups(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	matches := func(filter []string, v string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ps := range c.parts {
		if ps.loading {
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.groups)) {
		g := c.groups[id]
		g.mu.Lock()
		dead, st, pt, typ := g.state == stateDead, g.stateName(), g.protocolType, g.typeName()
		g.mu.Unlock()
		if dead || (req.Version >= 4 && !matches(req.StatesFilter, st)) || (req.Version >= 5 && !matches(req.TypesFilter, typ)) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = id, pt, st, typ
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// CommittedOffset is one committed offset, for lag metrics and `berth
// group describe`.
type CommittedOffset struct {
	Group, Topic string
	Partition    int32
	Offset       int64
	Metadata     string
	LeaderEpoch  int32
}

// Committed is a snapshot of every committed offset of the loaded groups,
// sorted by group, topic and partition.
func (c *Coordinator) Committed() []CommittedOffset {
	var out []CommittedOffset
	for _, g := range c.snapshot() {
		g.mu.Lock()
		if g.state != stateDead {
			for tp, o := range g.offsets {
				out = append(out, CommittedOffset{Group: g.id, Topic: tp.topic, Partition: tp.partition, Offset: o.offset, Metadata: o.metadata, LeaderEpoch: o.leaderEpoch})
			}
		}
		g.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b CommittedOffset) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// GroupInfo summarises one group.
type GroupInfo struct {
	ID, State, ProtocolType, Protocol string
	Type                              string // "classic", "consumer" (KIP-848; Protocol is its assignor) or "share" (KIP-932)
	Generation                        int32  // a consumer group's epoch
	Members                           int
	Rebalances                        int64 // times it entered PreparingRebalance, or its epoch was bumped, since loaded
}

// Groups is a snapshot of the loaded groups, sorted by id.
func (c *Coordinator) Groups() []GroupInfo {
	var out []GroupInfo
	for _, g := range c.snapshot() {
		g.mu.Lock()
		switch {
		case g.state == stateDead:
		case g.isShare():
			out = append(out, GroupInfo{ID: g.id, State: g.stateName(), ProtocolType: g.protocolType, Protocol: shareAssignorName,
				Type: g.typeName(), Generation: g.sh.sg.Epoch(), Members: g.sh.sg.Len(), Rebalances: g.rebalances})
		case g.isConsumer():
			out = append(out, GroupInfo{ID: g.id, State: g.stateName(), ProtocolType: g.protocolType, Protocol: g.cg.assignor,
				Type: g.typeName(), Generation: g.cg.epoch, Members: len(g.cg.members), Rebalances: g.rebalances})
		default:
			out = append(out, GroupInfo{ID: g.id, State: g.state.String(), ProtocolType: g.protocolType, Protocol: g.protocol,
				Type: g.typeName(), Generation: g.generation, Members: len(g.members), Rebalances: g.rebalances})
		}
		g.mu.Unlock()
	}
	return out
}

// snapshot lists the groups in the map, sorted by id.
func (c *Coordinator) snapshot() []*group {
	c.mu.Lock()
	defer c.mu.Unlock()
	gs := make([]*group, 0, len(c.groups))
	for _, id := range slices.Sorted(maps.Keys(c.groups)) {
		gs = append(gs, c.groups[id])
	}
	return gs
}
