package group

// The "simple" share group assignor (KIP-932's SimpleAssignor, the only
// server-side assignor of share groups). Unlike a consumer group's, a
// share group's partition may be assigned to several members at once:
// the share partition hands each member its own records. The assignor
// balances partitions over members, and when there are more members than
// partitions it assigns each partition to several of them.
//
// The rules, per pool of partitions:
//
//   - sharing = ceil(members / partitions): how many members each partition
//     gets (1 while there are at least as many partitions as members);
//   - the sharing * partitions slots are split over the members, each
//     getting floor(slots/members) or one more (the extra ones go to the
//     members that held the most, then by member id);
//   - each member keeps what it had (in partition order; members that had
//     fewer first) while it is within its quota and the partition within
//     its sharing; then each
//     member, in member id order, takes the least-shared partitions it
//     does not hold until it has its quota. Every partition ends with
//     exactly `sharing` members and every member within one of the others.
//
// A pool is every subscribed partition when all members subscribe to the
// same topics (Kafka's homogeneous builder), otherwise one pool per topic
// with its own subscribers (Kafka's heterogeneous builder: a member
// subscribed to two topics gets its share of each, so totals across
// topics are balanced per topic, not overall).
//
// The result depends only on the members, their subscriptions, the
// topics and the current assignment, never on map order.

import (
	"bytes"
	"cmp"
	"maps"
	"slices"
)

// shareAssignorName is the name ShareGroupDescribe reports.
const shareAssignorName = "simple"

// shareAssignment is a set of partitions by topic id. Partitions are
// sorted and unique, and a topic present has at least one partition.
type shareAssignment map[[16]byte][]int32

// shareTopic is a topic as the group sees it: its name, id and partition
// count.
type shareTopic struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// shareAssignMember is a member as the assignor sees it: its id and the names
// of the topics it subscribes to (topics that do not exist are ignored).
type shareAssignMember struct {
	ID     string
	Topics []string
}

// assignShareSimple computes the target assignment of every member (each gets
// an entry, possibly empty). topics are the subscribed topics that exist;
// current is the assignment now (the previous target), for stickiness;
// entries of members no longer present, topics gone and partitions beyond
// a topic's count are ignored.
func assignShareSimple(members []shareAssignMember, topics []shareTopic, current map[string]shareAssignment) map[string]shareAssignment {
	ms := slices.Clone(members)
	slices.SortFunc(ms, func(a, b shareAssignMember) int { return cmp.Compare(a.ID, b.ID) })
	ms = slices.CompactFunc(ms, func(a, b shareAssignMember) bool { return a.ID == b.ID })
	ts := slices.Clone(topics)
	slices.SortFunc(ts, func(a, b shareTopic) int { return cmp.Compare(a.Name, b.Name) })
	ts = slices.CompactFunc(ts, func(a, b shareTopic) bool { return a.Name == b.Name })

	out := make(map[string]shareAssignment, len(ms))
	for _, m := range ms {
		out[m.ID] = make(shareAssignment)
	}
	// subs[i]: the indexes (into ts) of the topics member i subscribes to.
	byName := make(map[string]int, len(ts))
	for i, t := range ts {
		byName[t.Name] = i
	}
	subs := make([][]int, len(ms))
	for i, m := range ms {
		for _, name := range m.Topics {
			if j, ok := byName[name]; ok && ts[j].Partitions > 0 {
				subs[i] = append(subs[i], j)
			}
		}
		slices.Sort(subs[i])
		subs[i] = slices.Compact(subs[i])
	}
	homogeneous := true
	for i := range subs {
		if !slices.Equal(subs[i], subs[0]) {
			homogeneous = false
			break
		}
	}
	pool := func(topicIdx []int, memberIdx []int) {
		var parts []shareAssignTP
		for _, j := range topicIdx {
			for p := int32(0); p < ts[j].Partitions; p++ {
				parts = append(parts, shareAssignTP{ts[j].ID, p})
			}
		}
		ids := make([]string, len(memberIdx))
		for k, i := range memberIdx {
			ids[k] = ms[i].ID
		}
		assignSharePool(parts, ids, current, out)
	}
	if homogeneous {
		if len(ms) > 0 {
			all := make([]int, len(ms))
			for i := range all {
				all[i] = i
			}
			pool(subs[0], all)
		}
		return out
	}
	for j := range ts {
		var memberIdx []int
		for i := range ms {
			if _, ok := slices.BinarySearch(subs[i], j); ok {
				memberIdx = append(memberIdx, i)
			}
		}
		if len(memberIdx) > 0 {
			pool([]int{j}, memberIdx)
		}
	}
	return out
}

// shareAssignTP is a partition by topic id.
type shareAssignTP struct {
	topic     [16]byte
	partition int32
}

