// Package config holds the broker's settings. Names follow Kafka's where Kafka
// has one (log.dirs, num.partitions, message.max.bytes, ...). A setting comes,
// in rising precedence, from its default, the properties file (--config), a
// BERTH_* environment variable (dots become underscores, upper case:
// BERTH_LOG_DIRS) and a command-line flag (--log.dirs).
package config

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kind is the type of a setting's value.
type Kind int

const (
	KindString Kind = iota
	KindInt
	KindLong
	KindBool
	KindList
	KindDouble
)

func (k Kind) String() string {
	return [...]string{"STRING", "INT", "LONG", "BOOLEAN", "LIST", "DOUBLE"}[k]
}

// Def describes one setting.
type Def struct {
	Name    string
	Kind    Kind
	Default string
	Doc     string
	// Topic is the name of the topic-level setting this broker setting is
	// the default for ("" when none), as log.retention.ms is for retention.ms.
	Topic string
	// Valid, when set, checks a value beyond its kind.
	Valid func(string) error
	// Dynamic settings can be changed at run time with AlterConfigs.
	Dynamic bool
	// Computed, when set, says in words how the built-in default follows
	// the cluster (docs/configuration.md shows it in place of Default), and
	// compute gives it. Default is then the value when nothing is known of
	// the cluster, which is a single node's.
	Computed string
	compute  func(Cluster) (int, bool)
}

// Cluster is what a computed built-in default (Def.Computed) depends on:
// the nodes of the cluster (metadata.Image.Nodes) and, for a topic
// setting, the topic's replication factor (metadata.Topic.ReplicationFactor).
// Zero is unknown, and Def.Default applies.
type Cluster struct {
	Nodes             int
	ReplicationFactor int
}

// DefaultIn is the setting's built-in default in cl.
func (d Def) DefaultIn(cl Cluster) string {
	if d.compute != nil {
		if v, ok := d.compute(cl); ok {
			return strconv.Itoa(v)
		}
	}
	return d.Default
}

// DefaultText is the built-in default as the docs and --help show it.
func (d Def) DefaultText() string {
	if d.Computed != "" {
		return d.Computed
	}
	return d.Default
}

// The durable defaults (docs/configuration.md, "Replication defaults"): a
// topic nobody gave a replication factor gets three replicas once the
// cluster has three nodes, and a topic with three replicas or more needs
// two of them in sync for acks=all, unless someone set otherwise.

// defaultReplicationFactor: min(3, nodes).
func defaultReplicationFactor(cl Cluster) (int, bool) { return min(3, cl.Nodes), cl.Nodes > 0 }

// defaultMinInsyncReplicas: 2 from a replication factor of 3 up, else 1,
// so that acks=all still succeeds with one replica of each partition down.
func defaultMinInsyncReplicas(cl Cluster) (int, bool) {
	if cl.ReplicationFactor >= 3 {
		return 2, true
	}
	return 1, cl.ReplicationFactor > 0
}

func oneOf(vals ...string) func(string) error {
	return func(s string) error {
		for _, v := range vals {
			if s == v {
				return nil
			}
		}
		return fmt.Errorf("must be one of %s", strings.Join(vals, ", "))
	}
}

// oneOfFold is oneOf ignoring case.
func oneOfFold(vals ...string) func(string) error {
	return func(s string) error {
		for _, v := range vals {
			if strings.EqualFold(s, v) {
				return nil
			}
		}
		return fmt.Errorf("must be one of %s", strings.Join(vals, ", "))
	}
}

// SubjectStrategies are the subject name strategies of
// confluent.*.subject.name.strategy, by short name; the value may also
// be a Java class name ending in one of them.
var SubjectStrategies = []string{"TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy"}

// SubjectStrategy returns the short name of a subject name strategy
// setting ("" if it names none).
func SubjectStrategy(v string) string {
	short := v[strings.LastIndexByte(v, '.')+1:]
	for _, s := range SubjectStrategies {
		if short == s {
			return s
		}
	}
	return ""
}

func validStrategy(v string) error {
	if SubjectStrategy(v) == "" {
		return fmt.Errorf("must be one of %s (or io.confluent.kafka.serializers.subject.<name>)", strings.Join(SubjectStrategies, ", "))
	}
	return nil
}

// between accepts a number (integer or decimal) in [lo, hi].
func between(lo, hi float64) func(string) error {
	return func(s string) error {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return errors.New("is not a number")
		}
		if f < lo || f > hi {
			return fmt.Errorf("must be between %v and %v", lo, hi)
		}
		return nil
	}
}

func atLeast(min int64) func(string) error {
	return func(s string) error {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		if n < min {
			return fmt.Errorf("must be at least %d", min)
		}
		return nil
	}
}

