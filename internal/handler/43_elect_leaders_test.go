package handler_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/cluster"
	"github.com/berthmq/berth/internal/handler"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// fakeElector answers ElectLeaders from a table and records its calls.
type fakeElector struct {
	mu      sync.Mutex
	calls   int
	typ     cluster.ElectionType
	parts   []cluster.TopicPartition
	all     []cluster.TopicPartition // what a nil parts means
	results map[cluster.TopicPartition]error
	err     error
	block   chan struct{} // when set, wait for it (ignoring ctx) first
}

func (f *fakeElector) ElectLeaders(ctx context.Context, typ cluster.ElectionType, parts []cluster.TopicPartition) ([]cluster.ElectionResult, error) {
	if f.block != nil {
		<-f.block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.typ, f.parts = typ, parts
	if f.err != nil {
		return nil, f.err
	}
	if parts == nil {
		parts = f.all
	}
	out := make([]cluster.ElectionResult, len(parts))
	for i, tp := range parts {
		out[i] = cluster.ElectionResult{TopicPartition: tp, Err: f.results[tp]}
	}
	return out, nil
}

var quietLog = slog.New(slog.DiscardHandler)

func newElectBroker(e handler.Elector) *handler.Broker {
	return handler.New(handler.Config{Elector: e, Logger: quietLog})
}

func tp(topic string, p int32) cluster.TopicPartition {
	return cluster.TopicPartition{Topic: topic, Partition: p}
}

// electReq builds an ElectLeaders request; topics "a:0,1" name partitions,
// no topics at all is the null list.
func electReq(version int16, typ int8, topics ...string) *kmsg.ElectLeadersRequest {
	r := kmsg.NewPtrElectLeadersRequest()
	r.Version, r.ElectionType = version, typ
	for _, s := range topics {
		name, ps, _ := strings.Cut(s, ":")
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic = name
		rt.Partitions = []int32{}
		for p := range strings.SplitSeq(ps, ",") {
			if p != "" {
				var n int32
				fmt.Sscan(p, &n)
				rt.Partitions = append(rt.Partitions, n)
			}
		}
		r.Topics = append(r.Topics, rt)
	}
	return r
}

// callElect serves r and returns the response as a client decodes it at
// r's version.
func callElect(t *testing.T, b *handler.Broker, r *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	t.Helper()
	reply, err := b.Handle(context.Background(), &server.Request{Key: 43, Version: r.Version, ClientID: "test", Body: r})
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	resp := reply().(*kmsg.ElectLeadersResponse)
	got := kmsg.NewPtrElectLeadersResponse()
	got.Version = r.Version
	if err := got.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatalf("v%d response does not decode: %v", r.Version, err)
	}
	return got
}

func codeName(c int16) string {
	if c == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(c).(*kerr.Error).Message
}

// summary writes a response as "top=CODE a[0=CODE 1=CODE] b[]".
func summary(resp *kmsg.ElectLeadersResponse) string {
	var b strings.Builder
	fmt.Fprintf(&b, "top=%s", codeName(resp.ErrorCode))
	for _, rt := range resp.Topics {
		var ps []string
		for _, rp := range rt.Partitions {
			ps = append(ps, fmt.Sprintf("%d=%s", rp.Partition, codeName(rp.ErrorCode)))
		}
		fmt.Fprintf(&b, " %s[%s]", rt.Topic, strings.Join(ps, " "))
	}
	return b.String()
}

