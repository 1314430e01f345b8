package cli

// `berth cluster quorum`: the metadata quorum (DescribeQuorum) and voter
// changes (AddRaftVoter, RemoveRaftVoter, KIP-853), as
// kafka-metadata-quorum.sh describe / add-controller / remove-controller.
// kadm has no helpers for these APIs, so the commands send kmsg requests
// through the kgo client. DescribeQuorum is answered by the active
// controller only (NOT_LEADER_OR_FOLLOWER elsewhere, naming the leader);
// the voter changes answer NOT_CONTROLLER elsewhere. Both are asked again
// at the controller until --timeout.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadataTopic is the metadata log's topic name in DescribeQuorum.
const metadataTopic = "__cluster_metadata"

// quorumStatus is what `berth cluster quorum` prints.
type quorumStatus struct {
	Leader      int32          `json:"leader"`
	Term        int32          `json:"term"`
	CommitIndex int64          `json:"commit_index"`
	Voters      int            `json:"voters"`
	Observers   int            `json:"observers"`
	Members     []quorumMember `json:"members"`
}

// quorumMember is one voter or observer.
type quorumMember struct {
	NodeID  int32  `json:"node_id"`
	Role    string `json:"role"` // leader, voter, observer
	Address string `json:"address,omitempty"`
	// LogEnd is the last metadata log index the member holds, -1 when the
	// leader does not know yet; Lag how far it trails the commit index
	// (-1 unknown).
	LogEnd int64 `json:"log_end"`
	Lag    int64 `json:"lag"`
	// LastContactMs is how long ago the active controller last heard from
	// the member, -1 never (since it took over).
	LastContactMs int64 `json:"last_contact_ms"`
}