// Broker settings. Durability: "fsync" answers acks=1/all only after the
// batch is on disk (group-committed); "os" leaves flushing to the OS page
// cache, as Kafka does by default.
var brokerDefs = []Def{
	{Name: "node.id", Kind: KindInt, Default: "1", Doc: "This node's id in the cluster.", Valid: atLeast(0)},
	{Name: "cluster.id", Kind: KindString, Default: "", Doc: "Cluster id; generated on first start when empty and kept in the metadata log."},
	{Name: "log.dirs", Kind: KindString, Default: "./berth-data", Doc: "Directory holding partition logs and the metadata log."},
	{Name: "listeners", Kind: KindList, Default: "PLAINTEXT://127.0.0.1:9092", Doc: "Kafka protocol listener."},
	{Name: "advertised.listeners", Kind: KindList, Default: "", Doc: "Address given to clients in Metadata; defaults to listeners (with the bound port when 0)."},
	{Name: "http.listener", Kind: KindString, Default: "127.0.0.1:8081", Doc: "HTTP listener for /metrics, /healthz and the schema registry (Confluent clients expect port 8081). Bound to every interface, it is advertised to the other nodes with the inter-broker listener's host. Empty disables it."},
	{Name: "schema.registry.enable", Kind: KindBool, Default: "true", Doc: "Serve the Confluent-compatible schema registry on the HTTP listener; its schemas live in the compacted topic _schemas, created on the first write."},
	{Name: "kafkastore.topic.replication.factor", Kind: KindInt, Default: "3", Doc: "Replication factor of _schemas (Confluent Schema Registry's name), capped at the cluster's nodes; the topic is created on the first registry write once that many brokers are live.", Valid: atLeast(1)},
	{Name: "schema.compatibility.level", Kind: KindString, Default: "BACKWARD", Doc: "The registry's compatibility level while no global level was set through PUT /config.", Valid: oneOfFold("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")},
	{Name: "num.partitions", Kind: KindInt, Default: "1", Doc: "Partitions of an auto-created topic or of CreateTopics with -1.", Valid: atLeast(1), Dynamic: true},
	{Name: "default.replication.factor", Kind: KindInt, Default: "1", Computed: "min(3, nodes)", compute: defaultReplicationFactor, Doc: "Replication factor of topics created without one (auto-created, or CreateTopics with -1); the default follows the cluster's nodes.", Valid: atLeast(1), Dynamic: true},
	{Name: "auto.create.topics.enable", Kind: KindBool, Default: "true", Doc: "Create a topic when a client asks Metadata for it.", Dynamic: true},
	{Name: "delete.topic.enable", Kind: KindBool, Default: "true", Doc: "Allow DeleteTopics."},
	{Name: "message.max.bytes", Kind: KindInt, Default: "1048588", Doc: "Largest record batch accepted (after compression).", Topic: "max.message.bytes", Valid: atLeast(0), Dynamic: true},
	{Name: "socket.request.max.bytes", Kind: KindInt, Default: "104857600", Doc: "Largest request frame; a larger one closes the connection.", Valid: atLeast(1024)},
	{Name: "queued.max.request.bytes", Kind: KindLong, Default: "268435456", Doc: "Bytes of requests held in memory across all connections; readers wait above it.", Valid: atLeast(1 << 20)},
	{Name: "max.inflight.requests.per.connection", Kind: KindInt, Default: "100", Doc: "Requests read ahead on one connection before its reader waits (pipelining depth).", Valid: atLeast(1)},
	{Name: "connections.max.idle.ms", Kind: KindLong, Default: "600000", Doc: "Close connections idle this long.", Valid: atLeast(1000)},
	{Name: "durability.mode", Kind: KindString, Default: "fsync", Doc: "fsync: acks=1/all are answered after the data is fsync'd (group commit). os: after the write to the OS page cache (Kafka's default); a machine crash can lose acknowledged records.", Valid: oneOf("fsync", "os")},
	{Name: "log.segment.bytes", Kind: KindInt, Default: "1073741824", Doc: "Segment size before a roll.", Topic: "segment.bytes", Valid: atLeast(1024), Dynamic: true},
	{Name: "log.roll.ms", Kind: KindLong, Default: "604800000", Doc: "Segment age before a roll.", Topic: "segment.ms", Valid: atLeast(1), Dynamic: true},
	{Name: "log.retention.ms", Kind: KindLong, Default: "604800000", Doc: "Delete segments whose newest record is older; -1 keeps forever.", Topic: "retention.ms", Valid: atLeast(-1), Dynamic: true},
	{Name: "log.retention.bytes", Kind: KindLong, Default: "-1", Doc: "Delete oldest segments while a partition is larger; -1 no limit.", Topic: "retention.bytes", Valid: atLeast(-1), Dynamic: true},
	{Name: "log.retention.check.interval.ms", Kind: KindLong, Default: "300000", Doc: "How often retention runs.", Valid: atLeast(10)},
	{Name: "log.index.interval.bytes", Kind: KindInt, Default: "4096", Doc: "Bytes between offset index entries.", Topic: "index.interval.bytes", Valid: atLeast(0), Dynamic: true},
	{Name: "log.cleanup.policy", Kind: KindList, Default: "delete", Doc: "delete, compact or both.", Topic: "cleanup.policy", Valid: validCleanup, Dynamic: true},
	{Name: "log.message.timestamp.type", Kind: KindString, Default: "CreateTime", Doc: "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches on append.", Topic: "message.timestamp.type", Valid: oneOf("CreateTime", "LogAppendTime"), Dynamic: true},
	{Name: "log.message.timestamp.before.max.ms", Kind: KindLong, Default: "9223372036854775807", Doc: "Reject CreateTime records older than this.", Topic: "message.timestamp.before.max.ms", Valid: atLeast(0), Dynamic: true},
	{Name: "log.message.timestamp.after.max.ms", Kind: KindLong, Default: "3600000", Doc: "Reject CreateTime records further in the future than this.", Topic: "message.timestamp.after.max.ms", Valid: atLeast(0), Dynamic: true},
	{Name: "compression.type", Kind: KindString, Default: "producer", Doc: "Only producer (keep the producer's codec) is served.", Topic: "compression.type", Valid: oneOf("producer"), Dynamic: true},
	{Name: "min.insync.replicas", Kind: KindInt, Default: "1", Computed: "2 if RF ≥ 3, else 1", compute: defaultMinInsyncReplicas, Doc: "Replicas that must hold a record before acks=all succeeds; the default follows the topic's replication factor.", Topic: "min.insync.replicas", Valid: atLeast(1), Dynamic: true},
	{Name: "broker.rack", Kind: KindString, Default: "", Doc: "This broker's rack (or zone): topic placement spreads each partition's replicas over as many racks as possible."},
	{Name: "broker.session.timeout.ms", Kind: KindInt, Default: "9000", Doc: "The active controller fences a broker it has not heard from for this long and moves its leaderships to other in-sync replicas.", Valid: atLeast(100)},
	{Name: "auto.leader.rebalance.enable", Kind: KindBool, Default: "true", Doc: "Move leadership back to each partition's preferred (first) replica when it is alive and in sync."},
	{Name: "leader.imbalance.check.interval.seconds", Kind: KindLong, Default: "300", Doc: "How often the preferred-leader rebalance runs.", Valid: atLeast(1)},
	{Name: "leader.imbalance.per.broker.percentage", Kind: KindInt, Default: "10", Doc: "Rebalance a broker's leaderships when more than this percentage of the partitions it prefers are led elsewhere.", Valid: atLeast(0)},
	{Name: "controlled.shutdown.enable", Kind: KindBool, Default: "true", Doc: "On SIGTERM/SIGINT, ask the active controller to move this broker's leaderships away before the process exits."},
	{Name: "controlled.shutdown.max.retries", Kind: KindInt, Default: "3", Doc: "Attempts of the controlled shutdown before the broker stops anyway.", Valid: atLeast(1)},
	{Name: "controlled.shutdown.retry.backoff.ms", Kind: KindLong, Default: "5000", Doc: "Wait between controlled shutdown attempts.", Valid: atLeast(0)},
	{Name: "replica.lag.time.max.ms", Kind: KindLong, Default: "30000", Doc: "A follower that has not caught up with its leader for this long leaves the ISR (and rejoins once it has caught up).", Valid: atLeast(1)},
	{Name: "replica.fetch.wait.max.ms", Kind: KindInt, Default: "500", Doc: "Longest a follower's fetch waits at the leader for new records.", Valid: atLeast(1)},
	{Name: "replica.fetch.max.bytes", Kind: KindInt, Default: "1048576", Doc: "Bytes a follower asks for per partition and fetch (at least one batch is always sent).", Valid: atLeast(1024)},
	{Name: "replica.fetch.response.max.bytes", Kind: KindInt, Default: "10485760", Doc: "Bytes a follower asks for per fetch, all partitions together.", Valid: atLeast(1024)},
	{Name: "follower.replication.throttled.rate", Kind: KindLong, Default: "9223372036854775807", Doc: "Bytes per second a broker copies for replicas that a reassignment is adding (kafka-reassign-partitions.sh --throttle and berth cluster reassign --throttle set it); other replication is never throttled.", Valid: atLeast(1), Dynamic: true},
	{Name: "leader.replication.throttled.rate", Kind: KindLong, Default: "9223372036854775807", Doc: "Accepted for compatibility with kafka-reassign-partitions.sh: Berth throttles reassignments on the follower side only (follower.replication.throttled.rate).", Valid: atLeast(1), Dynamic: true},
	{Name: "unclean.leader.election.enable", Kind: KindBool, Default: "false", Doc: "Allow an out-of-sync replica to become leader (may lose data).", Topic: "unclean.leader.election.enable", Dynamic: true},
	{Name: "log.cleaner.delete.retention.ms", Kind: KindLong, Default: "86400000", Doc: "How long tombstones stay readable on compacted topics.", Topic: "delete.retention.ms", Valid: atLeast(0), Dynamic: true},
	{Name: "log.cleaner.min.compaction.lag.ms", Kind: KindLong, Default: "0", Doc: "Minimum age before a record may be compacted.", Topic: "min.compaction.lag.ms", Valid: atLeast(0), Dynamic: true},
	{Name: "log.cleaner.max.compaction.lag.ms", Kind: KindLong, Default: "9223372036854775807", Doc: "Maximum time a record stays uncompacted.", Topic: "max.compaction.lag.ms", Valid: atLeast(1), Dynamic: true},
	{Name: "log.cleaner.min.cleanable.ratio", Kind: KindString, Default: "0.5", Doc: "Dirty ratio that triggers compaction.", Topic: "min.cleanable.dirty.ratio", Dynamic: true},
	{Name: "producer.id.expiration.ms", Kind: KindLong, Default: "86400000", Doc: "Forget an idle producer's sequence state after this long.", Valid: atLeast(1)},
	{Name: "log.dir.min.free.bytes", Kind: KindLong, Default: "67108864", Doc: "Refuse produce requests (KAFKA_STORAGE_ERROR, retriable) while the log directory has less free space than this, so a full disk never tears a write; they resume when space returns. 0 disables the check.", Valid: atLeast(0)},
	{Name: "offsets.topic.num.partitions", Kind: KindInt, Default: "50", Doc: "Partitions of __consumer_offsets, where group metadata and committed offsets live. Fixed once the topic exists.", Valid: atLeast(1)},
	{Name: "offsets.topic.replication.factor", Kind: KindInt, Default: "3", Doc: "Replication factor of __consumer_offsets, capped at the cluster's nodes; the topic is created on first use once that many brokers are live.", Valid: atLeast(1)},
	{Name: "offsets.topic.segment.bytes", Kind: KindInt, Default: "104857600", Doc: "Segment size of __consumer_offsets (small, so compaction can clean it).", Valid: atLeast(1024)},
	{Name: "share.coordinator.state.topic.num.partitions", Kind: KindInt, Default: "50", Doc: "Partitions of __share_group_state, where share-partition state (work-queue deliveries, locks' outcomes, retry times) lives. Fixed once the topic exists.", Valid: atLeast(1)},
	{Name: "share.coordinator.state.topic.replication.factor", Kind: KindInt, Default: "3", Doc: "Replication factor of __share_group_state, capped at the cluster's nodes; the topic is created on first use once that many brokers are live.", Valid: atLeast(1)},
	{Name: "share.coordinator.state.topic.segment.bytes", Kind: KindInt, Default: "104857600", Doc: "Segment size of __share_group_state (compacted: the latest record of a share-partition is its state).", Valid: atLeast(1024)},
	{Name: "transaction.state.log.num.partitions", Kind: KindInt, Default: "50", Doc: "Partitions of __transaction_state, where the transaction coordinators keep each transactional id's producer id, epoch, state and partitions. Fixed once the topic exists.", Valid: atLeast(1)},
	{Name: "transaction.state.log.replication.factor", Kind: KindInt, Default: "3", Doc: "Replication factor of __transaction_state, capped at the cluster's nodes; the topic is created on first use once that many brokers are live.", Valid: atLeast(1)},
	{Name: "transaction.state.log.segment.bytes", Kind: KindInt, Default: "104857600", Doc: "Segment size of __transaction_state (compacted: the latest record of a transactional id is its state).", Valid: atLeast(1024)},
	{Name: "transaction.state.log.min.isr", Kind: KindInt, Default: "2", Doc: "min.insync.replicas of __transaction_state, capped at its replication factor when the topic is created (so a single node works with the default).", Valid: atLeast(1)},
	{Name: "transaction.max.timeout.ms", Kind: KindInt, Default: "900000", Doc: "Largest transaction.timeout.ms a transactional producer may ask for (INVALID_TRANSACTION_TIMEOUT above).", Valid: atLeast(1)},
	{Name: "transactional.id.expiration.ms", Kind: KindInt, Default: "604800000", Doc: "A transactional id with no transaction open for this long is deleted from __transaction_state.", Valid: atLeast(1)},
	{Name: "transaction.abort.timed.out.transaction.cleanup.interval.ms", Kind: KindInt, Default: "10000", Doc: "How often a transaction coordinator aborts the transactions open for longer than their transaction.timeout.ms.", Valid: atLeast(1)},
	{Name: "transaction.remove.expired.transaction.cleanup.interval.ms", Kind: KindInt, Default: "3600000", Doc: "How often a transaction coordinator deletes the transactional ids past transactional.id.expiration.ms.", Valid: atLeast(1)},
	{Name: "transaction.version", Kind: KindInt, Default: "2", Doc: "The transaction protocol the broker offers clients, as Kafka's transaction.version feature (finalized in ApiVersions): 2 is Transactions V2 (KIP-890 part 2: Produce v12+ enlists partitions, TxnOffsetCommit v5+ enlists the group, EndTxn v5+ bumps the producer epoch at the end of every transaction), 0 or 1 keeps clients on the explicit AddPartitionsToTxn/AddOffsetsToTxn protocol. Set the same value on every broker.", Valid: between(0, 2)},
	{Name: "transaction.partition.verification.enable", Kind: KindBool, Default: "true", Doc: "A partition leader asks the transaction coordinator whether a transactional batch's partition is in the producer's ongoing transaction before the first batch of that transaction is appended (KIP-890 part 1), so a late or stray batch cannot open a transaction nobody ends. Produce v12+ batches always enlist their partition (Transactions V2).", Dynamic: false},
	{Name: "offsets.retention.minutes", Kind: KindInt, Default: "10080", Doc: "Committed offsets of a group expire this long after the group became empty.", Valid: atLeast(1)},
	{Name: "offset.metadata.max.bytes", Kind: KindInt, Default: "4096", Doc: "Largest metadata string of a committed offset (OFFSET_METADATA_TOO_LARGE above).", Valid: atLeast(0)},
	{Name: "group.min.session.timeout.ms", Kind: KindInt, Default: "6000", Doc: "Smallest session timeout a classic group member may ask for (INVALID_SESSION_TIMEOUT below).", Valid: atLeast(1)},
	{Name: "group.max.session.timeout.ms", Kind: KindInt, Default: "1800000", Doc: "Largest session timeout a classic group member may ask for.", Valid: atLeast(1)},
	{Name: "group.initial.rebalance.delay.ms", Kind: KindInt, Default: "3000", Doc: "How long the first rebalance of an empty group waits for more members to join.", Valid: atLeast(0)},
	{Name: "group.max.size", Kind: KindInt, Default: "2147483647", Doc: "Most members in one group (GROUP_MAX_SIZE_REACHED above).", Valid: atLeast(1)},
	{Name: "group.consumer.heartbeat.interval.ms", Kind: KindInt, Default: "5000", Doc: "Heartbeat interval the coordinator gives KIP-848 consumer group members.", Valid: atLeast(1)},
	{Name: "group.consumer.session.timeout.ms", Kind: KindInt, Default: "45000", Doc: "Session timeout of KIP-848 consumer group members: one silent this long is removed.", Valid: atLeast(1)},
	{Name: "group.consumer.max.size", Kind: KindInt, Default: "2147483647", Doc: "Most members in one KIP-848 consumer group (GROUP_MAX_SIZE_REACHED above).", Valid: atLeast(1)},
	{Name: "group.consumer.assignors", Kind: KindList, Default: "uniform,range", Doc: "Server-side assignors of KIP-848 consumer groups; the first is the default."},
	{Name: "group.share.session.timeout.ms", Kind: KindInt, Default: "45000", Doc: "Session timeout of share group (KIP-932) members: one silent this long is removed. Between group.share.min.session.timeout.ms and group.share.max.session.timeout.ms.", Valid: atLeast(1)},
	{Name: "group.share.min.session.timeout.ms", Kind: KindInt, Default: "45000", Doc: "Lower bound of group.share.session.timeout.ms.", Valid: atLeast(1)},
	{Name: "group.share.max.session.timeout.ms", Kind: KindInt, Default: "60000", Doc: "Upper bound of group.share.session.timeout.ms.", Valid: atLeast(1)},
	{Name: "group.share.heartbeat.interval.ms", Kind: KindInt, Default: "5000", Doc: "Heartbeat interval the coordinator gives share group (KIP-932) members; below group.share.session.timeout.ms, between group.share.min.heartbeat.interval.ms and group.share.max.heartbeat.interval.ms.", Valid: atLeast(1)},
	{Name: "group.share.min.heartbeat.interval.ms", Kind: KindInt, Default: "5000", Doc: "Lower bound of group.share.heartbeat.interval.ms.", Valid: atLeast(1)},
	{Name: "group.share.max.heartbeat.interval.ms", Kind: KindInt, Default: "15000", Doc: "Upper bound of group.share.heartbeat.interval.ms.", Valid: atLeast(1)},
	{Name: "group.share.record.lock.duration.ms", Kind: KindInt, Default: "30000", Doc: "Acquisition lock of a record a share consumer (KIP-932) fetched: unacknowledged when it ends, the record is delivered again (Kafka's default; at least 1000).", Valid: atLeast(1000)},
	{Name: "group.share.delivery.count.limit", Kind: KindInt, Default: "5", Doc: "Deliveries of a record to share consumers after which a release or an expired lock archives it instead of delivering it again (Kafka's name and default; at least 2).", Valid: atLeast(2)},
	{Name: "group.share.partition.max.record.locks", Kind: KindInt, Default: "2000", Doc: "Most in-flight records of one share-partition: no newer record is acquired while this many offsets are in flight (Kafka's name and default).", Valid: atLeast(1)},
	{Name: "group.share.retry.backoff.initial.ms", Kind: KindInt, Default: "2000", Doc: "Berth addition (Kafka has none): a released or lock-expired record of a share group is delivered again only after this delay, doubled at each further delivery (±20% jitter) up to group.share.retry.backoff.max.ms; 0 redelivers at once, as Kafka does.", Valid: atLeast(0)},
	{Name: "group.share.retry.backoff.max.ms", Kind: KindInt, Default: "300000", Doc: "Berth addition: the longest retry backoff of a share group record (see group.share.retry.backoff.initial.ms).", Valid: atLeast(0)},
	{Name: "group.share.retry.backoff.multiplier", Kind: KindDouble, Default: "2", Doc: "Berth addition: the factor the retry backoff of a share group record grows by at each further delivery (at least 1).", Valid: between(1, 1000)},
	{Name: "group.share.retry.backoff.jitter", Kind: KindDouble, Default: "0.2", Doc: "Berth addition: the retry backoff of a share group record is scaled by a random factor in [1-jitter, 1+jitter] (0 to 1).", Valid: between(0, 1)},
	{Name: "group.share.min.record.lock.duration.ms", Kind: KindInt, Default: "15000", Doc: "Smallest share.record.lock.duration.ms a share group config may set (Kafka's name and default; bounds group configs only).", Valid: atLeast(1000)},
	{Name: "group.share.max.record.lock.duration.ms", Kind: KindInt, Default: "60000", Doc: "Largest share.record.lock.duration.ms a share group config may set (Kafka's name and default; bounds group configs only).", Valid: atLeast(1000)},
	{Name: "group.share.min.delivery.count.limit", Kind: KindInt, Default: "2", Doc: "Smallest share.delivery.count.limit a share group config may set (Kafka's name and default).", Valid: atLeast(2)},
	{Name: "group.share.max.delivery.count.limit", Kind: KindInt, Default: "10", Doc: "Largest share.delivery.count.limit a share group config may set (Kafka's name and default).", Valid: atLeast(2)},
	{Name: "group.share.min.partition.max.record.locks", Kind: KindInt, Default: "100", Doc: "Smallest share.partition.max.record.locks a share group config may set (Kafka's name and default).", Valid: atLeast(1)},
	{Name: "group.share.max.partition.max.record.locks", Kind: KindInt, Default: "4000", Doc: "Largest share.partition.max.record.locks a share group config may set (Kafka's name and default).", Valid: atLeast(1)},
	{Name: "errors.deadletterqueue.topic.name.prefix", Kind: KindString, Default: "dlq.", Doc: "Every share group's dead-letter topic (group config errors.deadletterqueue.topic.name) must start with this prefix (KIP-1191's name and default).", Dynamic: true},
	{Name: "errors.deadletterqueue.auto.create.topics.enable", Kind: KindBool, Default: "false", Doc: "Create a share group's missing dead-letter topic on its first dead-letter write (1 partition, default.replication.factor, errors.deadletterqueue.group.enable=true); false: the write fails and is retried until the topic is created (KIP-1191's name and default).", Dynamic: true},
	{Name: "group.share.max.size", Kind: KindInt, Default: "200", Doc: "Most members in one share group (GROUP_MAX_SIZE_REACHED above).", Valid: atLeast(1)},
	{Name: "log.flush.offset.checkpoint.interval.ms", Kind: KindInt, Default: "60000", Doc: "How often each partition's active segment writes out the index of its durable data (Kafka's recovery-point checkpoint interval): a restart after a crash re-checks only the data written since.", Valid: atLeast(1000)},
	{Name: "log.cleaner.enable", Kind: KindBool, Default: "true", Doc: "Run the log cleaner for topics with cleanup.policy=compact."},
	{Name: "log.cleaner.backoff.ms", Kind: KindLong, Default: "15000", Doc: "How often the cleaner looks for partitions to compact.", Valid: atLeast(10)},
	{Name: "log.cleaner.dedupe.buffer.size", Kind: KindLong, Default: "16777216", Doc: "Memory for the key map of one compaction; a larger dirty section is cleaned over several rounds.", Valid: atLeast(1 << 16)},
	{Name: "log.cleaner.io.max.bytes.per.second", Kind: KindLong, Default: "0", Doc: "Cap on the cleaner's read+write rate; 0 is unlimited.", Valid: atLeast(0)},
	{Name: "log.preallocate.bytes", Kind: KindLong, Default: "4194304", Doc: "Berth-specific. With durability.mode=fsync, zeros written and fsynced ahead of a busy partition's data (at most 64 partitions, none written faster than 64 MiB/s, only partitions fsynced on their own: see log.flush.filesystem.partitions), so the fsync that acknowledges a produce request writes data only and needs no filesystem journal commit; trimmed at segment roll, clean shutdown and after 30 s without writes. 0 disables.", Valid: atLeast(0)},
	{Name: "log.flush.filesystem.partitions", Kind: KindInt, Default: "2", Doc: "Berth-specific. With durability.mode=fsync, a group-commit round with at least this many partitions to make durable syncs the log directory's whole filesystem once (Linux syncfs) instead of fsyncing each partition: one journal commit and device flush instead of one per partition. It also flushes other files written on that filesystem, so give log.dirs a filesystem of its own. 0 disables.", Valid: atLeast(0)},
	{Name: "log.flush.interval.ms", Kind: KindLong, Default: "1000", Doc: "With durability.mode=os, fsync dirty partitions at least this often.", Valid: atLeast(1)},
	{Name: "controller.quorum.voters", Kind: KindList, Default: "", Doc: "Voters of the metadata quorum, id@host:port,... (node.id and controller address). Read only when the metadata directory is empty; a node not listed joins as an observer. Empty: a single-node cluster.", Valid: validVoters},
	{Name: "controller.listener.names", Kind: KindList, Default: "CONTROLLER", Doc: "Names of the listeners entries that serve the metadata quorum (Raft) rather than Kafka clients."},
	{Name: "controller.quorum.election.timeout.ms", Kind: KindInt, Default: "1000", Doc: "Raft election timeout of the metadata quorum; heartbeats go every tenth of it.", Valid: atLeast(10)},
	{Name: "controller.quorum.startup.timeout.ms", Kind: KindLong, Default: "120000", Doc: "How long serve waits at start for a metadata quorum leader and to catch up with it before it gives up.", Valid: atLeast(1)},
}