// Every per-partition outcome of the Elector maps to Kafka's code, with a
// message for errors; partitions are answered in the order named, once
// each, under the topic's first entry.
func TestElectLeadersMapsResults(t *testing.T) {
	f := &fakeElector{results: map[cluster.TopicPartition]error{
		tp("a", 1): fmt.Errorf("%w: broker 1 already leads partition 1", cluster.ErrElectionNotNeeded),
		tp("a", 2): fmt.Errorf("%w: preferred replica 3 is offline", cluster.ErrPreferredLeaderNotAvailable),
		tp("a", 3): fmt.Errorf("%w: no live replica", cluster.ErrEligibleLeadersNotAvailable),
		tp("a", 4): fmt.Errorf("%w: partition 4 is at epoch 9, not 8", metadata.ErrStaleEpoch),
		tp("b", 0): fmt.Errorf("%w: b-0", cluster.ErrUnknownPartition),
	}}
	b := newElectBroker(f)
	for v := int16(0); v <= 2; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			typ := int8(cluster.Unclean)
			if v == 0 {
				typ = 0 // no election type before v1
			}
			resp := callElect(t, b, electReq(v, typ, "a:0,1,2,3,0", "b:0", "a:4,1"))
			want := "top=NONE a[0=NONE 1=ELECTION_NOT_NEEDED 2=PREFERRED_LEADER_NOT_AVAILABLE 3=ELIGIBLE_LEADERS_NOT_AVAILABLE 4=INVALID_UPDATE_VERSION] b[0=UNKNOWN_TOPIC_OR_PARTITION]"
			if got := summary(resp); got != want {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if (rp.ErrorCode == 0) != (rp.ErrorMessage == nil) {
						t.Errorf("%s-%d: code %d with message %v", rt.Topic, rp.Partition, rp.ErrorCode, rp.ErrorMessage)
					}
				}
			}
			if msg := resp.Topics[0].Partitions[2].ErrorMessage; msg == nil || !strings.Contains(*msg, "preferred replica 3 is offline") {
				t.Errorf("message %v does not say why", msg)
			}
			wantParts := []cluster.TopicPartition{tp("a", 0), tp("a", 1), tp("a", 2), tp("a", 3), tp("a", 4), tp("b", 0)}
			if !slices.Equal(f.parts, wantParts) {
				t.Errorf("Elector asked for %v, want %v", f.parts, wantParts)
			}
			if want := cluster.ElectionType(typ); f.typ != want {
				t.Errorf("election type %d, want %d", f.typ, want)
			}
		})
	}
}

// A null topic list elects every partition and answers only those that
// needed an election, with an entry for every topic (as Kafka does).
func TestElectLeadersAllPartitions(t *testing.T) {
	f := &fakeElector{
		all: []cluster.TopicPartition{tp("a", 0), tp("a", 1), tp("b", 0), tp("c", 0), tp("c", 1)},
		results: map[cluster.TopicPartition]error{
			tp("a", 1): cluster.ErrElectionNotNeeded,
			tp("b", 0): cluster.ErrElectionNotNeeded,
			tp("c", 1): cluster.ErrPreferredLeaderNotAvailable,
		},
	}
	b := newElectBroker(f)
	resp := callElect(t, b, electReq(2, 0))
	if got, want := summary(resp), "top=NONE a[0=NONE] b[] c[0=NONE 1=PREFERRED_LEADER_NOT_AVAILABLE]"; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if f.parts != nil {
		t.Errorf("Elector got %v, want nil (every partition)", f.parts)
	}

	// An empty, non-null list names no partition: nothing is elected.
	r := electReq(2, 0)
	r.Topics = []kmsg.ElectLeadersRequestTopic{}
	resp = callElect(t, b, r)
	if got, want := summary(resp), "top=NONE"; got != want {
		t.Fatalf("empty list: got %s, want %s", got, want)
	}
	if f.parts == nil || len(f.parts) != 0 {
		t.Errorf("empty list: Elector got %#v, want an empty non-nil list", f.parts)
	}
}