func newClusterQuorumCmd(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quorum",
		Short: "Show the metadata quorum: active controller, voters and observers, how far each has replicated",
		Long: `Show the metadata quorum as the active controller sees it (DescribeQuorum, as
kafka-metadata-quorum.sh describe): the leader (the active controller), its
term, the commit index of the metadata log, and each voter and observer with
its controller address, the last log index it holds, its lag behind the
commit index and when the controller last heard from it.

The subcommands add and remove voters (see docs/operations.md, "Changing
voters").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withQuorumClient(cmd, cf, func(ctx context.Context, cl *kgo.Client) error {
				s, err := describeQuorum(ctx, cl)
				if err != nil {
					return cf.explain(err)
				}
				if cf.json {
					return writeJSON(cmd.OutOrStdout(), s)
				}
				return printQuorum(cmd.OutOrStdout(), s)
			})
		},
	}
	cmd.AddCommand(newQuorumAddVoterCmd(cf), newQuorumRemoveVoterCmd(cf))
	return cmd
}

// withQuorumClient connects with a request timeout of at least --timeout
// (RemoveRaftVoter carries no timeout of its own, and kgo would otherwise
// give up on an answer after 10 s) and bounds the whole command by
// --timeout.
func withQuorumClient(cmd *cobra.Command, cf *clientFlags, fn func(context.Context, *kgo.Client) error) error {
	if err := cf.resolve(cmd); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), cf.timeout)
	defer cancel()
	cl, err := cf.connect(ctx, kgo.RequestTimeoutOverhead(max(cf.timeout, 10*time.Second)))
	if err != nil {
		return err
	}
	defer cl.Close()
	return fn(ctx, cl)
}

// describeQuorum asks the active controller for the quorum. kgo sends
// DescribeQuorum to the controller of its metadata; a node that is not
// (or not yet) the active controller answers NOT_LEADER_OR_FOLLOWER with
// the leader it knows, which is asked next.
func describeQuorum(ctx context.Context, cl *kgo.Client) (quorumStatus, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = metadataTopic
	p := kmsg.NewDescribeQuorumRequestTopicPartition()
	t.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{p}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{t}
	target := int32(-1) // -1: let kgo pick the controller
	for {
		var kr kmsg.Response
		var err error
		if target >= 0 {
			kr, err = cl.Broker(int(target)).Request(ctx, req)
		} else {
			kr, err = cl.Request(ctx, req)
		}
		if err != nil {
			return quorumStatus{}, err
		}
		resp := kr.(*kmsg.DescribeQuorumResponse)
		if err := responseError(resp.ErrorCode, resp.ErrorMessage); err != nil {
			return quorumStatus{}, fmt.Errorf("describing the metadata quorum: %w", err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return quorumStatus{}, fmt.Errorf("describing the metadata quorum: the broker answered %d topics, want one (%s-0)", len(resp.Topics), metadataTopic)
		}
		rp := resp.Topics[0].Partitions[0]
		err = responseError(rp.ErrorCode, rp.ErrorMessage)
		if err == nil {
			return quorumFromResponse(resp, rp, time.Now()), nil
		}
		if !errors.Is(err, kerr.NotLeaderForPartition) {
			return quorumStatus{}, fmt.Errorf("describing the metadata quorum: %w", err)
		}
		if rp.LeaderID >= 0 && rp.LeaderID != target {
			target = rp.LeaderID
			continue
		}
		target = -1
		if sleepCtx(ctx, 200*time.Millisecond); ctx.Err() != nil {
			err := ctx.Err()
			return quorumStatus{}, fmt.Errorf("describing the metadata quorum: no active controller answered: %w", errors.Join(err, kerr.NotLeaderForPartition))
		}
	}
}

// quorumFromResponse turns a DescribeQuorum partition into a quorumStatus.
func quorumFromResponse(resp *kmsg.DescribeQuorumResponse, rp kmsg.DescribeQuorumResponseTopicPartition, now time.Time) quorumStatus {
	s := quorumStatus{Leader: rp.LeaderID, Term: rp.LeaderEpoch, CommitIndex: rp.HighWatermark,
		Voters: len(rp.CurrentVoters), Observers: len(rp.Observers), Members: []quorumMember{}}
	addrs := map[int32]string{}
	for _, n := range resp.Nodes {
		if len(n.Listeners) > 0 {
			l := n.Listeners[0]
			for _, cand := range n.Listeners {
				if cand.Name == "CONTROLLER" {
					l = cand
				}
			}
			addrs[n.NodeID] = net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))
		}
	}
	add := func(r kmsg.DescribeQuorumResponseTopicPartitionReplicaState, role string) {
		if role == "voter" && r.ReplicaID == rp.LeaderID {
			role = "leader"
		}
		m := quorumMember{NodeID: r.ReplicaID, Role: role, Address: addrs[r.ReplicaID], LogEnd: r.LogEndOffset, Lag: -1, LastContactMs: -1}
		if r.LogEndOffset >= 0 {
			m.Lag = max(0, rp.HighWatermark-r.LogEndOffset)
		}
		if r.LastFetchTimestamp >= 0 {
			m.LastContactMs = max(0, now.UnixMilli()-r.LastFetchTimestamp)
		}
		s.Members = append(s.Members, m)
	}
	for _, r := range rp.CurrentVoters {
		add(r, "voter")
	}
	for _, r := range rp.Observers {
		add(r, "observer")
	}
	return s
}

func printQuorum(w io.Writer, s quorumStatus) error {
	t := newTable(w)
	leader := fmt.Sprint(s.Leader)
	if s.Leader < 0 {
		leader = "none"
	}
	t.row("Leader:", leader)
	t.row("Term:", s.Term)
	t.row("Commit index:", s.CommitIndex)
	t.row("Voters:", fmt.Sprintf("%d (a majority is %d)", s.Voters, s.Voters/2+1))
	t.row("Observers:", s.Observers)
	if err := t.flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	t = newTable(w, "node", "role", "address", "log end", "lag", "last contact")
	for _, m := range s.Members {
		addr, end, lag := m.Address, fmt.Sprint(m.LogEnd), fmt.Sprint(m.Lag)
		if addr == "" {
			addr = "-"
		}
		if m.LogEnd < 0 {
			end, lag = "?", "?"
		}
		t.row(m.NodeID, m.Role, addr, end, lag, lastContact(m.LastContactMs))
	}
	return t.flush()
}

// lastContact formats how long ago the controller heard from a member.
func lastContact(ms int64) string {
	switch {
	case ms < 0:
		return "never"
	case ms < 1000:
		return fmt.Sprintf("%dms ago", ms)
	}
	return (time.Duration(ms) * time.Millisecond).Round(100*time.Millisecond).String() + " ago"
}

// ---- add-voter, remove-voter ----

func newQuorumAddVoterCmd(cf *clientFlags) *cobra.Command {
	var id int32
	var address string
	cmd := &cobra.Command{
		Use:   "add-voter --node-id N [--address host:port]",
		Short: "Make a node a voter of the metadata quorum: promote an observer, or add a new node at --address",
		Long: `Make node N a voter of the metadata quorum (AddRaftVoter, as
kafka-metadata-quorum.sh add-controller).

The usual way: start the node with an empty directory, a CONTROLLER listener
and the cluster's controller.quorum.voters (which does not name it); it joins
as an observer. Once ` + "`berth cluster quorum`" + ` shows it without lag, promote it
with add-voter --node-id N. The active controller refuses (REQUEST_TIMED_OUT)
while the observer lags.

With --address host:port (the node's controller listener) a node that is not
a member becomes a voter at once; it counts towards the majority before it
has the log, so the controller refuses it when the voters it hears from would
not be a majority without the new one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkNodeID(cmd, id); err != nil {
				return err
			}
			var host string
			var port uint16
			if address != "" {
				var err error
				if host, port, err = parseHostPort(address); err != nil {
					return fmt.Errorf("--address %q: %w", address, err)
				}
			}
			return withQuorumClient(cmd, cf, func(ctx context.Context, cl *kgo.Client) error {
				req := kmsg.NewPtrAddRaftVoterRequest()
				req.VoterID = id
				req.TimeoutMillis = int32(min(cf.timeout, time.Duration(1<<31-1)*time.Millisecond).Milliseconds())
				if address != "" {
					l := kmsg.NewAddRaftVoterRequestListener()
					l.Name, l.Host, l.Port = "CONTROLLER", host, port
					req.Listeners = []kmsg.AddRaftVoterRequestListener{l}
				}
				return runQuorumChange(ctx, cmd, cf, cl, req, id, "is now a voter", kerr.DuplicateVoter)
			})
		},
	}
	cmd.Flags().Int32Var(&id, "node-id", -1, "the node to make a voter (required)")
	cmd.Flags().StringVar(&address, "address", "", "the controller listener (host:port) of a node that is not a member yet")
	return cmd
}

