package cluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/berthmq/berth/internal/metadata"
)

// TestElect runs testdata/elect: election decisions on one partition of
// topic t (brokers 0-9 registered). Commands:
//
//	partition replicas=(..) isr=(..) leader=N   set the partition's state
//	brokers live=(..) shutting=(..)             the brokers' states; others offline
//	reconcile [unclean]                         Reconcile
//	preferred                                   ElectPreferred
//	elect-unclean                               ElectUnclean
//
// A decision is applied to the image through metadata.Apply (so it must be
// a legal PartitionChange) and the partition's new state printed; later
// commands start from it. Regenerate with -rewrite.
func TestElect(t *testing.T) {
	datadriven.Walk(t, "testdata/elect", func(t *testing.T, path string) {
		var im *metadata.Image
		var states Brokers
		part := func() *metadata.Partition { return im.Topic("t").Partition(0) }
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "partition":
				reps, _ := arg(d, "replicas")
				isr, _ := arg(d, "isr")
				leader := int32(intArg(t, d, "leader", -1))
				im = emptyImage(t)
				for id := range int32(10) {
					im = applyRecs(t, im, register(id, ""))
				}
				im = applyRecs(t, im, createTopic("t", [][]int32{ids(t, reps)}, nil))
				im = applyRecs(t, im, metadata.Record{PartitionChange: &metadata.PartitionChange{
					Topic: "t", Leader: &leader, ISR: ids(t, isr),
				}})
				states = Brokers{}
				return fmtPartition(part()) + "\n"
			case "brokers":
				states = Brokers{}
				live, _ := arg(d, "live")
				for _, id := range ids(t, live) {
					states[id] = Live
				}
				sd, _ := arg(d, "shutting")
				for _, id := range ids(t, sd) {
					states[id] = ShuttingDown
				}
				return ""
			case "reconcile":
				_, unclean := arg(d, "unclean")
				dec, changed := Reconcile(part(), states, unclean)
				if !changed {
					if !dec.same(part()) {
						t.Fatalf("Reconcile reported no change but decided %+v", dec)
					}
					return "no change\n"
				}
				return apply(t, &im, dec)
			case "preferred", "elect-unclean":
				var dec Decision
				var err error
				if d.Cmd == "preferred" {
					dec, err = ElectPreferred(part(), states)
				} else {
					dec, err = ElectUnclean(part(), states)
				}
				if err != nil {
					return fmt.Sprintf("error: %s\n", errName(err))
				}
				return apply(t, &im, dec)
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
				return ""
			}
		})
	})
}

// apply applies d to partition t/0 of *im and prints the decision and the
// partition after it.
func apply(t *testing.T, im **metadata.Image, d Decision) string {
	t.Helper()
	p := (*im).Topic("t").Partition(0)
	*im = applyRecs(t, *im, metadata.Record{PartitionChange: d.Change("t", p)})
	np := (*im).Topic("t").Partition(0)
	checkPartition(t, "after decision", np)
	if np.Leader != d.Leader || fmtIDs(np.ISR) != fmtIDs(d.ISR) {
		t.Fatalf("applied %+v, partition is %s", d, fmtPartition(np))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "leader=%d isr=%s", d.Leader, fmtIDs(d.ISR))
	if d.Unclean {
		b.WriteString(" UNCLEAN")
	}
	fmt.Fprintf(&b, "\n=> %s\n", fmtPartition(np))
	return b.String()
}

// errName prints a sentinel error by its Kafka name.
func errName(err error) string {
	for _, e := range []struct {
		err  error
		name string
	}{
		{ErrElectionNotNeeded, "ELECTION_NOT_NEEDED"},
		{ErrPreferredLeaderNotAvailable, "PREFERRED_LEADER_NOT_AVAILABLE"},
		{ErrEligibleLeadersNotAvailable, "ELIGIBLE_LEADERS_NOT_AVAILABLE"},
		{ErrUnknownPartition, "UNKNOWN_TOPIC_OR_PARTITION"},
		{ErrInvalidReplicationFactor, "INVALID_REPLICATION_FACTOR"},
		{ErrInvalidReplicaAssignment, "INVALID_REPLICA_ASSIGNMENT"},
		{metadata.ErrInvalidPartitions, "INVALID_PARTITIONS"},
	} {
		if errors.Is(err, e.err) {
			return e.name + ": " + err.Error()
		}
	}
	return "unexpected: " + err.Error()
}