// QuorumVoter is one entry of controller.quorum.voters.
type QuorumVoter struct {
	ID   int32  // node.id
	Addr string // host:port of its controller listener
}

// ParseQuorumVoters parses controller.quorum.voters: id@host:port,...
func ParseQuorumVoters(s string) ([]QuorumVoter, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []QuorumVoter
	seen := map[int32]bool{}
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		id, addr, ok := strings.Cut(e, "@")
		n, err := strconv.ParseInt(id, 10, 32)
		if !ok || err != nil || n < 0 {
			return nil, fmt.Errorf("voter %q: want id@host:port with id the voter's node.id", e)
		}
		host, port, err := net.SplitHostPort(addr)
		if p, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || p <= 0 || p > 65535 {
			return nil, fmt.Errorf("voter %q: want id@host:port with a host and a non-zero port", e)
		}
		if seen[int32(n)] {
			return nil, fmt.Errorf("voter %d is listed twice", n)
		}
		seen[int32(n)] = true
		out = append(out, QuorumVoter{ID: int32(n), Addr: addr})
	}
	return out, nil
}

func validVoters(s string) error {
	_, err := ParseQuorumVoters(s)
	return err
}

// isControllerListener reports whether a listener name is one of
// controller.listener.names.
func (c *Config) isControllerListener(name string) bool {
	for _, n := range strings.Split(c.Get("controller.listener.names"), ",") {
		if strings.EqualFold(strings.TrimSpace(n), name) {
			return true
		}
	}
	return false
}

