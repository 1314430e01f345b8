package group

import (
	"fmt"
	"maps"
	"math/rand"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// shareAssignHarness runs the simple assignor from datadriven commands:
//
//	topics t=4 u=2        the topics (replacing the previous ones)
//	assign                one input line per member: "a: t u" (its subscription);
//	                      the previous result is the current assignment
//	current               one input line per member: "a: t/0 t/1" (sets the current assignment)
//
// assign prints each member's assignment, how many member-partition
// pairs moved since the current assignment (gained + lost), and each
// topic's sharing.
type shareAssignHarness struct {
	topics  []shareTopic
	current map[string]shareAssignment
}

func (h *shareAssignHarness) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "topics":
		h.topics = nil
		for _, a := range d.CmdArgs {
			n, err := strconv.Atoi(a.Vals[0])
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			h.topics = append(h.topics, shareTopic{Name: a.Key, ID: shareFakeID(a.Key), Partitions: int32(n)})
		}
		return "ok"
	case "current":
		h.current = make(map[string]shareAssignment)
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			id, rest, _ := strings.Cut(line, ":")
			a := make(shareAssignment)
			for _, tp := range strings.Fields(rest) {
				topic, p, _ := strings.Cut(tp, "/")
				n, _ := strconv.Atoi(p)
				a.add(shareFakeID(topic), int32(n))
			}
			h.current[strings.TrimSpace(id)] = a
		}
		return "ok"
	case "assign":
		var members []shareAssignMember
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			id, rest, _ := strings.Cut(line, ":")
			members = append(members, shareAssignMember{ID: strings.TrimSpace(id), Topics: strings.Fields(rest)})
		}
		out := assignShareSimple(members, h.topics, h.current)
		var b strings.Builder
		for _, id := range slices.Sorted(maps.Keys(out)) {
			fmt.Fprintf(&b, "%s: %s\n", id, shareGroupTPs(out[id]))
		}
		fmt.Fprintf(&b, "moved=%d\n", shareAssignMoved(h.current, out))
		for _, t := range h.topics {
			holders := make([]int, t.Partitions)
			for _, a := range out {
				for _, p := range a[t.ID] {
					holders[p]++
				}
			}
			fmt.Fprintf(&b, "%s sharing=%v\n", t.Name, holders)
		}
		h.current = out
		return b.String()
	}
	d.Fatalf(t, "unknown command %s", d.Cmd)
	return ""
}

// shareAssignMoved counts the member-partition pairs in one assignment and not
// the other.
func shareAssignMoved(before, after map[string]shareAssignment) int {
	n := 0
	diff := func(x, y map[string]shareAssignment) {
		for id, a := range x {
			for topic, ps := range a {
				for _, p := range ps {
					if !y[id].Has(topic, p) {
						n++
					}
				}
			}
		}
	}
	diff(before, after)
	diff(after, before)
	return n
}

// TestShareAssignDataDriven runs testdata/sharegroup/assign_*. Regenerate the expected
// output with -rewrite.
func TestShareAssignDataDriven(t *testing.T) {
	paths, err := filepath.Glob("testdata/sharegroup/assign_*")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no testdata/sharegroup/assign_* files")
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			datadriven.RunTest(t, path, (&shareAssignHarness{}).run)
		})
	}
}

