// Package app wires one node together and runs it until its context ends:
// settings → components → wiring → start order → shutdown. It holds no
// service of its own (no lock): the coordinators, their loaders and their
// appenders live in their packages (group, sharestate, txn, replica), and
// app only makes them and connects them.
//
// Start order: metadata controller (raft) → broker registration → replica
// manager (opens and recovers partition logs) → the coordinators and
// their loaders → Kafka listener → HTTP listener (docs/DESIGN.md, "Start
// and stop"). Shutdown runs in reverse: stop accepting, close
// connections, stop the coordinators, fsync and close logs, snapshot and
// close the controller.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/berthmq/berth/internal/audit"
	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/cluster"
	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/dlq"
	"github.com/berthmq/berth/internal/group"
	"github.com/berthmq/berth/internal/handler"
	blog "github.com/berthmq/berth/internal/log"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/peer"
	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/sharepart"
	"github.com/berthmq/berth/internal/sharestate"
	"github.com/berthmq/berth/internal/txn"
)

// Node is one running broker.
type Node struct {
	cfg      *config.Config
	log      *slog.Logger
	ctrl     *metadata.Controller
	raftTr   *metadata.TCPTransport // nil on a single node
	sup      *cluster.Supervisor
	supStop  context.CancelFunc
	supDone  chan struct{}
	replicas *replica.Manager
	kafka    *server.Server // the first Kafka listener's
	http     *http.Server
	httpLn   net.Listener
	httpRaw  net.Listener // the HTTP listener's socket, bound at start
	httpAdv  string       // its advertised host:port, in the broker's registration
	schemas  *schemaStore // the schema registry; nil when schema.registry.enable is false
	authz    auth.Authorizer
	groups   *group.Coordinator
	shares   *sharepart.Registry
	dlq      *dlq.Writer             // the share groups' dead-letter writes
	audit    *audit.Writer           // the audit trail; nil when off (audit.log.enable)
	loaders  *replica.Loaders        // the coordinators' partitions, loaded where this node leads
	states   *sharestate.Coordinator // the share coordinator
	txns     *txn.Coordinator
	kh       *handler.Broker
	peers    *peer.Pool            // requests to other brokers (share state, transactions)
	topics   *cluster.Topics       // creates the internal topics
	pids     *metadata.ProducerIDs // producer ids, for InitProducerId and the transaction coordinator
	nodeID   int32
	unsub    func()
	stop     chan struct{} // closed to end follow
	done     chan struct{} // closed when follow has ended

	// listeners are the Kafka listeners (listeners.go); interBroker is
	// the one other brokers use.
	listeners   []*kafkaListener
	interBroker *kafkaListener
	httpTLS     *server.TLSStore    // nil: plain HTTP
	ctlTLS      *namedStore         // nil: plain TCP Raft
	sasl        *handler.SASLConfig // SaslHandshake/SaslAuthenticate's listeners and counters
	peerSASL    sasl.Mechanism      // how this node authenticates to SASL listeners (its own, its peers'); nil: none
}

// Run starts a node and blocks until ctx is done, then shuts down cleanly.
func Run(ctx context.Context, cfg *config.Config) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()}))
	n, err := Start(ctx, cfg, logger)
	if err != nil {
		return err
	}
	logger.Info("berth ready", "kafka", n.KafkaAddr(), "http", n.HTTPAddr(), "data", cfg.Get("log.dirs"),
		"durability.mode", cfg.Get("durability.mode"))
	<-ctx.Done()
	logger.Info("shutting down")
	return n.Close()
}