// Without an Elector, or when the Elector is not the active controller,
// the request is answered NOT_CONTROLLER: top level from v1, and on every
// partition named (v0 has only those), so clients go to the controller.
func TestElectLeadersNotController(t *testing.T) {
	for name, cfg := range map[string]handler.Config{
		"no elector":     {},
		"not the leader": {Elector: &fakeElector{err: fmt.Errorf("%w: elect leaders", metadata.ErrNotLeader)}},
		"closed":         {Elector: &fakeElector{err: metadata.ErrClosed}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg.Logger = quietLog
			b := handler.New(cfg)
			for v, want := range map[int16]string{
				0: "top=NONE a[0=NOT_CONTROLLER 1=NOT_CONTROLLER]",
				1: "top=NOT_CONTROLLER a[0=NOT_CONTROLLER 1=NOT_CONTROLLER]",
				2: "top=NOT_CONTROLLER a[0=NOT_CONTROLLER 1=NOT_CONTROLLER]",
			} {
				if got := summary(callElect(t, b, electReq(v, 0, "a:0,1"))); got != want {
					t.Errorf("v%d: got %s, want %s", v, got, want)
				}
			}
			if got, want := summary(callElect(t, b, electReq(2, 0))), "top=NOT_CONTROLLER"; got != want {
				t.Errorf("null list: got %s, want %s", got, want)
			}
		})
	}
}

// An election type other than preferred (0) and unclean (1) is refused
// before the Elector is asked.
func TestElectLeadersUnknownType(t *testing.T) {
	f := &fakeElector{}
	b := newElectBroker(f)
	resp := callElect(t, b, electReq(1, 2, "a:0"))
	if got, want := summary(resp), "top=INVALID_REQUEST a[0=INVALID_REQUEST]"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if f.calls != 0 {
		t.Errorf("the Elector was called %d times", f.calls)
	}
}