// shareAssignCheck checks the assignor's invariants on one result: every
// member gets only partitions of existing topics it subscribes to; in each
// pool every partition has exactly ceil(members/partitions) members and
// member counts differ by at most one.
func shareAssignCheck(t *testing.T, members []shareAssignMember, topics []shareTopic, out map[string]shareAssignment) {
	t.Helper()
	byID := make(map[[16]byte]shareTopic)
	for _, tp := range topics {
		byID[tp.ID] = tp
	}
	subs := make(map[string][]string)
	for _, m := range members {
		subs[m.ID] = m.Topics
		if out[m.ID] == nil {
			t.Fatalf("member %s has no entry", m.ID)
		}
	}
	if len(out) != len(subs) {
		t.Fatalf("%d results for %d members", len(out), len(subs))
	}
	for id, a := range out {
		for topic, ps := range a {
			tp, ok := byID[topic]
			if !ok || !slices.Contains(subs[id], tp.Name) || len(ps) == 0 {
				t.Fatalf("member %s got %s it does not subscribe to (%v)", id, shareFakeName(topic), subs[id])
			}
			if !slices.IsSorted(ps) || len(slices.Compact(slices.Clone(ps))) != len(ps) || ps[0] < 0 || ps[len(ps)-1] >= tp.Partitions {
				t.Fatalf("member %s: bad partitions %v of %s", id, ps, tp.Name)
			}
		}
	}
	// The pools: one if every member subscribes to the same existing
	// topics, else one per topic.
	exists := func(m shareAssignMember) []string {
		var out []string
		for _, name := range m.Topics {
			for _, tp := range topics {
				if tp.Name == name && tp.Partitions > 0 {
					out = append(out, name)
				}
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	homogeneous := true
	for _, m := range members {
		if !slices.Equal(exists(m), exists(members[0])) {
			homogeneous = false
		}
	}
	var pools [][]string
	if homogeneous && len(members) > 0 {
		pools = append(pools, exists(members[0]))
	} else if !homogeneous {
		for _, tp := range topics {
			pools = append(pools, []string{tp.Name})
		}
	}
	for _, pool := range pools {
		var ms []string
		for _, m := range members {
			if e := exists(m); len(e) > 0 && len(pool) > 0 && slices.Contains(e, pool[0]) {
				ms = append(ms, m.ID)
			}
		}
		holders := make(map[shareAssignTP]int)
		np := 0
		for _, tp := range topics {
			if slices.Contains(pool, tp.Name) {
				np += int(tp.Partitions)
				for p := int32(0); p < tp.Partitions; p++ {
					holders[shareAssignTP{tp.ID, p}] = 0
				}
			}
		}
		if np == 0 || len(ms) == 0 {
			continue
		}
		sharing := (len(ms) + np - 1) / np
		lo, hi := -1, -1
		for _, id := range ms {
			n := 0
			for topic, ps := range out[id] {
				if slices.Contains(pool, byID[topic].Name) {
					n += len(ps)
					for _, p := range ps {
						holders[shareAssignTP{topic, p}]++
					}
				}
			}
			if lo < 0 || n < lo {
				lo = n
			}
			hi = max(hi, n)
		}
		if hi-lo > 1 {
			t.Fatalf("pool %v: member loads from %d to %d", pool, lo, hi)
		}
		for tp, n := range holders {
			if n != sharing {
				t.Fatalf("pool %v: %s/%d has %d members, want %d", pool, shareFakeName(tp.topic), tp.partition, n, sharing)
			}
		}
	}
}

func shareAssignRandom(r *rand.Rand) ([]shareAssignMember, []shareTopic) {
	var topics []shareTopic
	names := []string{"a", "b", "c", "d"}
	for _, name := range names[:1+r.Intn(len(names))] {
		topics = append(topics, shareTopic{Name: name, ID: shareFakeID(name), Partitions: int32(r.Intn(7))})
	}
	var members []shareAssignMember
	homogeneous := r.Intn(2) == 0
	var all []string
	for _, tp := range topics {
		all = append(all, tp.Name)
	}
	all = append(all, "missing")
	for i := range 1 + r.Intn(12) {
		m := shareAssignMember{ID: fmt.Sprintf("m%02d", i)}
		if homogeneous {
			m.Topics = slices.Clone(all)
		} else {
			for _, name := range all {
				if r.Intn(2) == 0 {
					m.Topics = append(m.Topics, name)
				}
			}
		}
		members = append(members, m)
	}
	return members, topics
}

// TestShareAssignInvariants runs the assignor on random groups, each from the
// result of the previous one (as the group does), and checks balance and
// sharing, and that the result does not depend on input order.
func TestShareAssignInvariants(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := range 2000 {
		members, topics := shareAssignRandom(r)
		var current map[string]shareAssignment
		for range 3 {
			out := assignShareSimple(members, topics, current)
			shareAssignCheck(t, members, topics, out)
			// Shuffled input, same output.
			ms, ts := slices.Clone(members), slices.Clone(topics)
			r.Shuffle(len(ms), func(a, b int) { ms[a], ms[b] = ms[b], ms[a] })
			r.Shuffle(len(ts), func(a, b int) { ts[a], ts[b] = ts[b], ts[a] })
			if again := assignShareSimple(ms, ts, current); !maps.EqualFunc(out, again, shareAssignment.Equal) {
				t.Fatalf("case %d: input order changed the result:\n%v\n%v", i, out, again)
			}
			// Again from its own result: nothing moves.
			if again := assignShareSimple(members, topics, out); shareAssignMoved(out, again) != 0 {
				t.Fatalf("case %d: a second run moved partitions", i)
			}
			current = out
			// Membership churn for the next round.
			switch {
			case len(members) > 1 && r.Intn(2) == 0:
				j := r.Intn(len(members))
				members = slices.Delete(slices.Clone(members), j, j+1)
			default:
				m := members[r.Intn(len(members))]
				members = append(slices.Clone(members), shareAssignMember{ID: fmt.Sprintf("n%d", r.Intn(1000)), Topics: m.Topics})
				slices.SortFunc(members, func(a, b shareAssignMember) int { return strings.Compare(a.ID, b.ID) })
				members = slices.CompactFunc(members, func(a, b shareAssignMember) bool { return a.ID == b.ID })
			}
		}
	}
}

// TestShareAssignStickyJoinLeave: with at least as many partitions as
// members, a member joining takes partitions only from the others (who
// lose, never gain), and a member leaving gives its partitions to the
// others (who gain, never lose).
func TestShareAssignStickyJoinLeave(t *testing.T) {
	topics := []shareTopic{{Name: "t", ID: shareFakeID("t"), Partitions: 12}, {Name: "u", ID: shareFakeID("u"), Partitions: 5}}
	var members []shareAssignMember
	var current map[string]shareAssignment
	subset := func(a, b shareAssignment) bool {
		for topic, ps := range a {
			for _, p := range ps {
				if !b.Has(topic, p) {
					return false
				}
			}
		}
		return true
	}
	for i := range 17 {
		members = append(members, shareAssignMember{ID: fmt.Sprintf("m%02d", i), Topics: []string{"t", "u"}})
		out := assignShareSimple(members, topics, current)
		shareAssignCheck(t, members, topics, out)
		for id, before := range current {
			if !subset(out[id], before) {
				t.Fatalf("join of member %d: %s gained %s -> %s", i, id, shareGroupTPs(before), shareGroupTPs(out[id]))
			}
		}
		current = out
	}
	for len(members) > 1 {
		gone := members[len(members)/2]
		members = slices.Delete(members, len(members)/2, len(members)/2+1)
		out := assignShareSimple(members, topics, current)
		shareAssignCheck(t, members, topics, out)
		moved := 0
		for id, after := range out {
			if !subset(current[id], after) {
				t.Fatalf("leave of %s: %s lost %s -> %s", gone.ID, id, shareGroupTPs(current[id]), shareGroupTPs(after))
			}
			moved += after.Len() - current[id].Len()
		}
		if moved != current[gone.ID].Len() {
			t.Fatalf("leave of %s: %d moved, it had %d", gone.ID, moved, current[gone.ID].Len())
		}
		current = out
	}
}

func BenchmarkShareAssignSimple(b *testing.B) {
	var topics []shareTopic
	for i := range 10 {
		name := fmt.Sprintf("t%d", i)
		topics = append(topics, shareTopic{Name: name, ID: shareFakeID(name), Partitions: 64})
	}
	var members []shareAssignMember
	for i := range 100 {
		m := shareAssignMember{ID: fmt.Sprintf("m%03d", i)}
		for _, tp := range topics {
			m.Topics = append(m.Topics, tp.Name)
		}
		members = append(members, m)
	}
	current := assignShareSimple(members, topics, nil)
	members = members[1:]
	b.ResetTimer()
	for range b.N {
		assignShareSimple(members, topics, current)
	}
}