// Listeners splits listeners into the first Kafka listener and the
// controller listener (ok false when there is none); KafkaListeners lists
// them all.
func (c *Config) Listeners() (kafka, controller Listener, ok bool, err error) {
	var kafkas []Listener
	for _, s := range strings.Split(c.Get("listeners"), ",") {
		l, err := ParseListener(strings.TrimSpace(s))
		if err != nil {
			return kafka, controller, false, err
		}
		if c.isControllerListener(l.Name) {
			if ok {
				return kafka, controller, false, errors.New("listeners: one controller listener is supported")
			}
			controller, ok = l, true
			continue
		}
		kafkas = append(kafkas, l)
	}
	if len(kafkas) == 0 {
		return kafka, controller, false, errors.New("listeners: no Kafka listener (only the controller listener); add one, e.g. PLAINTEXT://127.0.0.1:9092")
	}
	return kafkas[0], controller, ok, nil
}

func validCleanup(s string) error {
	for _, p := range strings.Split(s, ",") {
		switch strings.TrimSpace(p) {
		case "delete", "compact":
		default:
			return errors.New("must be delete, compact or delete,compact")
		}
	}
	return nil
}

// topicOnlyDefs are topic settings with no broker-level twin in brokerDefs.
var topicOnlyDefs = []Def{
	{Name: "file.delete.delay.ms", Kind: KindLong, Default: "60000", Doc: "Accepted for compatibility; segments are deleted at once."},
	{Name: "flush.messages", Kind: KindLong, Default: "9223372036854775807", Doc: "Accepted for compatibility; see durability.mode."},
	{Name: "flush.ms", Kind: KindLong, Default: "9223372036854775807", Doc: "Accepted for compatibility; see durability.mode."},
	{Name: "preallocate", Kind: KindBool, Default: "false", Doc: "Accepted for compatibility."},
	{Name: "leader.replication.throttled.replicas", Kind: KindString, Default: "", Doc: "Accepted for compatibility with kafka-reassign-partitions.sh; Berth throttles every replica a reassignment adds (follower.replication.throttled.rate)."},
	{Name: "follower.replication.throttled.replicas", Kind: KindString, Default: "", Doc: "Accepted for compatibility with kafka-reassign-partitions.sh; Berth throttles every replica a reassignment adds (follower.replication.throttled.rate)."},
	{Name: "segment.index.bytes", Kind: KindInt, Default: "10485760", Doc: "Largest offset index of one segment; a full index rolls the segment.", Valid: atLeast(4096)},
	{Name: "segment.jitter.ms", Kind: KindLong, Default: "0", Doc: "Accepted for compatibility."},
	{Name: "message.downconversion.enable", Kind: KindBool, Default: "true", Doc: "Accepted for compatibility; record batches are served as v2 only."},
	{Name: "confluent.value.schema.validation", Kind: KindBool, Default: "false", Doc: "When true, the partition leader refuses (INVALID_RECORD) a batch with a record value that does not start with the schema registry's wire format (magic byte 0 and a 4-byte schema id) or whose id is not registered under the subject confluent.value.subject.name.strategy names. See docs/schema-registry.md.", Dynamic: true},
	{Name: "confluent.key.schema.validation", Kind: KindBool, Default: "false", Doc: "As confluent.value.schema.validation, for record keys.", Dynamic: true},
	{Name: "confluent.value.subject.name.strategy", Kind: KindString, Default: "io.confluent.kafka.serializers.subject.TopicNameStrategy", Doc: "Subject a value's schema id must be registered under: TopicNameStrategy (<topic>-value), RecordNameStrategy (the schema's record name) or TopicRecordNameStrategy (<topic>-<record name>); the class names of Confluent's serializers or the short names.", Valid: validStrategy, Dynamic: true},
	{Name: "confluent.key.subject.name.strategy", Kind: KindString, Default: "io.confluent.kafka.serializers.subject.TopicNameStrategy", Doc: "As confluent.value.subject.name.strategy, for keys (<topic>-key under TopicNameStrategy).", Valid: validStrategy, Dynamic: true},
	{Name: "berth.schema.validation.payload", Kind: KindBool, Default: "false", Doc: "With schema validation on, also validate each JSON Schema-encoded payload against its schema (costs a JSON parse per record).", Dynamic: true},
	{Name: "errors.deadletterqueue.group.enable", Kind: KindBool, Default: "false", Doc: "A share group may use this topic as its dead-letter topic only when true (KIP-1191); the broker sets it on dead-letter topics it creates."},
}