// The request's timeout bounds the answer even while the Elector has not
// looked at its context yet (it waits for the Supervisor's round).
func TestElectLeadersRequestTimeout(t *testing.T) {
	f := &fakeElector{block: make(chan struct{})}
	defer close(f.block)
	b := newElectBroker(f)
	r := electReq(2, 0, "a:0")
	r.TimeoutMillis = 100
	start := time.Now()
	resp := callElect(t, b, r)
	if got, want := summary(resp), "top=REQUEST_TIMED_OUT a[0=REQUEST_TIMED_OUT]"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("answered after %v for a 100 ms timeout", d)
	}

	// An Elector that gives up on its context: the same answer.
	ctxElector := electorFunc(func(ctx context.Context, _ cluster.ElectionType, _ []cluster.TopicPartition) ([]cluster.ElectionResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	b = newElectBroker(ctxElector)
	if got, want := summary(callElect(t, b, r)), "top=REQUEST_TIMED_OUT a[0=REQUEST_TIMED_OUT]"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

type electorFunc func(context.Context, cluster.ElectionType, []cluster.TopicPartition) ([]cluster.ElectionResult, error)

func (f electorFunc) ElectLeaders(ctx context.Context, typ cluster.ElectionType, parts []cluster.TopicPartition) ([]cluster.ElectionResult, error) {
	return f(ctx, typ, parts)
}

// memController is a cluster.Controller over an in-memory image: the
// active controller of a cluster whose records apply at once.
type memController struct {
	mu sync.Mutex
	im *metadata.Image
}

func (c *memController) Image() *metadata.Image {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.im
}

func (c *memController) Propose(_ context.Context, recs ...metadata.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	next, _, err := metadata.Apply(c.im, c.im.Index+1, recs)
	if err != nil {
		return err
	}
	c.im = next
	return nil
}

func (c *memController) IsLeader() bool { return true }

func (c *memController) Subscribe() (<-chan struct{}, func()) { return make(chan struct{}), func() {} }

func (c *memController) mustPropose(t *testing.T, recs ...metadata.Record) {
	t.Helper()
	if err := c.Propose(context.Background(), recs...); err != nil {
		t.Fatal(err)
	}
}

// allSeen is a Liveness that has just heard from every broker.
type allSeen struct{}

func (allSeen) LastSeen(int32) (time.Time, bool) { return time.Now(), true }

// ElectLeaders through the real Supervisor: a preferred election moves a
// partition back to its first replica, and the answers for partitions
// that need none or do not exist are Kafka's.
func TestElectLeadersWithSupervisor(t *testing.T) {
	ctrl := &memController{im: &metadata.Image{
		Brokers: map[int32]metadata.Broker{}, Topics: map[string]*metadata.Topic{},
		TopicIDs: map[[16]byte]string{}, BrokerConfigs: map[string]string{},
	}}
	ctrl.mustPropose(t, metadata.Record{SetClusterID: &metadata.SetClusterID{ID: "AAAAAAAAAAAAAAAAAAAAAA"}})
	for id := int32(1); id <= 3; id++ {
		ctrl.mustPropose(t, metadata.Record{RegisterBroker: &metadata.RegisterBroker{ID: id, Host: "localhost", Port: 9092 + id}})
	}
	ctrl.mustPropose(t, metadata.Record{CreateTopic: &metadata.CreateTopic{
		Name: "t", ID: [16]byte{1}, Partitions: 2, Replicas: [][]int32{{1, 2, 3}, {2, 3, 1}},
	}})
	two := int32(2)
	ctrl.mustPropose(t, metadata.Record{PartitionChange: &metadata.PartitionChange{Topic: "t", Partition: 0, Leader: &two}})
	if l := ctrl.Image().Topic("t").Partition(0).Leader; l != 2 {
		t.Fatalf("setup: t-0 led by %d, want 2", l)
	}
	sup, err := cluster.New(ctrl, allSeen{}, cluster.Config{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	b := newElectBroker(sup)

	resp := callElect(t, b, electReq(2, int8(cluster.Unclean), "t:0"))
	if got, want := summary(resp), "top=NONE t[0=ELECTION_NOT_NEEDED]"; got != want {
		t.Fatalf("unclean with a live leader: got %s, want %s", got, want)
	}
	resp = callElect(t, b, electReq(2, int8(cluster.Preferred), "t:0,1,7", "u:0"))
	if got, want := summary(resp), "top=NONE t[0=NONE 1=ELECTION_NOT_NEEDED 7=UNKNOWN_TOPIC_OR_PARTITION] u[0=UNKNOWN_TOPIC_OR_PARTITION]"; got != want {
		t.Fatalf("preferred: got %s, want %s", got, want)
	}
	if l := ctrl.Image().Topic("t").Partition(0).Leader; l != 1 {
		t.Errorf("after the election t-0 is led by %d, want 1", l)
	}
	// Now every partition has its preferred leader: nothing to answer.
	if got, want := summary(callElect(t, b, electReq(2, 0))), "top=NONE t[]"; got != want {
		t.Errorf("all partitions: got %s, want %s", got, want)
	}
}

// A broker started the usual way (internal/app) serves every version of
// ElectLeaders: NOT_CONTROLLER while the node has no Elector, Kafka's
// answers once it does (a single node already has every preferred leader).
// Raw frames, so that each version is sent as is and nothing retries.
func TestElectLeadersOnBroker(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "elect", 2, nil)
	c, err := net.DialTimeout("tcp", n.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	for v := int16(0); v <= 2; v++ {
		r := electReq(v, 0, "elect:0,1,5")
		if _, err := c.Write(frame(43, v, int32(v), r.IsFlexible(), r.AppendTo(nil))); err != nil {
			t.Fatal(err)
		}
		corr, body, err := readResponse(c)
		if err != nil || corr != int32(v) {
			t.Fatalf("v%d: correlation id %d, %v", v, corr, err)
		}
		if r.IsFlexible() {
			body = body[1:] // response header tags
		}
		resp := kmsg.NewPtrElectLeadersResponse()
		resp.Version = v
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		got := summary(resp)
		want := "top=NONE elect[0=ELECTION_NOT_NEEDED 1=ELECTION_NOT_NEEDED 5=UNKNOWN_TOPIC_OR_PARTITION]"
		if strings.Contains(got, "NOT_CONTROLLER") {
			top := "NOT_CONTROLLER"
			if v == 0 {
				top = "NONE"
			}
			want = "top=" + top + " elect[0=NOT_CONTROLLER 1=NOT_CONTROLLER 5=NOT_CONTROLLER]"
		}
		if got != want {
			t.Errorf("v%d: got %s, want %s", v, got, want)
		}
	}
}
