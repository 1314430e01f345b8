package group

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestConsumerKeyBytes(t *testing.T) {
	got := consumerMemberKey(recConsumerCurrent, "g", "m")
	if want := []byte{0, 8, 0, 1, 'g', 0, 1, 'm'}; !bytes.Equal(got, want) {
		t.Fatalf("key = %v, want %v", got, want)
	}
	k, err := decodeKey(got)
	if err != nil || k.typ != recConsumerCurrent || k.group != "g" || k.member != "m" {
		t.Fatalf("decoded %+v, %v", k, err)
	}
	k, err = decodeKey(consumerGroupKey(recConsumerMetadata, "grp"))
	if err != nil || k.typ != recConsumerMetadata || k.group != "grp" || k.member != "" {
		t.Fatalf("decoded %+v, %v", k, err)
	}
}

// The value layouts, byte by byte, as Kafka's generated code writes them:
// an int16 version, compact (length+1 uvarint) strings and arrays, and a
// trailing tag buffer.
func TestConsumerValueBytes(t *testing.T) {
	if got, want := epochValue(5), []byte{0, 0, 0, 0, 0, 5, 0}; !bytes.Equal(got, want) {
		t.Fatalf("epoch value = %v, want %v", got, want)
	}
	a := "uniform"
	v := memberMetaValue{clientID: "c", clientHost: "h", topics: []string{"t"}, rebalanceTimeoutMs: 1000, assignor: &a}
	want := []byte{0, 0, // version
		0, 0, // instance id, rack id: null
		2, 'c', 2, 'h', // client id, host
		2, 2, 't', // topics
		0,             // regex: null
		0, 0, 3, 0xe8, // rebalance timeout
		8, 'u', 'n', 'i', 'f', 'o', 'r', 'm',
		0} // tags
	if got := v.appendTo(nil); !bytes.Equal(got, want) {
		t.Fatalf("member value = %v, want %v", got, want)
	}
	var id [16]byte
	id[15] = 9
	cur := currentValue{epoch: 3, prevEpoch: 2, state: memberUnrevoked, assigned: assignment{id: {1}}, revoking: assignment{}}
	want = append([]byte{0, 0, 0, 0, 0, 3, 0, 0, 0, 2, 1, 2}, id[:]...)
	want = append(want, 2, 0, 0, 0, 1, 0, 1, 0)
	if got := cur.appendTo(nil); !bytes.Equal(got, want) {
		t.Fatalf("current value = %v, want %v", got, want)
	}
}

func TestConsumerValuesRoundTrip(t *testing.T) {
	inst, re := "i", "t.*"
	m := memberMetaValue{instanceID: &inst, clientID: "c", clientHost: "/h", topics: []string{"a", "b"}, regex: &re, rebalanceTimeoutMs: 30000}
	back, err := decodeMemberMetaValue(m.appendTo(nil))
	if err != nil || *back.instanceID != "i" || back.rackID != nil || back.clientHost != "/h" ||
		!slices.Equal(back.topics, m.topics) || *back.regex != re || back.rebalanceTimeoutMs != 30000 || back.assignor != nil {
		t.Fatalf("member: %+v, %v", back, err)
	}
	var x, y [16]byte
	x[0], y[0] = 1, 2
	a := assignment{x: {0, 3}, y: {1}}
	ta, err := decodeTargetValue(targetValue(a))
	if err != nil || !ta.equal(a) {
		t.Fatalf("target: %v, %v", ta, err)
	}
	cur := currentValue{epoch: 7, prevEpoch: 6, state: memberUnreleased, assigned: a, revoking: assignment{y: {4}}}
	cb, err := decodeCurrentValue(cur.appendTo(nil))
	if err != nil || cb.epoch != 7 || cb.prevEpoch != 6 || cb.state != memberUnreleased || !cb.assigned.equal(a) || !cb.revoking.equal(cur.revoking) {
		t.Fatalf("current: %+v, %v", cb, err)
	}
	// Tagged fields Kafka added later (MetadataHash here) are skipped.
	tagged := []byte{0, 0, 0, 0, 0, 5, 1, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8}
	if e, err := decodeEpochValue(tagged); err != nil || e != 5 {
		t.Fatalf("tagged epoch value: %d, %v", e, err)
	}
	for _, bad := range [][]byte{{0, 1, 0, 0, 0, 5, 0}, {0, 0, 0, 0}, {0, 0, 0, 0, 0, 5, 1, 0, 9, 1}} {
		if _, err := decodeEpochValue(bad); err == nil {
			t.Fatalf("decoded %v", bad)
		}
	}
}

