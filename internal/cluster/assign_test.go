package cluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/berthmq/berth/internal/metadata"
)

// TestAssign runs testdata/assign. Commands:
//
//	brokers                  a new image; input: "<id> [rack=<r>] [fenced] [shutdown]" per line
//	                         (shutdown: in controlled shutdown, not fenced yet)
//	topic name=<t>           create topic t; input: one replica list "1,2,3" per line
//	assign topic=<t> partitions=N rf=R [seed=S] [apply]
//	                         Assign, printing the lists and the load per broker;
//	                         with apply, create the topic (or its new
//	                         partitions) so later commands see the load
//	validate                 ValidateAssignment; input as for topic
//
// Regenerate with -rewrite.
func TestAssign(t *testing.T) {
	datadriven.Walk(t, "testdata/assign", func(t *testing.T, path string) {
		im := emptyImage(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "brokers":
				im = emptyImage(t)
				for _, line := range lines(d.Input) {
					f := strings.Fields(line)
					id := ids(t, f[:1])[0]
					rack, fenced, shutdown := "", false, false
					for _, kv := range f[1:] {
						switch {
						case strings.HasPrefix(kv, "rack="):
							rack = strings.TrimPrefix(kv, "rack=")
						case kv == "fenced":
							fenced = true
						case kv == "shutdown":
							shutdown = true
						default:
							d.Fatalf(t, "bad broker field %q", kv)
						}
					}
					im = applyRecs(t, im, register(id, rack))
					if fenced || shutdown {
						im = applyRecs(t, im, metadata.Record{FenceBroker: &metadata.FenceBroker{ID: id, Fenced: fenced, InControlledShutdown: shutdown}})
					}
				}
				return ""
			case "topic":
				name, _ := arg(d, "name")
				im = applyRecs(t, im, createTopic(name[0], parseLists(t, d.Input), nil))
				return ""
			case "validate":
				if err := ValidateAssignment(im, parseLists(t, d.Input)); err != nil {
					return "error: " + errName(err) + "\n"
				}
				return "ok\n"
			case "assign":
				topic, _ := arg(d, "topic")
				req := AssignRequest{
					Topic:             topic[0],
					Partitions:        int32(intArg(t, d, "partitions", 1)),
					ReplicationFactor: int32(intArg(t, d, "rf", 1)),
					Seed:              intArg(t, d, "seed", 0),
				}
				got, err := Assign(im, req)
				if err != nil {
					return "error: " + errName(err) + "\n"
				}
				if again, _ := Assign(im, req); !slices.EqualFunc(got, again, slices.Equal) {
					t.Fatalf("Assign is not deterministic: %v then %v", got, again)
				}
				checkAssignment(t, im, req, got)
				if _, ok := arg(d, "apply"); ok {
					if im.Topic(req.Topic) == nil {
						im = applyRecs(t, im, createTopic(req.Topic, got, nil))
					} else {
						im = applyRecs(t, im, metadata.Record{CreatePartitions: &metadata.CreatePartitions{Name: req.Topic, Replicas: got}})
					}
				}
				return fmtAssignment(im, req.Topic, got)
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
				return ""
			}
		})
	})
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// parseLists parses one replica list per line; "-" is an empty list.
func parseLists(t testing.TB, in string) [][]int32 {
	var out [][]int32
	for _, l := range lines(in) {
		if l == "-" {
			out = append(out, []int32{})
			continue
		}
		out = append(out, ids(t, []string{l}))
	}
	return out
}

// fmtAssignment prints the lists with their racks, then per live broker the
// preferred leaders and replicas of the topic among the new lists and, when
// the topic exists in im, in the whole topic.
func fmtAssignment(im *metadata.Image, topic string, lists [][]int32) string {
	var b strings.Builder
	racks := func(rs []int32) string {
		var out []string
		for _, id := range rs {
			out = append(out, im.Brokers[id].Rack)
		}
		return strings.Join(out, ",")
	}
	for i, rs := range lists {
		fmt.Fprintf(&b, "p%d %s", i, fmtIDs(rs))
		if r := racks(rs); strings.Trim(r, ",") != "" {
			fmt.Fprintf(&b, " racks=%s", r)
		}
		b.WriteString("\n")
	}
	lead, reps := map[int32]int{}, map[int32]int{}
	for _, rs := range lists {
		lead[rs[0]]++
		for _, id := range rs {
			reps[id]++
		}
	}
	b.WriteString("new:")
	for _, br := range liveBrokers(im) {
		fmt.Fprintf(&b, " %d=%d/%d", br.ID, lead[br.ID], reps[br.ID])
	}
	b.WriteString(" (leaders/replicas)\n")
	return b.String()
}

