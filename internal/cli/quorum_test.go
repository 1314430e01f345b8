package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	"github.com/berthmq/berth/internal/testcluster"
)

// Bad flags fail before anything connects.
func TestClusterQuorumFlagErrorsBeforeConnecting(t *testing.T) {
	addr := closedPort(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"add-voter"}, "--node-id is required"},
		{[]string{"add-voter", "--node-id", "-1"}, "node ids are 0 or more"},
		{[]string{"add-voter", "--node-id", "4", "--address", "nohost"}, "want host:port"},
		{[]string{"add-voter", "--node-id", "4", "--address", "h:0"}, "want 1-65535"},
		{[]string{"add-voter", "--node-id", "4", "--address", ":9093"}, "host is empty"},
		{[]string{"remove-voter"}, "--node-id is required"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := runCLI(t, "", append(append([]string{"cluster", "quorum"}, tc.args...), "-b", addr)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// The status table and JSON from a crafted response.
func TestClusterQuorumPrint(t *testing.T) {
	resp := kmsg.NewPtrDescribeQuorumResponse()
	resp.Version = 2
	rp := kmsg.NewDescribeQuorumResponseTopicPartition()
	rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = 2, 7, 120
	now := time.UnixMilli(1_000_000)
	state := func(id int32, end, fetched int64) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
		r := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		r.ReplicaID, r.LogEndOffset, r.LastFetchTimestamp = id, end, fetched
		return r
	}
	rp.CurrentVoters = append(rp.CurrentVoters, state(1, 118, now.UnixMilli()-250), state(2, 121, now.UnixMilli()), state(3, -1, -1))
	rp.Observers = append(rp.Observers, state(4, 100, now.UnixMilli()-2500))
	for id, port := range map[int32]uint16{1: 9193, 2: 9194, 4: 9196} {
		n := kmsg.NewDescribeQuorumResponseNode()
		n.NodeID = id
		l := kmsg.NewDescribeQuorumResponseNodeListener()
		l.Name, l.Host, l.Port = "CONTROLLER", "10.0.0.1", port
		n.Listeners = append(n.Listeners, l)
		resp.Nodes = append(resp.Nodes, n)
	}
	s := quorumFromResponse(resp, rp, now)
	var out strings.Builder
	if err := printQuorum(&out, s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Leader:        2", "Term:          7", "Commit index:  120", "Voters:        3 (a majority is 2)", "Observers:     1",
		"1     voter     10.0.0.1:9193  118      2    250ms ago",
		"2     leader    10.0.0.1:9194  121      0    0ms ago",
		"3     voter     -              ?        ?    never",
		"4     observer  10.0.0.1:9196  100      20   2.5s ago",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	b, _ := json.Marshal(s)
	want := `{"leader":2,"term":7,"commit_index":120,"voters":3,"observers":1,"members":[` +
		`{"node_id":1,"role":"voter","address":"10.0.0.1:9193","log_end":118,"lag":2,"last_contact_ms":250},` +
		`{"node_id":2,"role":"leader","address":"10.0.0.1:9194","log_end":121,"lag":0,"last_contact_ms":0},` +
		`{"node_id":3,"role":"voter","log_end":-1,"lag":-1,"last_contact_ms":-1},` +
		`{"node_id":4,"role":"observer","address":"10.0.0.1:9196","log_end":100,"lag":20,"last_contact_ms":2500}]}`
	if string(b) != want {
		t.Fatalf("JSON\n%s\nwant\n%s", b, want)
	}
}

// A single node is a one-voter quorum; removing it or adding an unknown
// node without an address is refused with advice.
func TestClusterQuorumSingleNode(t *testing.T) {
	addr := integrationBootstrap(t)
	var s quorumStatus
	poll.Until(t, 10*time.Second, func() error {
		out, _, err := runCLI(t, "", "cluster", "quorum", "-b", addr, "--json")
		if err != nil {
			return err
		}
		return json.Unmarshal([]byte(out), &s)
	})
	if s.Leader < 0 || s.Voters != 1 || s.Observers != 0 || len(s.Members) != 1 || s.Members[0].Role != "leader" || s.Members[0].Lag != 0 {
		t.Fatalf("quorum %+v", s)
	}
	out, _, err := runCLI(t, "", "cluster", "quorum", "-b", addr)
	if err != nil || !strings.Contains(out, "leader") || !strings.Contains(out, "Commit index:") {
		t.Fatalf("quorum: %v\n%s", err, out)
	}
	_, _, err = runCLI(t, "", "cluster", "quorum", "remove-voter", "--node-id", fmt.Sprint(s.Leader), "-b", addr)
	if err == nil || !strings.Contains(err.Error(), "VOTER_NOT_FOUND") || !strings.Contains(err.Error(), "last voter") {
		t.Fatalf("removing the last voter: %v", err)
	}
	_, _, err = runCLI(t, "", "cluster", "quorum", "add-voter", "--node-id", "77", "-b", addr)
	if err == nil || !strings.Contains(err.Error(), "INVALID_REQUEST") || !strings.Contains(err.Error(), "joins as an observer") {
		t.Fatalf("adding a non-member without an address: %v", err)
	}
}

// On three real nodes, through the Kafka APIs and the commands: the quorum
// shows three voters; followers refuse and point at the controller; a
// stopped voter is removed (two voters, metadata still commits); a fresh
// node under its id joins as an observer and is promoted (three voters);
// removing the active controller hands its role over first.
func TestClusterQuorumRemoveAndAddVoter(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of berth processes")
	}
	c := testcluster.StartCluster(t, 3)
	bootstrap := strings.Join(c.Addrs(), ",")
	quorum := func() quorumStatus {
		t.Helper()
		var s quorumStatus
		out, _, err := runCLI(t, "", "cluster", "quorum", "-b", bootstrap, "--json")
		if err != nil {
			t.Fatalf("berth cluster quorum: %v", err)
		}
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	roles := func(s quorumStatus) map[int32]string {
		m := map[int32]string{}
		for _, mb := range s.Members {
			m[mb.NodeID] = mb.Role
		}
		return m
	}
	var s quorumStatus
	poll.Until(t, 20*time.Second, func() error {
		s = quorum()
		if s.Voters != 3 || s.Observers != 0 || s.Leader < 1 {
			return fmt.Errorf("quorum %+v", s)
		}
		for _, m := range s.Members {
			if m.Lag != 0 || m.Address == "" || m.LastContactMs < 0 {
				return fmt.Errorf("member %+v", m)
			}
		}
		return nil
	})
	leader := s.Leader
	victim := int32(1)
	for victim == leader {
		victim++
	}

	// A follower answers DescribeQuorum with NOT_LEADER_OR_FOLLOWER naming
	// the leader, and AddRaftVoter with NOT_CONTROLLER.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	direct := c.Direct(t, victim)
	dq := kmsg.NewPtrDescribeQuorumRequest()
	dt := kmsg.NewDescribeQuorumRequestTopic()
	dt.Topic, dt.Partitions = metadataTopic, []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	dq.Topics = append(dq.Topics, dt)
	kr, err := testcluster.DirectRequest(ctx, direct, dq)
	if err != nil {
		t.Fatal(err)
	}
	if p := kr.(*kmsg.DescribeQuorumResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.NotLeaderForPartition.Code || p.LeaderID != leader {
		t.Fatalf("DescribeQuorum on follower %d: code %d leader %d, want NOT_LEADER_OR_FOLLOWER and %d", victim, p.ErrorCode, p.LeaderID, leader)
	}
	av := kmsg.NewPtrAddRaftVoterRequest()
	av.VoterID = 9
	kr, err = testcluster.DirectRequest(ctx, direct, av)
	if err != nil {
		t.Fatal(err)
	}
	if r := kr.(*kmsg.AddRaftVoterResponse); r.ErrorCode != kerr.NotController.Code {
		t.Fatalf("AddRaftVoter on follower %d: code %d, want NOT_CONTROLLER", victim, r.ErrorCode)
	}

	// Remove a stopped voter: two voters, and metadata still commits.
	c.Stop(victim)
	out, _, err := runCLI(t, "", "cluster", "quorum", "remove-voter", "--node-id", fmt.Sprint(victim), "-b", bootstrap)
	if err != nil || !strings.Contains(out, "is no longer a member") {
		t.Fatalf("remove-voter %d: %v\n%s", victim, err, out)
	}
	s = quorum()
	if _, ok := roles(s)[victim]; s.Voters != 2 || ok {
		t.Fatalf("after removing %d: %+v", victim, s)
	}
	adm := kadm.NewClient(testcluster.Client(t, c.Addrs()[0], kgo.SeedBrokers(c.Addrs()...)))
	if r, err := adm.CreateTopic(ctx, 1, 1, nil, "after-remove"); err != nil || r.Err != nil {
		t.Fatalf("creating a topic with two voters: %v %v", err, r.Err)
	}
	_, _, err = runCLI(t, "", "cluster", "quorum", "remove-voter", "--node-id", fmt.Sprint(victim), "-b", bootstrap)
	if err == nil || !strings.Contains(err.Error(), "VOTER_NOT_FOUND") {
		t.Fatalf("removing %d again: %v", victim, err)
	}

	// A fresh node under the victim's id joins as an observer (its voters
	// list names the two voters left), and is promoted.
	var voters []string
	for _, id := range c.IDs() {
		if id != victim {
			voters = append(voters, fmt.Sprintf("%d@%s", id, c.Node(id).ControllerAddr))
		}
	}
	nd := c.Node(victim)
	args := append([]string{
		"--node.id", fmt.Sprint(victim),
		"--listeners", "PLAINTEXT://" + nd.KafkaAddr + ",CONTROLLER://" + nd.ControllerAddr,
		"--controller.quorum.voters", strings.Join(voters, ","),
	}, testcluster.ClusterArgs...)
	fresh := testcluster.StartProcess(t, filepath.Join(t.TempDir(), "fresh"), args...)
	t.Logf("node %d started again with an empty directory at %s", victim, fresh.Addr())
	poll.Until(t, 30*time.Second, func() error {
		s = quorum()
		for _, m := range s.Members {
			if m.NodeID == victim && m.Role == "observer" && m.Lag == 0 {
				return nil
			}
		}
		return fmt.Errorf("node %d not a caught-up observer yet: %+v", victim, s.Members)
	})
	out, _, err = runCLI(t, "", "cluster", "quorum", "add-voter", "--node-id", fmt.Sprint(victim), "-b", bootstrap)
	if err != nil || !strings.Contains(out, "is now a voter") {
		t.Fatalf("add-voter %d: %v\n%s", victim, err, out)
	}
	s = quorum()
	if s.Voters != 3 || s.Observers != 0 || roles(s)[victim] != "voter" && roles(s)[victim] != "leader" {
		t.Fatalf("after promoting %d: %+v", victim, s)
	}
	_, _, err = runCLI(t, "", "cluster", "quorum", "add-voter", "--node-id", fmt.Sprint(victim), "-b", bootstrap)
	if err == nil || !strings.Contains(err.Error(), "DUPLICATE_VOTER") {
		t.Fatalf("adding %d again: %v", victim, err)
	}
	if r, err := adm.CreateTopic(ctx, 1, 1, nil, "after-add"); err != nil || r.Err != nil {
		t.Fatalf("creating a topic with three voters: %v %v", err, r.Err)
	}

	// Removing the active controller: it hands its role over, and the new
	// controller removes it; the command follows the hand-over.
	s = quorum()
	old := s.Leader
	rv := kmsg.NewPtrRemoveRaftVoterRequest()
	rv.VoterID = old
	var follower int32
	for _, id := range c.IDs() {
		if id != old && id != victim {
			follower = id
		}
	}
	kr, err = testcluster.DirectRequest(ctx, c.Direct(t, follower), rv)
	if err != nil {
		t.Fatal(err)
	}
	if r := kr.(*kmsg.RemoveRaftVoterResponse); r.ErrorCode != kerr.NotController.Code {
		t.Fatalf("RemoveRaftVoter on follower %d: code %d, want NOT_CONTROLLER", follower, r.ErrorCode)
	}
	out, stderr, err := runCLI(t, "", "cluster", "quorum", "remove-voter", "--node-id", fmt.Sprint(old), "-b", bootstrap)
	if err != nil || !strings.Contains(out, "is no longer a member") {
		t.Fatalf("remove-voter %d (the active controller): %v\n%s%s", old, err, out, stderr)
	}
	s = quorum()
	if _, ok := roles(s)[old]; ok || s.Voters != 2 || s.Leader == old || s.Leader < 0 {
		t.Fatalf("after removing the active controller %d: %+v", old, s)
	}
	// A removed node that keeps running no longer sees the metadata log
	// commit (docs/operations.md: stop it, then remove it); stop it now.
	if old == victim {
		if err := fresh.Stop(); err != nil {
			t.Fatal(err)
		}
	} else {
		c.Stop(old)
	}
	if r, err := adm.CreateTopic(ctx, 1, 1, nil, "after-leader-removed"); err != nil || r.Err != nil {
		t.Fatalf("creating a topic after removing the active controller: %v %v", err, r.Err)
	}
}