// BrokerDefs lists every broker setting, sorted by name.
func BrokerDefs() []Def {
	out := append([]Def(nil), brokerDefs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// TopicDefs lists every topic setting, sorted by name, with its broker-level
// default name in Def.Topic turned around: here Topic holds the broker key.
func TopicDefs() []Def {
	var out []Def
	for _, d := range brokerDefs {
		if d.Topic == "" {
			continue
		}
		t := d
		t.Name, t.Topic = d.Topic, d.Name
		out = append(out, t)
	}
	out = append(out, topicOnlyDefs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

var (
	brokerIndexOnce sync.Once
	brokerIndex     map[string]int // name -> index in brokerDefs
)

// LookupBroker finds a broker setting.
func LookupBroker(name string) (Def, bool) {
	brokerIndexOnce.Do(func() {
		brokerIndex = make(map[string]int, len(brokerDefs))
		for i, d := range brokerDefs {
			brokerIndex[d.Name] = i
		}
	})
	i, ok := brokerIndex[name]
	if !ok {
		return Def{}, false
	}
	return brokerDefs[i], true
}

// LookupTopic finds a topic setting; Def.Topic names its broker default.
func LookupTopic(name string) (Def, bool) {
	for _, d := range TopicDefs() {
		if d.Name == name {
			return d, true
		}
	}
	return Def{}, false
}

// CheckValue validates a value against a setting's kind and rules.
func (d Def) CheckValue(v string) error {
	switch d.Kind {
	case KindInt:
		if _, err := strconv.ParseInt(v, 10, 32); err != nil {
			return fmt.Errorf("%s: %q is not a 32-bit integer", d.Name, v)
		}
	case KindLong:
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("%s: %q is not an integer", d.Name, v)
		}
	case KindBool:
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("%s: %q is not true or false", d.Name, v)
		}
	case KindDouble:
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return fmt.Errorf("%s: %q is not a number", d.Name, v)
		}
	}
	if d.Valid != nil {
		if err := d.Valid(v); err != nil {
			return fmt.Errorf("%s: %q %v", d.Name, v, err)
		}
	}
	return nil
}

// Source says where a setting's value came from.
type Source int

const (
	SourceDefault Source = iota
	SourceFile
	SourceEnv
	SourceFlag
)

// Config is a set of broker settings with typed accessors.
type Config struct {
	vals    map[string]string
	sources map[string]Source
}

// Defaults returns a Config with every setting at its default.
func Defaults() *Config {
	c := &Config{vals: map[string]string{}, sources: map[string]Source{}}
	for _, d := range brokerDefs {
		c.vals[d.Name] = d.Default
	}
	return c
}

// Set sets a broker setting after checking it. Kafka's per-listener
// forms are accepted: listener.name.<listener>.<setting> and
// listener.name.<listener>.<mechanism>.<setting> (the mechanism in lower
// case, e.g. plain.sasl.jaas.config); read them with ListenerGet.
func (c *Config) Set(name, value string, src Source) error {
	d, ok := lookupAny(name)
	if !ok {
		return fmt.Errorf("unknown setting %q (see docs/configuration.md)", name)
	}
	if err := d.CheckValue(value); err != nil {
		return err
	}
	name = canonicalListenerKey(name)
	c.vals[name] = value
	c.sources[name] = src
	return nil
}

// saslMechanisms are the mechanism prefixes of per-listener SASL settings.
var saslMechanisms = []string{"plain", "scram-sha-256", "scram-sha-512", "oauthbearer", "gssapi"}

// lookupAny finds a broker setting by name, or the setting a per-listener
// name (listener.name.<l>.[<mechanism>.]<setting>) stands for.
func lookupAny(name string) (Def, bool) {
	if d, ok := LookupBroker(name); ok {
		return d, true
	}
	_, mech, key, ok := splitListenerName(name)
	if !ok {
		return Def{}, false
	}
	d, found := LookupBroker(key)
	if !found || (mech != "" && !strings.HasPrefix(key, "sasl.") && key != "connections.max.reauth.ms") {
		return Def{}, false
	}
	d.Name = name
	return d, true
}

// splitListenerName splits listener.name.<l>.[<mech>.]<key>; the
// listener name comes back in upper case, the mechanism in lower case.
func splitListenerName(name string) (listener, mech, key string, ok bool) {
	rest, found := strings.CutPrefix(name, "listener.name.")
	if !found {
		return "", "", "", false
	}
	listener, rest, found = strings.Cut(rest, ".")
	if !found || listener == "" {
		return "", "", "", false
	}
	for _, m := range saslMechanisms {
		if k, isMech := strings.CutPrefix(rest, m+"."); isMech {
			return strings.ToUpper(listener), m, k, true
		}
	}
	return strings.ToUpper(listener), "", rest, true
}

// ListenerGet reads a setting as a listener sees it: the most specific
// of listener.name.<listener>.<mech>.<name> (mech "" skips it),
// listener.name.<listener>.<name> and name itself, as Kafka resolves
// per-listener settings.
func (c *Config) ListenerGet(listener, mech, name string) string {
	l := "listener.name." + strings.ToLower(listener) + "."
	if mech != "" {
		if v, ok := c.vals[l+strings.ToLower(mech)+"."+name]; ok {
			return v
		}
	}
	if v, ok := c.vals[l+name]; ok {
		return v
	}
	return c.vals[name]
}

// ListenerSet reports whether any per-listener form of name is set for
// listener (with mech, or without one).
func (c *Config) ListenerSet(listener, mech, name string) bool {
	l := "listener.name." + strings.ToLower(listener) + "."
	_, a := c.vals[l+strings.ToLower(mech)+"."+name]
	_, b := c.vals[l+name]
	return (mech != "" && a) || b
}

// SourceOf tells where a value came from.
func (c *Config) SourceOf(name string) Source { return c.sources[name] }

// Get returns a setting's value as a string.
func (c *Config) Get(name string) string { return c.vals[name] }

// Int returns an integer setting.
func (c *Config) Int(name string) int64 {
	n, _ := strconv.ParseInt(c.vals[name], 10, 64)
	return n
}

// Bool returns a boolean setting.
func (c *Config) Bool(name string) bool {
	b, _ := strconv.ParseBool(c.vals[name])
	return b
}

// Float returns a decimal setting.
func (c *Config) Float(name string) float64 {
	f, _ := strconv.ParseFloat(c.vals[name], 64)
	return f
}

// Duration returns a millisecond setting as a duration.
func (c *Config) Duration(name string) time.Duration {
	return time.Duration(c.Int(name)) * time.Millisecond
}

// All returns a copy of every value.
func (c *Config) All() map[string]string {
	out := make(map[string]string, len(c.vals))
	for k, v := range c.vals {
		out[k] = v
	}
	return out
}

// aliases maps Kafka names Berth reads as its own.
var aliases = map[string]string{"broker.id": "node.id"}

// LoadFile reads a Kafka-style properties file (key=value, # comments).
// Keys Berth does not know are returned in ignored rather than failing, so
// a stock Kafka server.properties loads; bad values of known keys fail.
func (c *Config) LoadFile(path string) (ignored []string, err error) {
	props, err := ReadProperties(path)
	if err != nil {
		return nil, err
	}
	coarse := map[string]int64{}
	for _, p := range props {
		k, v, line := p.Key, p.Value, p.Line
		if a, ok := aliases[k]; ok {
			k = a
		}
		if _, ok := coarseUnits[k]; ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return ignored, fmt.Errorf("%s:%d: %s: %q is not an integer", path, line, k, v)
			}
			coarse[k] = n
			continue
		}
		if _, known := lookupAny(k); !known {
			ignored = append(ignored, k)
			continue
		}
		if err := c.Set(k, v, SourceFile); err != nil {
			return ignored, fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
	return ignored, c.applyCoarse(path, coarse)
}

// coarseUnits are Kafka's settings in hours or minutes that stand for a
// millisecond setting, which wins when both are given (Kafka's
// precedence: log.retention.ms, then .minutes, then .hours).
var coarseUnits = map[string]struct {
	ms   string
	unit int64
	rank int // lower wins
}{
	"log.retention.minutes": {"log.retention.ms", 60_000, 1},
	"log.retention.hours":   {"log.retention.ms", 3_600_000, 2},
	"log.roll.hours":        {"log.roll.ms", 3_600_000, 2},
}

// applyCoarse sets the millisecond settings that a file gave only in
// minutes or hours.
func (c *Config) applyCoarse(path string, coarse map[string]int64) error {
	best := map[string]string{} // ms setting -> the coarse key that sets it
	for k := range coarse {
		u := coarseUnits[k]
		if c.sources[u.ms] == SourceFile {
			continue // the file gave the millisecond form: it wins
		}
		if b, ok := best[u.ms]; !ok || u.rank < coarseUnits[b].rank {
			best[u.ms] = k
		}
	}
	for ms, k := range best {
		v := coarse[k]
		if v > 0 {
			v *= coarseUnits[k].unit
		}
		if err := c.Set(ms, strconv.FormatInt(v, 10), SourceFile); err != nil {
			return fmt.Errorf("%s: %s: %w", path, k, err)
		}
	}
	return nil
}

// EnvName is the environment variable for a setting: BERTH_LOG_DIRS.
func EnvName(name string) string {
	return "BERTH_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(name))
}

// LoadEnv applies BERTH_* variables from environ (os.Environ() form).
func (c *Config) LoadEnv(environ []string) error {
	byEnv := map[string]string{}
	for _, d := range brokerDefs {
		byEnv[EnvName(d.Name)] = d.Name
	}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if name, ok := byEnv[k]; ok {
			if err := c.Set(name, v, SourceEnv); err != nil {
				return fmt.Errorf("environment %s: %w", k, err)
			}
		}
	}
	return nil
}

