package testcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Cluster is a cluster of real `berth serve` processes on loopback: every
// node is a broker and a voter of the metadata quorum (combined mode), as
// in docker-compose.yml. Node ids are 1..N. Each node's Kafka and
// controller ports are fixed for the life of the cluster, so a restarted
// node comes back at the same addresses.
//
// The voters list points at a quorumProxy in front of each node's
// controller listener, so Cut can isolate a node from the metadata quorum
// while it keeps serving Kafka clients and replicas.
type Cluster struct {
	t     testing.TB
	Nodes []*ClusterNode
	// Dir keeps the nodes' logs (node<id>.log) and whatever a test writes
	// there; see ArtifactDir.
	Dir string

	cutMu sync.Mutex
	cut   map[int32]bool
}

// ClusterNode is one node of a Cluster.
type ClusterNode struct {
	*Process
	ID             int32
	KafkaAddr      string // fixed across restarts
	ControllerAddr string // the node's own controller listener
	proxy          *quorumProxy
}

// ClusterArgs are the flags every node of a test cluster gets before the
// caller's: short timeouts so faults are detected within seconds.
var ClusterArgs = []string{
	"--broker.session.timeout.ms", "2000",
	"--replica.lag.time.max.ms", "2000",
	"--controller.quorum.election.timeout.ms", "300",
	"--controller.quorum.startup.timeout.ms", "30000",
	"--group.initial.rebalance.delay.ms", "0",
	"--log.dir.min.free.bytes", "0",
	"--offsets.topic.num.partitions", "4",
	"--share.coordinator.state.topic.num.partitions", "4",
}

// StartCluster starts n nodes with ClusterArgs plus args, concurrently,
// and waits until every one is ready (has joined the quorum and caught
// up). Every process is killed and every proxy closed at test cleanup.
func StartCluster(t testing.TB, n int, args ...string) *Cluster {
	t.Helper()
	c := NewCluster(t, n, args...)
	c.Start(c.IDs()...)
	return c
}

// NewCluster is StartCluster without the start: the n nodes are voters
// of the quorum and none runs until Start (which needs a majority at
// first), so a test can see a cluster whose brokers are not all up yet.
func NewCluster(t testing.TB, n int, args ...string) *Cluster {
	t.Helper()
	Binary(t)
	c := &Cluster{t: t, Dir: ArtifactDir(t), cut: map[int32]bool{}}
	ports := ReservePorts(t, 2*n)
	var voters []string
	for i := range n {
		id := int32(i + 1)
		nd := &ClusterNode{
			ID:             id,
			KafkaAddr:      fmt.Sprintf("127.0.0.1:%d", ports[2*i]),
			ControllerAddr: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]),
		}
		px, err := newQuorumProxy(id, nd.ControllerAddr, c.isCut)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(px.Close)
		nd.proxy = px
		voters = append(voters, fmt.Sprintf("%d@%s", id, px.Addr()))
		c.Nodes = append(c.Nodes, nd)
	}
	for _, nd := range c.Nodes {
		a := []string{
			"--node.id", fmt.Sprint(nd.ID),
			"--listeners", "PLAINTEXT://" + nd.KafkaAddr + ",CONTROLLER://" + nd.ControllerAddr,
			"--controller.quorum.voters", strings.Join(voters, ","),
		}
		a = append(append(a, ClusterArgs...), args...)
		nd.Process = newProcess(t, filepath.Join(t.TempDir(), fmt.Sprintf("node%d", nd.ID)), a...)
		nd.LogFile = filepath.Join(c.Dir, fmt.Sprintf("node%d.log", nd.ID))
	}
	t.Logf("cluster: %d nodes %v, logs in %s", n, c.Addrs(), c.Dir)
	return c
}

// IDs lists the node ids, 1..N.
func (c *Cluster) IDs() []int32 {
	var ids []int32
	for _, nd := range c.Nodes {
		ids = append(ids, nd.ID)
	}
	return ids
}

// Node returns the node with id.
func (c *Cluster) Node(id int32) *ClusterNode {
	for _, nd := range c.Nodes {
		if nd.ID == id {
			return nd
		}
	}
	c.t.Fatalf("no node %d", id)
	return nil
}

// Addrs are the Kafka addresses of every node, running or not (seed
// brokers for clients).
func (c *Cluster) Addrs() []string {
	var out []string
	for _, nd := range c.Nodes {
		out = append(out, nd.KafkaAddr)
	}
	return out
}