func newQuorumRemoveVoterCmd(cf *clientFlags) *cobra.Command {
	var id int32
	cmd := &cobra.Command{
		Use:   "remove-voter --node-id N",
		Short: "Remove a voter (or an observer) from the metadata quorum",
		Long: `Remove node N from the metadata quorum (RemoveRaftVoter, as
kafka-metadata-quorum.sh remove-controller). Stop the node first; it must
not come back with its old directory. A node that is an observer is removed
too. If N is the active controller, it first hands its role to another voter,
which then removes it (the command follows the hand-over).

The last voter cannot be removed, and with N stopped the other voters must
stay up until the removal has applied.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkNodeID(cmd, id); err != nil {
				return err
			}
			return withQuorumClient(cmd, cf, func(ctx context.Context, cl *kgo.Client) error {
				req := kmsg.NewPtrRemoveRaftVoterRequest()
				req.VoterID = id
				return runQuorumChange(ctx, cmd, cf, cl, req, id, "is no longer a member of the quorum", kerr.VoterNotFound)
			})
		},
	}
	cmd.Flags().Int32Var(&id, "node-id", -1, "the node to remove (required)")
	return cmd
}

func checkNodeID(cmd *cobra.Command, id int32) error {
	switch {
	case !cmd.Flags().Changed("node-id"):
		return errors.New("--node-id is required")
	case id < 0:
		return fmt.Errorf("--node-id %d: node ids are 0 or more", id)
	}
	return nil
}

// parseHostPort checks a host:port with a port in 1-65535.
func parseHostPort(s string) (string, uint16, error) {
	host, ps, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, errors.New("want host:port")
	}
	port, err := strconv.ParseUint(ps, 10, 16)
	switch {
	case host == "":
		return "", 0, errors.New("the host is empty")
	case err != nil || port == 0:
		return "", 0, fmt.Errorf("port %q: want 1-65535", ps)
	}
	return host, uint16(port), nil
}

// runQuorumChange sends a voter change to the active controller and
// prints the outcome. done is the code that, on a repeated attempt, means
// an earlier attempt whose answer was lost already made the change.
func runQuorumChange(ctx context.Context, cmd *cobra.Command, cf *clientFlags, cl *kgo.Client,
	req kmsg.Request, id int32, what string, done *kerr.Error) error {
	code, msg, attempts, err := sendToController(ctx, cl, req)
	if err != nil {
		return cf.explain(err)
	}
	if err := responseError(code, msg); err != nil {
		if attempts > 1 && errors.Is(err, done) {
			fmt.Fprintf(cmd.ErrOrStderr(), "An earlier attempt made the change (the controller now says: %v).\n", err)
		} else {
			return quorumChangeFailure(cf, err)
		}
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "Node %d %s.\n", id, what)
	return err
}

// sendToController sends req to the active controller named by the
// cluster's metadata, asking again (after a fresh metadata request) while
// the answer is NOT_CONTROLLER, until ctx ends. It returns the response's
// error code and message and how many attempts it took. The metadata is
// requested directly: kadm's BrokerMetadata may answer from kgo's cache,
// which keeps naming a controller that has handed its role over.
func sendToController(ctx context.Context, cl *kgo.Client, req kmsg.Request) (int16, *string, int, error) {
	for attempt := 1; ; attempt++ {
		mreq := kmsg.NewPtrMetadataRequest()
		mreq.Topics = []kmsg.MetadataRequestTopic{}
		md, err := mreq.RequestWith(ctx, cl)
		if err != nil {
			return 0, nil, attempt, err
		}
		if md.ControllerID >= 0 {
			kr, err := cl.Broker(int(md.ControllerID)).Request(ctx, req)
			if err != nil {
				return 0, nil, attempt, err
			}
			var code int16
			var msg *string
			switch r := kr.(type) {
			case *kmsg.AddRaftVoterResponse:
				code, msg = r.ErrorCode, r.ErrorMessage
			case *kmsg.RemoveRaftVoterResponse:
				code, msg = r.ErrorCode, r.ErrorMessage
			default:
				return 0, nil, attempt, fmt.Errorf("unexpected response %T", kr)
			}
			if code != kerr.NotController.Code {
				return code, msg, attempt, nil
			}
		}
		if sleepCtx(ctx, 200*time.Millisecond); ctx.Err() != nil {
			err := ctx.Err()
			return 0, nil, attempt, fmt.Errorf("no active controller accepted the change: %w", errors.Join(err, kerr.NotController))
		}
	}
}

// quorumChangeFailure adds advice to a refused voter change that came
// without the broker's own explanation (Berth's say what to do).
func quorumChangeFailure(cf *clientFlags, err error) error {
	var bm *brokerMessageError
	if errors.As(err, &bm) {
		return err
	}
	hint := ""
	switch {
	case errors.Is(err, kerr.DuplicateVoter):
		hint = "see `berth cluster quorum`"
	case errors.Is(err, kerr.VoterNotFound):
		hint = "see `berth cluster quorum` for the members"
	case errors.Is(err, kerr.RequestTimedOut):
		hint = "retry once `berth cluster quorum` shows the previous change applied and the node without lag"
	case errors.Is(err, kerr.UnsupportedVersion):
		hint = "the cluster does not support changing voters (KIP-853)"
	}
	if hint == "" {
		return cf.explain(err)
	}
	return fmt.Errorf("%w (%s)", err, hint)
}

// responseError is the error for a response's code and message, nil for 0.
func responseError(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err == nil || msg == nil || *msg == "" {
		return err
	}
	return withBrokerMessage(err, *msg)
}