func logLevel() slog.Level {
	switch strings.ToLower(os.Getenv("BERTH_LOG_LEVEL")) {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// Start brings a node up and returns once it serves requests.
func Start(ctx context.Context, cfg *config.Config, logger *slog.Logger) (_ *Node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir := cfg.Get("log.dirs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("log.dirs %s: %w", dir, err)
	}
	n := &Node{cfg: cfg, log: logger, stop: make(chan struct{}), done: make(chan struct{})}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	nodeID := int32(cfg.Int("node.id"))
	kls, err := cfg.KafkaListeners()
	if err != nil {
		return nil, err
	}
	protos := map[string]string{}
	for _, l := range kls {
		protos[l.Name] = l.Protocol
	}
	if n.sasl, err = newSASL(cfg, protos, func() *metadata.Image { return n.image() }, logger); err != nil {
		return nil, err
	}
	ib, err := cfg.InterBrokerListener()
	if err != nil {
		return nil, err
	}
	if n.peerSASL, err = interBrokerSASL(cfg, ib.Name, ib.Protocol, logger); err != nil {
		return nil, err
	}

	mc := metadata.Config{
		Dir:          filepath.Join(dir, metadata.DirName),
		NodeID:       metadata.RaftID(nodeID),
		ClusterID:    cfg.Get("cluster.id"),
		TickInterval: cfg.Duration("controller.quorum.election.timeout.ms") / metadata.ElectionTicks,
		Logger:       logger, // the controller adds component=metadata
	}
	if err := n.quorum(cfg, &mc); err != nil {
		return nil, err
	}
	mc.Defaults()
	if n.ctrl, err = metadata.Open(mc); err != nil {
		return nil, fmt.Errorf("opening metadata log: %w", err)
	}
	if err := n.startController(ctx, cfg, mc); err != nil {
		return nil, err
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	if err := n.bindListeners(cfg); err != nil {
		return nil, err
	}
	advHost, advPort := n.interBroker.adv.Host, n.interBroker.adv.Port
	if addr := cfg.Get("http.listener"); addr != "" {
		// Bound before the broker registers: the registration carries
		// its address, where other nodes forward schema registry writes.
		if n.httpRaw, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("http.listener %s: %w (set http.listener= to another address, or empty to disable)", addr, err)
		}
		n.httpAdv = advertisedHTTP(n.httpRaw.Addr(), advHost)
	}
	if err := n.register(startCtx, nodeID, advHost, advPort); err != nil {
		return nil, err
	}

	n.replicas = replica.NewManager(replica.ManagerConfig{
		Dial:                     n.peerDialer(),
		Dir:                      dir,
		NodeID:                   nodeID,
		Fsync:                    cfg.Get("durability.mode") == "fsync",
		FlushInterval:            cfg.Duration("log.flush.interval.ms"),
		PreallocateBytes:         cfg.Int("log.preallocate.bytes"),
		SyncFilesystemPartitions: int(cfg.Int("log.flush.filesystem.partitions")),
		RetentionCheck:           cfg.Duration("log.retention.check.interval.ms"),
		IndexCheckpoint:          cfg.Duration("log.flush.offset.checkpoint.interval.ms"),
		ProducerExpiry:           cfg.Duration("producer.id.expiration.ms"),
		MinFreeBytes:             cfg.Int("log.dir.min.free.bytes"),
		CleanerEnable:            cfg.Bool("log.cleaner.enable"),
		CleanerBackoff:           cfg.Duration("log.cleaner.backoff.ms"),
		Resolve:                  func(t *metadata.Topic) replica.TopicConfig { return resolveTopic(cfg, n.ctrl.Image(), t) },
		Logger:                   logger.With("component", "replica"),

		AlterPartition:               n.alterPartition,
		ReplicaLagMax:                cfg.Duration("replica.lag.time.max.ms"),
		ReplicaFetchWait:             cfg.Duration("replica.fetch.wait.max.ms"),
		ReplicaFetchMaxBytes:         int32(cfg.Int("replica.fetch.max.bytes")),
		ReplicaFetchResponseMaxBytes: int32(cfg.Int("replica.fetch.response.max.bytes")),
		ThrottleRate: func() int64 {
			v, _ := cfg.ResolveBroker("follower.replication.throttled.rate", n.ctrl.Image().BrokerConfigs)
			rate, _ := strconv.ParseInt(v, 10, 64)
			return rate
		},
		PeerSASL: n.peerSASL,
	})
	// Subscribe before the first Apply: an image applied after that Apply
	// and before a later Subscribe would notify nobody, and in a quiet
	// cluster the partitions would follow stale leaders until the next
	// metadata change. (If Start fails before the follow loop runs, the
	// subscription goes with the controller, which Close closes.)
	ch, unsub := n.ctrl.Subscribe()
	if err := n.replicas.Apply(n.ctrl.Image()); err != nil {
		return nil, fmt.Errorf("opening partitions: %w", err)
	}
	n.replicas.Start(context.Background())
	n.nodeID = nodeID
	n.peers = &peer.Pool{ClientID: "berth-broker-" + strconv.Itoa(int(nodeID)), Dial: n.peerDialer(), SASL: n.peerSASL}
	if err := n.startSupervisor(cfg); err != nil {
		return nil, err
	}

	n.loaders = &replica.Loaders{Replicas: n.replicas, Image: n.ctrl.Image, Before: n.forgetDeletedTopics, Logger: logger}
	n.pids = metadata.NewProducerIDs(n.ctrl)
	n.topics = &cluster.Topics{Setting: cfg.Get, Image: n.ctrl.Image, Propose: n.propose, Logger: logger}

	gc := group.Config{
		MinSessionTimeout:      cfg.Duration("group.min.session.timeout.ms"),
		MaxSessionTimeout:      cfg.Duration("group.max.session.timeout.ms"),
		InitialRebalanceDelay:  cfg.Duration("group.initial.rebalance.delay.ms"),
		MaxGroupSize:           int(cfg.Int("group.max.size")),
		OffsetsRetention:       time.Duration(cfg.Int("offsets.retention.minutes")) * time.Minute,
		OffsetsTopicPartitions: int32(cfg.Int("offsets.topic.num.partitions")),
		MaxMetadataBytes:       int(cfg.Int("offset.metadata.max.bytes")),

		ConsumerHeartbeatInterval: cfg.Duration("group.consumer.heartbeat.interval.ms"),
		ConsumerSessionTimeout:    cfg.Duration("group.consumer.session.timeout.ms"),
		ConsumerAssignors:         strings.Split(cfg.Get("group.consumer.assignors"), ","),
		ConsumerMaxGroupSize:      int(cfg.Int("group.consumer.max.size")),

		ShareSessionTimeout:    cfg.Duration("group.share.session.timeout.ms"),
		ShareHeartbeatInterval: cfg.Duration("group.share.heartbeat.interval.ms"),
		ShareMaxGroupSize:      int(cfg.Int("group.share.max.size")),
		Logger:                 logger,
	}
	// Share groups' settings from their configs in the metadata image:
	// the share-partitions' and, for the coordinator, a group's own
	// share.session.timeout.ms and share.heartbeat.interval.ms.
	sharePC := sharePartitionConfig(cfg)
	shareSettings := sharepart.NewSettings(cfg, sharePC, n.ctrl.Image)
	gc.ShareGroupTimeouts = func(g string) (time.Duration, time.Duration) {
		s := shareSettings.Group(g)
		return s.SessionTimeout, s.HeartbeatInterval
	}
	if err := shareGroupBounds(cfg); err != nil {
		return nil, err
	}
	if gc.InitialRebalanceDelay == 0 {
		gc.InitialRebalanceDelay = -1 // the group package reads 0 as "default"
	}
	shares, err := n.newShares(cfg, sharePC, shareSettings, logger)
	if err != nil {
		return nil, err
	}
	n.shares = shares
	gc.OnShareMembersRemoved = func(g string, removed []group.ShareRemoval) {
		ms := make([]string, len(removed))
		for i, m := range removed {
			ms[i] = m.MemberID
		}
		shares.MembersRemoved(g, ms)
	}
	gc.OnShareGroupDelete = n.deleteShareGroup
	gc.Defaults()
	if err := gc.Validate(); err != nil {
		return nil, err
	}
	gc.Leader = func(p int32) metadata.Leadership {
		return n.ctrl.Image().Leadership(metadata.OffsetsTopic, p, n.nodeID)
	}
	offsets := &replica.StateLog{Replicas: n.replicas, Topic: metadata.OffsetsTopic, NotHere: kerr.NotCoordinator, Timeout: 30 * time.Second}
	n.groups = group.New(gc, group.AppendStore(offsets), topicResolver{n.ctrl})
	n.groups.Start(context.Background())
	n.txns = n.newTxns(cfg)
	n.loaders.Add(metadata.OffsetsTopic, "group metadata", n.groups)
	n.loaders.Add(sharestate.Topic, "share-partition state", n.states)
	n.loaders.Add(txn.Topic, "transaction state", n.txns)
	n.loaders.Reconcile(n.ctrl.Image())

	n.unsub = unsub
	go n.follow(ch)

	authz, err := newAuthorizer(cfg, n.ctrl, logger)
	if err != nil {
		return nil, err
	}
	n.authz = authz
	var gate handler.SchemaGate
	if cfg.Bool("schema.registry.enable") {
		if err := n.startSchemas(cfg); err != nil {
			return nil, err
		}
		gate = n.schemas
	}
	h := handler.New(handler.Config{
		NodeID: nodeID, AdvertisedHost: advHost, AdvertisedPort: advPort,
		Broker: cfg, Controller: n.ctrl, Replicas: n.replicas, Logger: logger,
		Groups: n.groups, Shares: n.shares, Propose: n.propose, AwaitLoaded: n.loaders.AwaitLoaded, ShareStates: n.states, Txns: n.txns, Peers: n.peers, Shutdowns: n.sup, Elector: n.sup, Reassigner: n.sup,
		Topics: n.topics, ProducerIDs: n.pids,
		Authorizer: authz,
		SASL:       n.sasl,
		Schemas:    gate,
	})
	n.kh = h
	if err := n.startAudit(cfg); err != nil {
		return nil, err
	}
	if err := n.serveListeners(cfg, h); err != nil {
		return nil, err
	}
	if n.httpRaw != nil {
		if err := n.startHTTP(); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// register records this broker's address in the metadata log when it is
// new or changed, or when the broker is fenced or in controlled shutdown
// (registering unfences it and ends the shutdown).
func (n *Node) register(ctx context.Context, id int32, host string, port int32) error {
	rack := n.cfg.Get("broker.rack")
	eps := n.endpoints()
	for {
		im := n.ctrl.Image()
		if b, ok := im.Broker(id); ok && b.Host == host && b.Port == port && b.Rack == rack && !b.Fenced && !b.InControlledShutdown && slices.Equal(b.Endpoints, eps) && b.HTTP == n.httpAdv {
			return nil
		}
		err := n.ctrl.Propose(ctx, metadata.Record{RegisterBroker: &metadata.RegisterBroker{ID: id, Host: host, Port: port, Rack: rack, Endpoints: eps, HTTP: n.httpAdv}})
		switch {
		case err == nil:
			return nil
		case errors.Is(err, metadata.ErrProposalDropped) && ctx.Err() == nil:
			// Lost in a leader change (a node rejoining the quorum sees
			// one): the outcome is unknown, so look again and retry.
			n.log.Info("registering broker: proposal dropped in a leader change; retrying")
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
		default:
			return fmt.Errorf("registering broker: %w", err)
		}
	}
}

// alterPartition proposes a partition leader's new ISR (Kafka's
// AlterPartition), fenced by the partition epoch it was computed from;
// apply refuses it if it adds a fenced broker or one in controlled
// shutdown (EligibleISR, KIP-841).
func (n *Node) alterPartition(ctx context.Context, topic string, part int32, isr []int32, epoch int32) error {
	return n.ctrl.Propose(ctx, metadata.Record{PartitionChange: &metadata.PartitionChange{
		Topic: topic, Partition: part, ISR: isr, ExpectPartitionEpoch: &epoch, EligibleISR: true}})
}

// propose writes metadata records and brings the local replicas and
// coordinators in line with the result before returning, so a topic
// created is open, and an internal one led here loading, when the caller
// (the handlers, cluster.Topics) goes on.
func (n *Node) propose(ctx context.Context, recs ...metadata.Record) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := n.ctrl.Propose(ctx, recs...); err != nil {
		return err
	}
	im := n.ctrl.Image()
	if err := n.replicas.Apply(im); err != nil {
		return err
	}
	n.loaders.Reconcile(im)
	return nil
}

// follow applies every new metadata image to the local replicas.
func (n *Node) follow(ch <-chan struct{}) {
	defer close(n.done)
	for {
		select {
		case <-n.stop:
			return
		case <-ch:
		}
		im := n.ctrl.Image()
		if err := n.replicas.Apply(im); err != nil {
			n.log.Error("applying metadata to partitions", "err", err)
		}
		n.loaders.Reconcile(im)
	}
}

// KafkaAddr is the bound Kafka listener address.
func (n *Node) KafkaAddr() string { return n.kafka.Addr().String() }

// HTTPAddr is the bound HTTP listener address, or "".
func (n *Node) HTTPAddr() string {
	if n.httpLn == nil {
		return ""
	}
	return n.httpLn.Addr().String()
}

// Replicas exposes the replica manager (tests, metrics).
func (n *Node) Replicas() *replica.Manager { return n.replicas }

// Intercept installs a fault hook for tests: fn runs before this node
// serves each Kafka request (its API key given), from clients and from
// other brokers and this node's own coordinators alike (WriteTxnMarkers,
// AddPartitionsToTxn from a partition leader); it may delay the request
// or drop it (an error closes the connection). nil removes it.
func (n *Node) Intercept(fn handler.Intercept) { n.kh.SetIntercept(fn) }

// TestPrincipals installs handler.Broker.SetTestPrincipals' hook on this
// node: tests only.
func (n *Node) TestPrincipals(fn handler.PrincipalHook) { n.kh.SetTestPrincipals(fn) }

// Close shuts the node down: connections, then logs, then metadata.
func (n *Node) Close() error {
	var errs []error
	n.controlledShutdown()
	if n.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = n.http.Shutdown(ctx)
		cancel()
	} else if n.httpRaw != nil {
		n.httpRaw.Close() // bound, not served: start failed
	}
	if n.schemas != nil {
		n.schemas.close()
	}
	if n.audit != nil {
		n.audit.Close() // its last batch, while the replicas and peers it writes through are open
	}
	errs = append(errs, n.closeListeners())
	if n.unsub != nil {
		n.unsub()
		close(n.stop)
		<-n.done
	}
	if n.dlq != nil {
		n.dlq.Close()
	}
	if n.groups != nil {
		n.groups.Close()
	}
	if n.shares != nil {
		n.shares.Close()
	}
	if n.loaders != nil {
		n.loaders.Close() // the replays running
	}
	if n.txns != nil {
		n.txns.Close()
	}
	if n.peers != nil {
		n.peers.Close()
	}
	n.stopSupervisor()
	if n.replicas != nil {
		errs = append(errs, n.replicas.Close())
	}
	if n.ctrl != nil {
		errs = append(errs, n.ctrl.Close())
	}
	if n.raftTr != nil {
		errs = append(errs, n.raftTr.Close())
	}
	err := errors.Join(errs...)
	if err != nil {
		n.log.Error("shutdown", "err", err)
	}
	return err
}

// resolveTopic computes a topic's effective settings (as DescribeConfigs
// reports them: handler.topicConfigEntries).
func resolveTopic(cfg *config.Config, im *metadata.Image, t *metadata.Topic) replica.TopicConfig {
	cl := config.Cluster{Nodes: im.Nodes(), ReplicationFactor: t.ReplicationFactor()}
	get := func(name string) string { v, _ := cfg.ResolveTopic(name, t.Configs, im.BrokerConfigs, cl); return v }
	num := func(name string) int64 { v, _ := strconv.ParseInt(get(name), 10, 64); return v }
	lc := blog.DefaultConfig()
	lc.SegmentBytes = num("segment.bytes")
	lc.SegmentMs = num("segment.ms")
	lc.IndexIntervalBytes = int32(num("index.interval.bytes"))
	lc.SegmentIndexBytes = int32(num("segment.index.bytes"))
	lc.RetentionMs = num("retention.ms")
	lc.RetentionBytes = num("retention.bytes")
	ratio, _ := strconv.ParseFloat(get("min.cleanable.dirty.ratio"), 64)
	return replica.TopicConfig{
		Compact: blog.CompactConfig{
			DeleteRetentionMs:      num("delete.retention.ms"),
			MinCompactionLagMs:     num("min.compaction.lag.ms"),
			MaxCompactionLagMs:     num("max.compaction.lag.ms"),
			MinCleanableDirtyRatio: ratio,
			MaxMemoryBytes:         cfg.Int("log.cleaner.dedupe.buffer.size"),
			IORateBytesPerSec:      cfg.Int("log.cleaner.io.max.bytes.per.second"),
		},
		Log:               lc,
		MaxMessageBytes:   int(num("max.message.bytes")),
		LogAppendTime:     get("message.timestamp.type") == "LogAppendTime",
		TimestampBeforeMs: num("message.timestamp.before.max.ms"),
		TimestampAfterMs:  num("message.timestamp.after.max.ms"),
		MinInsyncReplicas: int(num("min.insync.replicas")),
		CleanupPolicy:     get("cleanup.policy"),
	}
}

// quorum configures the metadata quorum from controller.quorum.voters: the
// voters, this node's controller address and the Raft transport, bound to
// the CONTROLLER listener or else to this node's entry in the voter list.
// With no voters the node is a one-voter cluster with no network, as
// before.
func (n *Node) quorum(cfg *config.Config, mc *metadata.Config) error {
	voters, err := config.ParseQuorumVoters(cfg.Get("controller.quorum.voters"))
	if err != nil || len(voters) == 0 {
		return err
	}
	self := int32(cfg.Int("node.id"))
	own := ""
	for _, v := range voters {
		mc.Voters = append(mc.Voters, metadata.Voter{ID: metadata.RaftID(v.ID), Addr: v.Addr})
		if v.ID == self {
			own = v.Addr
		}
	}
	bind := own
	if _, ctl, ok, _ := cfg.Listeners(); ok {
		bind = net.JoinHostPort(ctl.Host, strconv.Itoa(ctl.Port))
	}
	serverTLS, clientTLS, err := n.controllerTLS(cfg)
	if err != nil {
		return err
	}
	tr, err := metadata.NewTCPTransport(metadata.TCPConfig{
		NodeID: mc.NodeID, Addr: bind, ClusterID: cfg.Get("cluster.id"), Logger: mc.Logger.With("component", "metadata"),
		ServerTLS: serverTLS, ClientTLS: clientTLS,
	})
	if err != nil {
		return fmt.Errorf("%w; change the CONTROLLER entry of listeners, or this node's entry in controller.quorum.voters", err)
	}
	n.raftTr = tr
	mc.Transport = tr
	mc.Addr = own
	if own == "" { // an observer: peers reach it at its controller listener
		ta := tr.Addr().(*net.TCPAddr)
		host := ta.IP.String()
		if ta.IP.IsUnspecified() {
			if h, err := os.Hostname(); err == nil {
				host = h
			}
		}
		mc.Addr = net.JoinHostPort(host, strconv.Itoa(ta.Port))
	}
	return nil
}

// startController starts the metadata controller and, in a cluster, waits
// (up to controller.quorum.startup.timeout.ms) for a quorum leader and for
// this node to catch up, logging while it waits.
func (n *Node) startController(ctx context.Context, cfg *config.Config, mc metadata.Config) error {
	timeout := cfg.Duration("controller.quorum.startup.timeout.ms")
	startCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if n.raftTr != nil {
		role := "voter"
		if !slices.ContainsFunc(mc.Voters, func(v metadata.Voter) bool { return v.ID == mc.NodeID }) {
			role = "observer"
		}
		n.log.Info("waiting for the metadata quorum to elect a leader and for this node to catch up",
			"voters", cfg.Get("controller.quorum.voters"), "role", role, "controller", mc.Addr,
			"bound", n.raftTr.Addr().String(), "timeout", timeout)
		done := make(chan struct{})
		defer close(done)
		go func() {
			t := time.NewTicker(10 * time.Second)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					q := n.ctrl.Quorum()
					n.log.Info("still waiting for the metadata quorum", "leader", q.Leader, "term", q.Term,
						"applied", q.Applied, "voters", cfg.Get("controller.quorum.voters"))
				}
			}
		}()
	}
	err := n.ctrl.Start(startCtx)
	switch {
	case err == nil:
	case n.raftTr != nil && startCtx.Err() != nil && ctx.Err() == nil:
		return fmt.Errorf("no metadata quorum leader after %v (controller.quorum.startup.timeout.ms): check that a majority of "+
			"controller.quorum.voters (%s) are running with the same list, that this node reaches them and they reach it at %s "+
			"(look for \"cannot reach raft peer\" and \"refused raft connection\" in the logs on both sides); "+
			"an observer also needs a running leader: %w", timeout, cfg.Get("controller.quorum.voters"), mc.Addr, err)
	default:
		return fmt.Errorf("starting metadata controller: %w", err)
	}
	if n.raftTr != nil {
		n.raftTr.SetClusterID(n.ctrl.Image().ClusterID)
		n.log.Info("metadata quorum ready", "leader", metadata.NodeID(n.ctrl.Leader()), "applied", n.ctrl.Image().Index)
	}
	return nil
}