// Start launches the given nodes (which must not be running) concurrently
// and waits until each is ready: a node waits for a quorum leader, so
// starting a majority together is the only way to start a stopped cluster.
func (c *Cluster) Start(ids ...int32) {
	c.t.Helper()
	for _, id := range ids {
		if err := c.Node(id).launch(); err != nil {
			c.t.Fatalf("node %d: %v", id, err)
		}
	}
	for _, id := range ids {
		if err := c.Node(id).waitReady(60 * time.Second); err != nil {
			c.t.Fatalf("node %d: %v", id, err)
		}
	}
}

// Restart starts a stopped or killed node again over its data and waits
// until it is ready; a node still running is stopped first (SIGTERM, a
// controlled shutdown, as Stop).
func (c *Cluster) Restart(id int32) {
	c.t.Helper()
	if c.Node(id).Running() {
		c.Stop(id)
	}
	c.Start(id)
}

// Kill sends SIGKILL to node id's process and waits for it to exit.
func (c *Cluster) Kill(id int32) { c.Node(id).Kill() }

// Pause sends SIGSTOP to node id's process.
func (c *Cluster) Pause(id int32) { c.Node(id).Pause() }

// Resume sends SIGCONT to node id's process.
func (c *Cluster) Resume(id int32) { c.Node(id).Resume() }

// Stop sends SIGTERM to node id (a controlled shutdown) and waits for it
// to exit; it fails the test unless the exit is clean.
func (c *Cluster) Stop(id int32) {
	c.t.Helper()
	if err := c.Node(id).Stop(); err != nil {
		c.t.Fatalf("node %d: stop: %v", id, err)
	}
}

// StopAll sends SIGTERM to every running node at once and waits for all.
func (c *Cluster) StopAll() {
	c.t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(c.Nodes))
	for i, nd := range c.Nodes {
		wg.Go(func() { errs[i] = nd.Stop() })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			c.t.Fatalf("node %d: stop: %v", c.Nodes[i].ID, err)
		}
	}
}

func (c *Cluster) isCut(id int32) bool {
	c.cutMu.Lock()
	defer c.cutMu.Unlock()
	return c.cut[id]
}

// Cut isolates node id from the metadata quorum: every Raft connection to
// it and from it is closed, and new ones are refused, until Heal. The
// process keeps running and keeps serving Kafka clients and replica
// fetches; only the quorum (and so the active controller) stops hearing
// from it.
func (c *Cluster) Cut(id int32) {
	c.cutMu.Lock()
	c.cut[id] = true
	c.cutMu.Unlock()
	for _, nd := range c.Nodes {
		nd.proxy.sever(id)
	}
}

// Heal undoes Cut: the node's Raft connections are let through again (the
// transport redials within its backoff, at most 2 s).
func (c *Cluster) Heal(id int32) {
	c.cutMu.Lock()
	delete(c.cut, id)
	c.cutMu.Unlock()
}

// Direct returns a client whose requests sent through DirectRequest go to
// node id only (its seed broker), never to another node: for asking one
// node what it believes, or producing to a node that thinks it leads.
func (c *Cluster) Direct(t testing.TB, id int32, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return Client(t, c.Node(id).KafkaAddr, opts...)
}

// DirectRequest sends req to the seed broker of a Direct client.
func DirectRequest(ctx context.Context, cl *kgo.Client, req kmsg.Request) (kmsg.Response, error) {
	seeds := cl.SeedBrokers()
	if len(seeds) != 1 {
		return nil, fmt.Errorf("direct client has %d seed brokers", len(seeds))
	}
	return seeds[0].Request(ctx, req)
}

// ArtifactDir is a directory for a test's logs and histories that
// outlives a failing test: $BERTH_FAULT_HISTORY_DIR/<test>-<time> when that
// variable is set (always kept), else a new directory under the system's
// temporary directory that is removed at cleanup if the test passed.
func ArtifactDir(t testing.TB) string {
	t.Helper()
	name := regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_")
	if root := os.Getenv("BERTH_FAULT_HISTORY_DIR"); root != "" {
		dir := filepath.Join(root, name+"-"+time.Now().UTC().Format("20060102T150405.000"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dir, err := os.MkdirTemp("", "berth-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
		}
	})
	return dir
}