// checkAssignment checks the invariants every assignment keeps: the right
// number of lists of the right length, distinct live brokers in each, and
// each list spanning as many racks as it can.
func checkAssignment(t testing.TB, im *metadata.Image, req AssignRequest, got [][]int32) {
	t.Helper()
	if len(got) != int(req.Partitions) {
		t.Fatalf("%d lists, want %d", len(got), req.Partitions)
	}
	allRacks := map[string]bool{}
	for _, b := range liveBrokers(im) {
		allRacks[b.Rack] = true
	}
	for i, rs := range got {
		if len(rs) != int(req.ReplicationFactor) {
			t.Fatalf("p%d: %v has %d replicas, want %d", i, rs, len(rs), req.ReplicationFactor)
		}
		racks := map[string]bool{}
		for j, id := range rs {
			b, ok := im.Brokers[id]
			if !ok || b.Fenced {
				t.Fatalf("p%d: %v places a replica on broker %d, which is not live", i, rs, id)
			}
			if slices.Contains(rs[:j], id) {
				t.Fatalf("p%d: %v has broker %d twice", i, rs, id)
			}
			racks[b.Rack] = true
		}
		if want := min(len(rs), len(allRacks)); len(racks) != want {
			t.Fatalf("p%d: %v spans %d racks, want %d", i, rs, len(racks), want)
		}
	}
	if err := ValidateAssignment(im, got); err != nil {
		t.Fatalf("Assign's own output fails validation: %v", err)
	}
}

// TestAssignRandom checks Assign's invariants on random clusters (fixed
// seed, so a failure reproduces): checkAssignment, determinism, and balance.
// Balance: a new topic's preferred leaders differ by at most one partition
// between live brokers (the leader is always a broker leading the fewest);
// its replicas differ by at most one with no racks, and two with racks of
// equal size (the rack rule may force a more loaded follower). With uneven
// racks the rack rule wins over replica balance: the only broker of a
// small rack holds a replica of every partition.
func TestAssignRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	for iter := range 3000 {
		im := emptyImage(t)
		nBrokers := 1 + rng.IntN(9)
		nRacks := rng.IntN(4) // 0: no racks
		even := nRacks == 0 || rng.IntN(2) == 0
		for id := range int32(nBrokers) {
			rack := ""
			if nRacks > 0 {
				r := rng.IntN(nRacks)
				if even {
					r = int(id) % nRacks
				}
				rack = fmt.Sprintf("r%d", r)
			}
			im = applyRecs(t, im, register(id*3, rack)) // sparse ids
		}
		// Some fenced brokers and some existing load.
		for id := range int32(nBrokers) {
			if rng.IntN(5) == 0 {
				im = applyRecs(t, im, fence(id*3, true))
			}
		}
		live := liveBrokers(im)
		if len(live) == 0 {
			continue
		}
		for k := range rng.IntN(3) {
			req := AssignRequest{Topic: fmt.Sprintf("old%d", k), Partitions: int32(1 + rng.IntN(20)),
				ReplicationFactor: int32(1 + rng.IntN(len(live))), Seed: rng.Int64()}
			got, err := Assign(im, req)
			if err != nil {
				t.Fatalf("iter %d: %v", iter, err)
			}
			im = applyRecs(t, im, createTopic(req.Topic, got, nil))
		}
		req := AssignRequest{Topic: "new", Partitions: int32(1 + rng.IntN(40)),
			ReplicationFactor: int32(1 + rng.IntN(len(live)+1)), Seed: rng.Int64() - rng.Int64()}
		got, err := Assign(im, req)
		if int(req.ReplicationFactor) > len(live) {
			if err == nil {
				t.Fatalf("iter %d: rf %d with %d live brokers: no error", iter, req.ReplicationFactor, len(live))
			}
			continue
		}
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		checkAssignment(t, im, req, got)
		if again, _ := Assign(im, req); !slices.EqualFunc(got, again, slices.Equal) {
			t.Fatalf("iter %d: not deterministic", iter)
		}
		lead, reps := map[int32]int{}, map[int32]int{}
		for _, b := range live {
			lead[b.ID], reps[b.ID] = 0, 0
		}
		for _, rs := range got {
			lead[rs[0]]++
			for _, id := range rs {
				reps[id]++
			}
		}
		if s := spread(lead); s > 1 {
			t.Fatalf("iter %d: preferred leaders per broker %v differ by %d\n%v", iter, lead, s, got)
		}
		evenRacks := true
		perRack := map[string]int{}
		for _, b := range live {
			perRack[b.Rack]++
		}
		for _, n := range perRack {
			evenRacks = evenRacks && n == perRack[live[0].Rack]
		}
		if s := spread(reps); nRacks == 0 && s > 1 || evenRacks && s > 2 {
			t.Fatalf("iter %d: replicas per broker %v differ by %d (racks %v)\n%v", iter, reps, s, perRack, got)
		}
	}
}

// spread is max - min of the map's values.
func spread(m map[int32]int) int {
	lo, hi := -1, -1
	for _, v := range m {
		if lo < 0 || v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return hi - lo
}