func TestUncleanEnabled(t *testing.T) {
	im := emptyImage(t)
	im = applyRecs(t, im, register(0, ""),
		createTopic("on", [][]int32{{0}}, map[string]string{UncleanConfig: "true"}),
		createTopic("off", [][]int32{{0}}, map[string]string{UncleanConfig: "false"}),
		createTopic("junk", [][]int32{{0}}, map[string]string{UncleanConfig: "maybe"}),
		createTopic("plain", [][]int32{{0}}, nil))
	dyn := applyRecs(t, im, metadata.Record{SetBrokerConfigs: &metadata.SetBrokerConfigs{Set: map[string]string{UncleanConfig: "true"}}})
	for _, tc := range []struct {
		im    *metadata.Image
		topic string
		def   bool
		want  bool
	}{
		{im, "on", false, true},
		{im, "off", true, false},
		{im, "junk", true, false},
		{im, "plain", false, false},
		{im, "plain", true, true},
		{dyn, "plain", false, true}, // dynamic broker setting beats the static default
		{dyn, "off", false, false},  // the topic override beats both
		{im, "missing", true, true},
	} {
		if got := UncleanEnabled(tc.im, tc.im.Topic(tc.topic), tc.def); got != tc.want {
			t.Errorf("UncleanEnabled(%s, dynamic=%v, default %v) = %v, want %v",
				tc.topic, tc.im == dyn, tc.def, got, tc.want)
		}
	}
}

// TestPlanElections: every partition when none are named, per-partition
// outcomes, and changes fenced on the partition epoch they were decided
// from.
func TestPlanElections(t *testing.T) {
	im := emptyImage(t)
	for id := range int32(4) {
		im = applyRecs(t, im, register(id, ""))
	}
	two := int32(2)
	im = applyRecs(t, im,
		createTopic("b", [][]int32{{1, 2}, {2, 1}}, nil),
		createTopic("a", [][]int32{{3, 1}}, nil))
	im = applyRecs(t, im, metadata.Record{PartitionChange: &metadata.PartitionChange{Topic: "b", Partition: 0, Leader: &two}})
	im = applyRecs(t, im, fence(3, true))
	states := BrokersOf(im)

	res := PlanElections(im, states, Preferred, nil)
	var got []string
	for _, r := range res {
		s := fmt.Sprintf("%s-%d:", r.Topic, r.Partition)
		if r.Err != nil {
			s += strings.SplitN(errName(r.Err), ":", 2)[0]
		} else {
			s += fmt.Sprintf("leader=%d expect=%d", *r.Change.Leader, *r.Change.ExpectPartitionEpoch)
		}
		got = append(got, s)
	}
	want := []string{"a-0:PREFERRED_LEADER_NOT_AVAILABLE", "b-0:leader=1 expect=1", "b-1:ELECTION_NOT_NEEDED"}
	if !slices.Equal(got, want) {
		t.Fatalf("PlanElections(all) = %v, want %v", got, want)
	}

	// a-0's leader 3 is fenced in the image: an unclean request elects 1,
	// which is in the ISR (a clean election).
	res = PlanElections(im, states, Unclean, []TopicPartition{{"a", 0}, {"a", 1}, {"b", 0}})
	if r := res[0]; r.Err != nil || *r.Change.Leader != 1 || r.Decision.Unclean || !slices.Equal(r.Change.ISR, []int32{1}) {
		t.Fatalf("unclean a-0: %+v", r)
	}
	if !errors.Is(res[1].Err, ErrUnknownPartition) || !errors.Is(res[2].Err, ErrElectionNotNeeded) {
		t.Fatalf("unclean a-1, b-0: %v, %v", res[1].Err, res[2].Err)
	}
}