// Listener is a parsed listener address.
type Listener struct {
	Name string // PLAINTEXT
	Host string
	Port int
	// Protocol is the listener's security protocol (KafkaListeners).
	Protocol string
}

// ParseListener parses NAME://host:port (NAME:// optional).
func ParseListener(s string) (Listener, error) {
	name := "PLAINTEXT"
	if n, rest, ok := strings.Cut(s, "://"); ok {
		name, s = strings.ToUpper(n), rest
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return Listener{}, fmt.Errorf("listener %q: %w (want PLAINTEXT://host:port)", s, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return Listener{}, fmt.Errorf("listener %q: bad port", s)
	}
	return Listener{Name: name, Host: host, Port: p}, nil
}

// Validate checks settings that depend on each other.
func (c *Config) Validate() error {
	if c.Get("log.dirs") == "" {
		return errors.New("log.dirs must name a directory")
	}
	if strings.Contains(c.Get("log.dirs"), ",") {
		return errors.New("log.dirs: one directory is supported (JBOD is not)")
	}
	l, ctl, hasCtl, err := c.Listeners()
	if err != nil {
		return err
	}
	voters, _ := ParseQuorumVoters(c.Get("controller.quorum.voters"))
	inVoters := false
	for _, v := range voters {
		inVoters = inVoters || int64(v.ID) == c.Int("node.id")
	}
	switch {
	case hasCtl && len(voters) == 0:
		return fmt.Errorf("listeners has a controller listener (%s) but controller.quorum.voters is empty; set the voters or remove the listener", ctl.Name)
	case len(voters) > 0 && !inVoters && !hasCtl:
		return fmt.Errorf("node.id %d is not in controller.quorum.voters, so it joins the quorum as an observer and needs a controller listener: add CONTROLLER://host:port to listeners", c.Int("node.id"))
	case hasCtl && ctl.Port == 0 && inVoters:
		return errors.New("listeners: the controller listener of a voter needs a fixed port (the one in controller.quorum.voters)")
	}
	_ = l
	return c.validateListeners()
}

// ValueSource says where an effective topic or broker value comes from, in
// DescribeConfigs' terms.
type ValueSource int8

// Kafka's DescribeConfigs config sources.
const (
	FromTopic         ValueSource = 1 // DYNAMIC_TOPIC_CONFIG
	FromDynamicBroker ValueSource = 3 // DYNAMIC_DEFAULT_BROKER_CONFIG
	FromStaticBroker  ValueSource = 4 // STATIC_BROKER_CONFIG
	FromDefault       ValueSource = 5 // DEFAULT_CONFIG
)

// ResolveTopic returns a topic setting's effective value: the topic's
// override, else the dynamic broker default (from the metadata log), else
// the static broker setting, else the built-in default in cl (the
// topic's replication factor and the cluster's nodes).
func (c *Config) ResolveTopic(name string, topic, dynamic map[string]string, cl Cluster) (string, ValueSource) {
	if v, ok := topic[name]; ok {
		return v, FromTopic
	}
	d, ok := LookupTopic(name)
	if !ok {
		return "", FromDefault
	}
	if d.Topic == "" {
		return d.DefaultIn(cl), FromDefault
	}
	return c.ResolveBrokerIn(d.Topic, dynamic, cl)
}

// ResolveBroker returns a broker setting's effective value, with nothing
// known of the cluster (a computed default is Def.Default).
func (c *Config) ResolveBroker(name string, dynamic map[string]string) (string, ValueSource) {
	return c.ResolveBrokerIn(name, dynamic, Cluster{})
}

// ResolveBrokerIn returns a broker setting's effective value: the dynamic
// setting, else the static one, else the built-in default in cl.
func (c *Config) ResolveBrokerIn(name string, dynamic map[string]string, cl Cluster) (string, ValueSource) {
	if v, ok := dynamic[name]; ok {
		return v, FromDynamicBroker
	}
	if c.sources[name] != SourceDefault {
		return c.vals[name], FromStaticBroker
	}
	if d, ok := LookupBroker(name); ok {
		return d.DefaultIn(cl), FromDefault
	}
	return "", FromDefault
}
