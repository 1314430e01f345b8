package group

// Server-side assignors of KIP-848 consumer groups (group.consumer.assignors):
//
//   - uniform: every member gets as many partitions as it can, within one
//     of every other member subscribed to the same topics, and keeps as
//     many of its current target partitions as balance allows. Kafka's
//     UniformAssignor has two builders (homogeneous and heterogeneous
//     subscriptions); this one greedy pass serves both, and is balanced
//     in the homogeneous case; with heterogeneous subscriptions it stops
//     when no single move improves the balance.
//   - range: per topic, its subscribers in member id order get contiguous
//     ranges, the first ones one extra partition; members with the same
//     subscription get the same partitions of co-partitioned topics.
//     Unlike Kafka's, it is not sticky.

import (
	"cmp"
	"slices"
)

// assignMember is a member as the assignors see it.
type assignMember struct {
	id     string
	topics map[string]bool // subscribed topics that exist
}

// assignUniform: members sorted by id, topics by name; prev is the
// current target assignment, for stickiness.
func assignUniform(members []assignMember, topics []topicMeta, prev map[string]assignment) map[string]assignment {
	out := make(map[string]assignment, len(members))
	load := make([]int, len(members))
	for _, m := range members {
		out[m.id] = make(assignment)
	}
	byID := make(map[[16]byte]topicMeta, len(topics))
	for _, t := range topics {
		byID[t.id] = t
	}
	owner := make(map[tpid]int)
	var parts []tpid
	eligible := make(map[[16]byte][]int)
	for _, t := range topics {
		for i, m := range members {
			if m.topics[t.name] {
				eligible[t.id] = append(eligible[t.id], i)
			}
		}
		if len(eligible[t.id]) == 0 {
			continue
		}
		for p := int32(0); p < t.partitions; p++ {
			parts = append(parts, tpid{t.id, p})
		}
	}
	give := func(tp tpid, i int) {
		if o, ok := owner[tp]; ok {
			load[o]--
			ps := out[members[o].id][tp.topic]
			j, _ := slices.BinarySearch(ps, tp.partition)
			ps = slices.Delete(ps, j, j+1)
			if len(ps) == 0 {
				delete(out[members[o].id], tp.topic)
			} else {
				out[members[o].id][tp.topic] = ps
			}
		}
		owner[tp] = i
		load[i]++
		out[members[i].id].add(tp.topic, tp.partition)
	}
	// Keep what each member had, while it still subscribes.
	for i, m := range members {
		prev[m.id].each(func(id [16]byte, p int32) {
			t, ok := byID[id]
			tp := tpid{id, p}
			if _, taken := owner[tp]; ok && !taken && p < t.partitions && m.topics[t.name] {
				give(tp, i)
			}
		})
	}
	leastLoaded := func(tp tpid) int {
		best := -1
		for _, i := range eligible[tp.topic] {
			if best < 0 || load[i] < load[best] {
				best = i
			}
		}
		return best
	}
	for _, tp := range parts {
		if _, ok := owner[tp]; !ok {
			give(tp, leastLoaded(tp))
		}
	}
	// Move partitions from members two or more above another eligible
	// member until no move helps; each move lowers the sum of squared
	// loads, so this ends.
	for moved := true; moved; {
		moved = false
		for _, tp := range parts {
			o, to := owner[tp], leastLoaded(tp)
			if load[o]-load[to] >= 2 {
				give(tp, to)
				moved = true
			}
		}
	}
	return out
}

// assignRange: members sorted by id, topics by name.
func assignRange(members []assignMember, topics []topicMeta) map[string]assignment {
	out := make(map[string]assignment, len(members))
	for _, m := range members {
		out[m.id] = make(assignment)
	}
	for _, t := range topics {
		var subs []assignMember
		for _, m := range members {
			if m.topics[t.name] {
				subs = append(subs, m)
			}
		}
		if len(subs) == 0 {
			continue
		}
		slices.SortFunc(subs, func(a, b assignMember) int { return cmp.Compare(a.id, b.id) })
		n := int32(len(subs))
		per, extra := t.partitions/n, t.partitions%n
		start := int32(0)
		for i, m := range subs {
			cnt := per
			if int32(i) < extra {
				cnt++
			}
			for p := start; p < start+cnt; p++ {
				out[m.id].add(t.id, p)
			}
			start += cnt
		}
	}
	return out
}
