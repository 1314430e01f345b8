package tests

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// Several clients look up the coordinator of a new group (or
// transactional id) at once on a fresh broker, and each sends its first
// request to the node named. The first FindCoordinator creates the
// internal topic; the others saw the topic in the metadata before this
// node had begun to load the partition, were named coordinator, and the
// coordinator then refused them with NOT_COORDINATOR although it led the
// partition (kafka-go's group Reader then backs off 5 s). Now
// FindCoordinator names this node once its coordinator has loaded the
// partition, and a coordinator that has not (yet) answers as Kafka does:
// COORDINATOR_LOAD_IN_PROGRESS while it leads the partition.
func TestFirstRequestsToNewCoordinator(t *testing.T) {
	const clients = 6
	for _, c := range []struct {
		name    string
		keyType int8
		// first is the client's first request to the coordinator.
		first func(i int) kmsg.Request
		// code reads its answer's error code; want is the code of a
		// request the coordinator served.
		code func(kmsg.Response) int16
		want int16
	}{
		{"classic", 0, func(int) kmsg.Request {
			r := kmsg.NewPtrJoinGroupRequest()
			r.Group, r.ProtocolType, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = "g", "consumer", 10000, 10000
			r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0}}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode }, kerr.MemberIDRequired.Code},
		{"consumer", 0, func(i int) kmsg.Request {
			r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			r.Group, r.MemberID, r.RebalanceTimeoutMillis = "g", fmt.Sprintf("member-%d", i), 10000
			r.SubscribedTopicNames, r.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode }, 0},
		{"share", 0, func(i int) kmsg.Request {
			r := kmsg.NewPtrShareGroupHeartbeatRequest()
			r.GroupID, r.MemberID, r.SubscribedTopicNames = "g", fmt.Sprintf("member-%d", i), []string{"t"}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.ShareGroupHeartbeatResponse).ErrorCode }, 0},
		{"transaction", 1, func(int) kmsg.Request {
			r := kmsg.NewPtrInitProducerIDRequest()
			id := "txn"
			r.TransactionalID, r.TransactionTimeoutMillis = &id, 60000
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := tc.Start(t)
			key := "g"
			if c.keyType == 1 {
				key = "txn"
			}
			ctx := ctxT(t, 30*time.Second)
			cls := make([]*kgo.Client, clients)
			for i := range cls {
				cls[i] = tc.Client(t, n.Addr())
			}
			var wg sync.WaitGroup
			for i, cl := range cls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					fc := kmsg.NewPtrFindCoordinatorRequest()
					fc.CoordinatorType, fc.CoordinatorKeys = c.keyType, []string{key}
					raw, err := tc.DirectRequest(ctx, cl, fc)
					if err != nil {
						t.Errorf("client %d: FindCoordinator: %v", i, err)
						return
					}
					co := raw.(*kmsg.FindCoordinatorResponse).Coordinators[0]
					if err := kerr.ErrorForCode(co.ErrorCode); err != nil {
						t.Errorf("client %d: FindCoordinator: %v", i, err)
						return
					}
					raw, err = cl.Broker(int(co.NodeID)).Request(ctx, c.first(i))
					if err != nil {
						t.Errorf("client %d: first request: %v", i, err)
						return
					}
					if got := c.code(raw); got != c.want {
						t.Errorf("client %d: first request to coordinator %d answered %v, want %v",
							i, co.NodeID, kerr.ErrorForCode(got), kerr.ErrorForCode(c.want))
					}
				}()
			}
			wg.Wait()
		})
	}
}