// assignSharePool assigns the partitions parts (in order) to the members ids
// (sorted), adding to out.
func assignSharePool(parts []shareAssignTP, ids []string, current map[string]shareAssignment, out map[string]shareAssignment) {
	if len(parts) == 0 || len(ids) == 0 {
		return
	}
	index := make(map[shareAssignTP]int, len(parts))
	for k, tp := range parts {
		index[tp] = k
	}
	nm, np := len(ids), len(parts)
	sharing := (nm + np - 1) / np
	slots := sharing * np
	base, extra := slots/nm, slots%nm

	// What each member holds now, in this pool, in partition order.
	had := make([][]int, nm)
	for i, id := range ids {
		for topic, ps := range current[id] {
			for _, p := range ps {
				if k, ok := index[shareAssignTP{topic, p}]; ok {
					had[i] = append(had[i], k)
				}
			}
		}
		slices.Sort(had[i])
		had[i] = slices.Compact(had[i])
	}

	// Quotas: the extra slots go to the members that held the most.
	quota := make([]int, nm)
	order := make([]int, nm)
	for i := range order {
		order[i] = i
		quota[i] = base
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(had[b]), len(had[a])) })
	for _, i := range order[:extra] {
		quota[i]++
	}

	holders := make([][]int, np) // partition -> members, ascending
	held := make([][]int, nm)    // member -> partitions, ascending
	holds := func(i, k int) bool {
		_, ok := slices.BinarySearch(held[i], k)
		return ok
	}
	give := func(i, k int) {
		j, _ := slices.BinarySearch(held[i], k)
		held[i] = slices.Insert(held[i], j, k)
		j, _ = slices.BinarySearch(holders[k], i)
		holders[k] = slices.Insert(holders[k], j, i)
	}
	take := func(i, k int) {
		j, _ := slices.BinarySearch(held[i], k)
		held[i] = slices.Delete(held[i], j, j+1)
		j, _ = slices.BinarySearch(holders[k], i)
		holders[k] = slices.Delete(holders[k], j, j+1)
	}

	// Keep: members holding fewer first (they have fewer partitions to
	// fall back on), then by id.
	keepOrder := make([]int, nm)
	for i := range keepOrder {
		keepOrder[i] = i
	}
	slices.SortStableFunc(keepOrder, func(a, b int) int { return cmp.Compare(len(had[a]), len(had[b])) })
	for _, i := range keepOrder {
		for _, k := range had[i] {
			if len(held[i]) < quota[i] && len(holders[k]) < sharing {
				give(i, k)
			}
		}
	}
	// Fill: least-shared partitions first, then partition order.
	for i := range ids {
		for len(held[i]) < quota[i] {
			best := -1
			for k := range parts {
				if len(holders[k]) < sharing && !holds(i, k) && (best < 0 || len(holders[k]) < len(holders[best])) {
					best = k
				}
			}
			if best >= 0 {
				give(i, best)
				continue
			}
			// Every partition with room is one member i holds. Some
			// partition q it does not hold is full (i is below a quota
			// that is at most the pool's size), and some member b of q
			// does not hold p (p has fewer members than q, i among
			// them): b moves from q to p and i takes q.
			p := slices.IndexFunc(holders, func(h []int) bool { return len(h) < sharing })
			q := -1
			for k := range parts {
				if !holds(i, k) {
					q = k
					break
				}
			}
			b := -1
			for _, m := range holders[q] {
				if !holds(m, p) {
					b = m
					break
				}
			}
			take(b, q)
			give(b, p)
			give(i, q)
		}
	}
	for i, id := range ids {
		for _, k := range held[i] {
			out[id].add(parts[k].topic, parts[k].partition)
		}
	}
}

// add puts partition p of topic id in a.
func (a shareAssignment) add(id [16]byte, p int32) {
	ps := a[id]
	if i, ok := slices.BinarySearch(ps, p); !ok {
		a[id] = slices.Insert(ps, i, p)
	}
}

// Has reports whether a holds partition p of topic id.
func (a shareAssignment) Has(id [16]byte, p int32) bool {
	_, ok := slices.BinarySearch(a[id], p)
	return ok
}

// Len is the number of partitions in a.
func (a shareAssignment) Len() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// Equal reports whether a and b hold the same partitions.
func (a shareAssignment) Equal(b shareAssignment) bool {
	return maps.EqualFunc(a, b, slices.Equal[[]int32])
}

// Clone returns a deep copy of a (never nil).
func (a shareAssignment) Clone() shareAssignment {
	out := make(shareAssignment, len(a))
	for id, ps := range a {
		out[id] = slices.Clone(ps)
	}
	return out
}

// TopicIDs returns a's topic ids in byte order.
func (a shareAssignment) TopicIDs() [][16]byte {
	ids := slices.Collect(maps.Keys(a))
	slices.SortFunc(ids, func(x, y [16]byte) int { return bytes.Compare(x[:], y[:]) })
	return ids
}
