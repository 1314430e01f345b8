package group

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Datadriven commands for share groups (KIP-932):
//
//	shb member=a [join|leave] [epoch=N] [id=X|noid] [v=1] [topics=(t,u)]
//	    [rack=r] [group=g] [client=a]
//	sdescribe [groups=(g,h)]
//	screate [group=g]   AlterShareGroupOffsets' group check (CreateShareGroup)
//
// A member's id is its alias unless id= or, for a v0 join, noid (the
// coordinator names it). A heartbeat sends the alias's last epoch (epoch=
// overrides); join sends 0 and leave -1. Removed members (left, session
// expired) are printed as the coordinator reports them to
// Config.OnShareMembersRemoved.
func (h *harness) runShare(d *datadriven.TestData) bool {
	switch d.Cmd {
	case "shb":
		h.shareHeartbeat(d)
	case "screate":
		group := h.arg(d, "group", "g")
		h.c.CreateShareGroup(group, func(n int, c int16, msg string) {
			if msg != "" {
				msg = " " + msg
			}
			h.printf("screate %s: %s members=%d%s", group, code(c), n, msg)
		})
	case "sdescribe":
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.Version = int16(h.int(d, "v", 1))
		req.GroupIDs = h.args(d, "groups")
		if req.GroupIDs == nil {
			req.GroupIDs = []string{"g"}
		}
		for _, g := range h.c.ShareGroupDescribe(req).Groups {
			if g.ErrorCode != 0 {
				msg := ""
				if g.ErrorMessage != nil {
					msg = " " + *g.ErrorMessage
				}
				h.printf("sdescribe %s: %s%s", g.GroupID, code(g.ErrorCode), msg)
				continue
			}
			h.printf("sdescribe %s: NONE state=%s epoch=%d assignment-epoch=%d assignor=%s", g.GroupID, g.GroupState, g.GroupEpoch, g.AssignmentEpoch, g.Assignor)
			for _, m := range g.Members {
				var tps []string
				for _, t := range m.Assignment.TopicPartitions {
					for _, p := range t.Partitions {
						tps = append(tps, fmt.Sprintf("%s/%d", t.Topic, p))
					}
				}
				h.printf("  %s epoch=%d client=%s host=%s topics=%s assigned=[%s]", m.MemberID, m.MemberEpoch, m.ClientID, m.ClientHost,
					strings.Join(m.SubscribedTopicNames, ","), strings.Join(tps, " "))
			}
		}
	default:
		return false
	}
	return true
}

func (h *harness) shareHeartbeat(d *datadriven.TestData) {
	alias := h.arg(d, "member", "")
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version = int16(h.int(d, "v", 1))
	req.GroupID = h.arg(d, "group", "g")
	req.MemberID = h.memberID(d, alias)
	if d.HasArg("noid") {
		req.MemberID = ""
	}
	switch {
	case d.HasArg("join"):
		req.MemberEpoch = 0
	case d.HasArg("leave"):
		req.MemberEpoch = -1
	default:
		req.MemberEpoch = h.gen(d, alias, 0)
	}
	if d.HasArg("epoch") {
		req.MemberEpoch = int32(h.int(d, "epoch", 0))
	}
	if d.HasArg("topics") {
		req.SubscribedTopicNames = h.args(d, "topics")
	}
	if d.HasArg("rack") {
		req.RackID = ptr(h.arg(d, "rack", ""))
	}
	client := h.arg(d, "client", alias)
	h.c.ShareGroupHeartbeat(req, client, "/127.0.0.1", func(resp *kmsg.ShareGroupHeartbeatResponse) {
		if resp.ErrorCode != 0 {
			msg := ""
			if resp.ErrorMessage != nil {
				msg = " " + *resp.ErrorMessage
			}
			h.printf("shb %s: %s%s", alias, code(resp.ErrorCode), msg)
			return
		}
		h.mu.Lock()
		if resp.MemberID != nil {
			h.members[alias] = *resp.MemberID
		}
		h.gens[alias] = resp.MemberEpoch
		h.mu.Unlock()
		out := fmt.Sprintf("shb %s: NONE epoch=%d interval=%dms", alias, resp.MemberEpoch, resp.HeartbeatIntervalMillis)
		if d.HasArg("noid") && resp.MemberID != nil {
			out += " id=" + *resp.MemberID
		}
		if resp.Assignment != nil {
			a := make(shareAssignment)
			for _, t := range resp.Assignment.TopicPartitions {
				a[t.TopicID] = t.Partitions
			}
			out += " assigned=" + shareTPs(a)
		}
		h.printf("%s", out)
	})
}

// shareTPs prints an assignment with fakeTopics' names.
func shareTPs(a shareAssignment) string {
	var tps []string
	for _, id := range a.TopicIDs() {
		for _, p := range a[id] {
			tps = append(tps, fmt.Sprintf("%s/%d", strings.TrimRight(string(id[:]), "\x00"), p))
		}
	}
	slices.Sort(tps)
	return "[" + strings.Join(tps, " ") + "]"
}

// printShareState prints a locked share group.
func (h *harness) printShareState(g *group) {
	sg := g.sh.sg
	h.printf("%s: share %s epoch=%d assignment-epoch=%d rebalances=%d inflight=%d dirty=%v", g.id, g.stateName(), sg.Epoch(), sg.AssignmentEpoch(), g.rebalances, g.sh.inflight, g.sh.dirty)
	for _, id := range sg.MemberIDs() {
		h.printf("  member %s assigned=%s", id, shareTPs(sg.Assigned(id)))
	}
}

// shareRecord names a share group record: its type, group and whether it
// is a tombstone.
func shareRecord(r Record) string {
	names := map[int16]string{10: "member", 11: "metadata", 12: "target-epoch", 13: "target", 14: "current"}
	typ := int16(r.Key[0])<<8 | int16(r.Key[1])
	gid, err := shareRecordGroupID(r.Key)
	if err != nil {
		return err.Error()
	}
	what := "value"
	if r.Value == nil {
		what = "tombstone"
	}
	return fmt.Sprintf("share %s %s %s", names[typ], gid, what)
}
