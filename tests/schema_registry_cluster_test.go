package tests

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// registered is one acknowledged registration.
type registered struct {
	subject, schema string
	id              int
}

// The registry on three nodes: registrations go to every node (the
// followers forward them to the leader of _schemas), and the leader is
// killed (SIGKILL, by PID) while they run. Every acknowledged
// registration keeps its id on every node afterwards, the killed one
// included once it is back; no id is given to two schemas; a schema
// registered again (the client's retry) keeps its id.
func TestSchemaRegistryFailover(t *testing.T) {
	c := tc.StartCluster(t, 3)
	adm := clusterAdmin(t, c)
	ctx := ctxT(t, 3*time.Minute)
	client := func(id int32) *sr.Client { return srClient(t, c.Node(id).HTTPAddr()) }

	first, err := client(1).CreateSchema(ctx, "failover-0", sr.Schema{Schema: `"string"`})
	if err != nil {
		t.Fatal(err)
	}
	leader := partitionLeader(t, adm, "_schemas", 0)
	var writers []int32
	for _, id := range c.IDs() {
		if id != leader {
			writers = append(writers, id)
		}
	}
	t.Logf("_schemas led by node %d; registering through nodes %v", leader, writers)

	var (
		mu    sync.Mutex
		acked = []registered{{"failover-0", `"string"`, first.ID}}
		count atomic.Int64
		wg    sync.WaitGroup
	)
	const perWriter = 40
	for w, node := range writers {
		cl := client(node)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				subject := fmt.Sprintf("failover-%d-%d", w, i)
				schema := fmt.Sprintf(`{"type":"record","name":"R%d_%d","fields":[{"name":"f","type":"long"}]}`, w, i)
				// Retry until acknowledged: a registration cut by the
				// kill may or may not have landed; again it returns
				// the same id if it did.
				deadline := time.Now().Add(60 * time.Second)
				for {
					rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					s, err := cl.CreateSchema(rctx, subject, sr.Schema{Schema: schema})
					cancel()
					if err == nil {
						mu.Lock()
						acked = append(acked, registered{subject, schema, s.ID})
						mu.Unlock()
						count.Add(1)
						if testing.Verbose() {
							t.Logf("%s through node %d: id %d", subject, node, s.ID)
						}
						break
					}
					if testing.Verbose() {
						t.Logf("%s through node %d: %v", subject, node, err)
					}
					if time.Now().After(deadline) || ctx.Err() != nil {
						t.Errorf("registering %s through node %d: %v", subject, node, err)
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	poll.Until(t, 60*time.Second, func() error {
		if n := count.Load(); n < 10 {
			return fmt.Errorf("%d registrations so far", n)
		}
		return nil
	})
	c.Kill(leader)
	t.Logf("killed node %d after %d registrations", leader, count.Load())
	wg.Wait()
	if t.Failed() {
		return
	}
	var newLeader int32
	poll.Until(t, 20*time.Second, func() error {
		// (kgo answers metadata from its cache for a few seconds)
		if newLeader = partitionLeader(t, adm, "_schemas", 0); newLeader == leader {
			return fmt.Errorf("_schemas still led by the killed node %d", leader)
		}
		return nil
	})
	c.Restart(leader)

	byID := map[int]string{}
	for _, r := range acked {
		if prev, ok := byID[r.id]; ok && prev != r.schema {
			t.Fatalf("id %d given to two schemas:\n%s\n%s", r.id, prev, r.schema)
		}
		byID[r.id] = r.schema
	}
	if len(acked) != 1+perWriter*len(writers) {
		t.Fatalf("%d registrations acknowledged, want %d", len(acked), 1+perWriter*len(writers))
	}
	for _, id := range c.IDs() {
		cl := client(id)
		poll.Until(t, 30*time.Second, func() error {
			for _, r := range acked {
				s, err := cl.SchemaByID(ctx, r.id)
				if err != nil {
					return fmt.Errorf("node %d: id %d: %w", id, r.id, err)
				}
				if s.Schema != r.schema {
					return fmt.Errorf("node %d: id %d is %s, want %s", id, r.id, s.Schema, r.schema)
				}
				ss, err := cl.SchemaByVersion(ctx, r.subject, -1)
				if err != nil || ss.ID != r.id {
					return fmt.Errorf("node %d: %s latest: %+v, %v; want id %d", id, r.subject, ss, err, r.id)
				}
			}
			return nil
		})
	}
	// A registration after all this still gets a fresh id.
	s, err := client(leader).CreateSchema(ctx, "failover-after", sr.Schema{Schema: `"bytes"`})
	if err != nil {
		t.Fatal(err)
	}
	if _, taken := byID[s.ID]; taken {
		t.Fatalf("new schema got id %d, already given", s.ID)
	}
	var re *sr.ResponseError
	if _, err := client(newLeader).SchemaByID(ctx, 1<<30); !errors.As(err, &re) || re.ErrorCode != 40403 {
		t.Fatalf("unknown id: %v, want 40403", err)
	}
}