// The uniform assignor gives every partition of a subscribed topic to
// exactly one subscriber, balances members with the same subscription
// within one partition, and keeps what members had when one joins.
func TestAssignUniform(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 300; iter++ {
		var topics []topicMeta
		for i := range 1 + rng.IntN(4) {
			var id [16]byte
			id[0] = byte(i + 1)
			topics = append(topics, topicMeta{name: fmt.Sprintf("t%d", i), id: id, partitions: int32(1 + rng.IntN(12))})
		}
		homogeneous := rng.IntN(2) == 0
		var members []assignMember
		for i := range 1 + rng.IntN(6) {
			m := assignMember{id: fmt.Sprintf("m%d", i), topics: map[string]bool{}}
			for _, tm := range topics {
				if homogeneous || rng.IntN(2) == 0 {
					m.topics[tm.name] = true
				}
			}
			members = append(members, m)
		}
		out := assignUniform(members, topics, nil)
		checkAssignment(t, members, topics, out)
		if homogeneous {
			loads := make([]int, 0, len(members))
			for _, m := range members {
				loads = append(loads, out[m.id].count())
			}
			if slices.Max(loads)-slices.Min(loads) > 1 {
				t.Fatalf("iter %d: unbalanced %v", iter, loads)
			}
			// A new member: the others keep at least their new quota of
			// what they had.
			nm := assignMember{id: "m9", topics: members[0].topics}
			after := assignUniform(append(slices.Clone(members), nm), topics, out)
			total := 0
			for _, tm := range topics {
				total += int(tm.partitions)
			}
			quota := total / (len(members) + 1)
			for _, m := range members {
				kept := 0
				out[m.id].each(func(id [16]byte, p int32) {
					if after[m.id].has(id, p) {
						kept++
					}
				})
				if kept < min(quota, out[m.id].count()) {
					t.Fatalf("iter %d: %s kept %d of %v, quota %d", iter, m.id, kept, out[m.id], quota)
				}
			}
		}
	}
}

func checkAssignment(t *testing.T, members []assignMember, topics []topicMeta, out map[string]assignment) {
	t.Helper()
	owner := map[tpid]string{}
	for _, m := range members {
		out[m.id].each(func(id [16]byte, p int32) {
			if o, dup := owner[tpid{id, p}]; dup {
				t.Fatalf("partition %v/%d given to %s and %s", id[0], p, o, m.id)
			}
			owner[tpid{id, p}] = m.id
		})
	}
	for _, tm := range topics {
		subscribed := slices.ContainsFunc(members, func(m assignMember) bool { return m.topics[tm.name] })
		for p := range tm.partitions {
			o, ok := owner[tpid{tm.id, p}]
			switch {
			case subscribed && !ok:
				t.Fatalf("%s/%d unassigned", tm.name, p)
			case ok && !slices.ContainsFunc(members, func(m assignMember) bool { return m.id == o && m.topics[tm.name] }):
				t.Fatalf("%s/%d given to %s, not a subscriber", tm.name, p, o)
			}
		}
	}
}

func TestAssignRange(t *testing.T) {
	var a, b [16]byte
	a[0], b[0] = 1, 2
	topics := []topicMeta{{name: "a", id: a, partitions: 5}, {name: "b", id: b, partitions: 5}}
	both := map[string]bool{"a": true, "b": true}
	members := []assignMember{{id: "x", topics: both}, {id: "y", topics: both}, {id: "z", topics: map[string]bool{"a": true}}}
	out := assignRange(members, topics)
	checkAssignment(t, members, topics, out)
	// a: x 0-1, y 2-3, z 4; b (x and y only): x 0-2, y 3-4.
	want := map[string]assignment{"x": {a: {0, 1}, b: {0, 1, 2}}, "y": {a: {2, 3}, b: {3, 4}}, "z": {a: {4}}}
	for id, w := range want {
		if !out[id].equal(w) {
			t.Fatalf("%s: %v, want %v", id, out[id], w)
		}
	}
}

// simClient is a KIP-848 client as the protocol expects one to behave:
// it starts consuming what it is newly assigned at once, and stops
// consuming revoked partitions before it reports it no longer owns them.
type simClient struct {
	id        string
	instance  *string // a static member's
	restarts  int
	epoch     int32
	joined    bool
	consuming assignment // what it fetches from
	revoke    assignment // assigned away, still consumed until acked
}

// TestConsumerGroupModel drives a group with random joins, leaves,
// keepalives and acknowledgements, checking after every answer that no
// partition is consumed by two members, then that the group settles with
// every partition consumed once.
func TestConsumerGroupModel(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, seed) })
	}
}

func runModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	topics := fakeTopics{"t": 7, "u": 3}
	now := epoch
	c := New(Config{Logger: quietLogger(), Now: func() time.Time { return now }}, newFakeStore(), topics)
	ownAll(c)
	assignors := []string{"uniform", "range"}
	assignor := assignors[rng.IntN(2)]
	clients := make([]*simClient, 5)
	for i := range clients {
		clients[i] = &simClient{id: fmt.Sprintf("m%d", i)}
		if i%2 == 1 {
			clients[i].instance = ptr(fmt.Sprintf("i%d", i))
		}
	}
	heartbeat := func(cl *simClient, kind string) {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch, req.Version = "g", cl.id, cl.epoch, 1
		full := func() {
			req.InstanceID = cl.instance
			req.RebalanceTimeoutMillis = 30000
			req.SubscribedTopicNames = []string{"t", "u"}
			req.ServerAssignor = &assignor
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		switch kind {
		case "join":
			req.MemberEpoch = 0
			full()
			cl.consuming, cl.revoke = make(assignment), make(assignment)
		case "leave":
			req.MemberEpoch = leaveEpoch
		case "static-leave":
			req.MemberEpoch = staticLeaveEpoch
		case "ack":
			full()
			for id, ps := range cl.revoke {
				for _, p := range ps {
					cl.consuming[id] = slices.DeleteFunc(cl.consuming[id], func(q int32) bool { return q == p })
					if len(cl.consuming[id]) == 0 {
						delete(cl.consuming, id)
					}
				}
			}
			cl.revoke = make(assignment)
			for _, id := range cl.consuming.topicIDs() {
				req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: id, Partitions: slices.Clone(cl.consuming[id])})
			}
		}
		var resp *kmsg.ConsumerGroupHeartbeatResponse
		c.ConsumerGroupHeartbeat(req, cl.id, "h", func(r *kmsg.ConsumerGroupHeartbeatResponse) { resp = r })
		if resp == nil {
			t.Fatalf("%s %s: no answer", cl.id, kind)
		}
		switch {
		case kind == "leave" || kind == "static-leave":
			// A static member that left restarts under a new member id.
			cl.joined, cl.consuming, cl.revoke = false, nil, nil
			if kind == "static-leave" {
				cl.restarts++
				cl.id = fmt.Sprintf("m%s-%d", *cl.instance, cl.restarts)
			}
			return
		case resp.ErrorCode != 0:
			t.Fatalf("%s %s: error %d", cl.id, kind, resp.ErrorCode)
		}
		cl.joined, cl.epoch = true, resp.MemberEpoch
		if resp.Assignment == nil {
			return
		}
		a := make(assignment)
		for _, tp := range resp.Assignment.Topics {
			for _, p := range tp.Partitions {
				a.add(tp.TopicID, p)
			}
		}
		a.each(cl.consuming.add)
		cl.consuming.each(func(id [16]byte, p int32) {
			if !a.has(id, p) {
				cl.revoke.add(id, p)
			}
		})
		// Safety: nobody consumes a partition another member does.
		seen := map[tpid]string{}
		for _, o := range clients {
			o.consuming.each(func(id [16]byte, p int32) {
				if other, dup := seen[tpid{id, p}]; dup {
					t.Fatalf("after %s %s: %s/%d consumed by %s and %s", cl.id, kind, topicOf(id), p, other, o.id)
				}
				seen[tpid{id, p}] = o.id
			})
		}
	}
	for step := 0; step < 150; step++ {
		cl := clients[rng.IntN(len(clients))]
		switch r := rng.IntN(10); {
		case !cl.joined && r < 5:
			heartbeat(cl, "join")
		case !cl.joined:
		case r == 0 && cl.instance != nil && rng.IntN(2) == 0:
			heartbeat(cl, "static-leave")
		case r == 0:
			heartbeat(cl, "leave")
		case r < 5:
			heartbeat(cl, "keepalive")
		default:
			heartbeat(cl, "ack")
		}
		now = now.Add(100 * time.Millisecond)
	}
	// Liveness: members that keep acknowledging settle (static members
	// that left come back first).
	for _, cl := range clients {
		if !cl.joined && cl.restarts > 0 {
			heartbeat(cl, "join")
		}
	}
	for round := 0; round < 10; round++ {
		for _, cl := range clients {
			if cl.joined {
				heartbeat(cl, "ack")
			}
		}
	}
	g, _ := c.acquire("g", false)
	if g == nil {
		return
	}
	defer g.mu.Unlock()
	if st := g.stateName(); st != "Stable" && st != "Empty" {
		t.Fatalf("group %s after settling", st)
	}
	total := 0
	for _, cl := range clients {
		if !cl.joined {
			continue
		}
		total += cl.consuming.count()
		if m := g.cg.members[cl.id]; m == nil || !m.assigned.equal(cl.consuming) || len(cl.revoke) > 0 {
			t.Fatalf("%s consumes %v, server has %+v", cl.id, cl.consuming, m)
		}
	}
	if total != 10 && len(g.cg.members) > 0 {
		t.Fatalf("%d of 10 partitions consumed", total)
	}
}
