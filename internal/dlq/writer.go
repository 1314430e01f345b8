// Package dlq is the dead-letter writer (sharepart.DLQWriter): it copies records that a
// share group rejected, or that reached the delivery limit, from their
// source partition (which this broker leads) to the group's dead-letter
// topic (KIP-1191), and returns once they are durable there (acks=all).
// sharepart archives the records only after that, so a crash in between
// parks them again: at least once, never lost.
//
// The dead-letter topic's partitions may be led by other brokers, so the
// writer produces through an ordinary Kafka client (kgo) bootstrapped at
// this node's own listener, made on first use and closed by Close when
// the node stops. Each source record becomes one dead-letter record:
//
//   - with errors.deadletterqueue.copy.record.enable (Berth's default:
//     true) its key, value and headers, minus any __dlq.errors.* headers
//     it carries from an earlier parking (except
//     __dlq.errors.berth.redrive.count, the redrive loop guard), then the
//     context headers (share.DLQHeaders);
//   - otherwise only the context headers, with no key and no value.
//
// The record's timestamp is the time it is parked (the time of this
// write, so a record parked again after a reload gets the new write's
// time): the DLQ topic's retention counts from when the job was parked,
// not from when it was produced. The source record's own timestamp goes
// in the __dlq.errors.berth.timestamp header. Its partition is chosen
// by kgo's default partitioner: the murmur2 hash of the key, as Kafka's
// producers do, so a keyed job lands in the same dead-letter partition
// every time; records without a key (and all of them when the record is
// not copied) are spread.
package dlq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/share"
	"github.com/berthmq/berth/internal/sharepart"
	"github.com/berthmq/berth/pkg/berthmsg"
)

// errTopic: the dead-letter topic is missing or may not be used as one;
// the write is retried (the records stay Archiving) until an operator
// fixes it.
var errTopic = errors.New("dead-letter topic unusable")

// readBytes is how much of the source log one read takes.
const readBytes = 1 << 20

// Config is what a Writer needs from its node.
type Config struct {
	// Broker is the broker's settings (the DLQ settings and a group's
	// configs resolve over them).
	Broker *config.Config
	// Image returns the current metadata image.
	Image func() *metadata.Image
	// Replicas holds the source partitions, which this node leads.
	Replicas *replica.Manager
	// Listener returns the address of this node's Kafka listener, nil
	// until it serves.
	Listener func() net.Addr
	NodeID   int32
	Logger   *slog.Logger

	// Dial, when set, opens the client's connections (TLS to an SSL
	// inter-broker listener).
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// SASL authenticates the writer's client to a SASL listener; nil: none.
	SASL sasl.Mechanism
}

// Writer writes to dead-letter topics; mu guards cl and closed.
type Writer struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	cl     *kgo.Client // nil until first use
	closed bool
}

// New returns the writer of dead-letter topics.
func New(cfg Config) *Writer { return &Writer{cfg: cfg, log: cfg.Logger} }

// Park implements sharepart.DLQWriter.
func (w *Writer) Park(ctx context.Context, k share.Key, topic, dlqTopic string, a share.DLQAction) error {
	im := w.cfg.Image()
	g, _ := sharepart.ResolveGroupConfig(w.cfg.Broker, im.GroupConfig(k.Group), im.BrokerConfigs)
	if t := im.Topic(topic); t == nil || t.ID != k.TopicID {
		w.log.Warn("share: the source topic of records to dead-letter is gone; archiving them without parking",
			"group", k.Group, "topic", topic, "partition", k.Partition, "first", a.First, "last", a.Last)
		return nil
	}
	if err := w.checkTopic(ctx, im, k.Group, dlqTopic); err != nil {
		return err
	}
	recs, err := w.sourceRecords(k, topic, dlqTopic, a, g.DLQCopyRecord, time.Now())
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil // deleted by retention or DeleteRecords, or only control records: nothing to park
	}
	cl, err := w.client()
	if err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("writing %d records of %s/%d to dead-letter topic %s: %w", len(recs), topic, k.Partition, dlqTopic, err)
	}
	return nil
}

// checkTopic checks that dlqTopic may be written as group's dead-letter
// topic, creating it when errors.deadletterqueue.auto.create.topics.enable
// allows.
func (w *Writer) checkTopic(ctx context.Context, im *metadata.Image, group, dlqTopic string) error {
	prefix, _ := w.cfg.Broker.ResolveBroker(berthmsg.BrokerDLQTopicNamePrefix, im.BrokerConfigs)
	if !strings.HasPrefix(dlqTopic, prefix) {
		return fmt.Errorf("%w: %q of share group %q does not start with %q (%s); change the group config %s",
			errTopic, dlqTopic, group, prefix, berthmsg.BrokerDLQTopicNamePrefix, berthmsg.ConfigDLQTopicName)
	}
	t := im.Topic(dlqTopic)
	if t == nil {
		auto, _ := w.cfg.Broker.ResolveBroker(berthmsg.BrokerDLQAutoCreateTopicsEnable, im.BrokerConfigs)
		if auto != "true" {
			return fmt.Errorf("%w: %q (of share group %q) does not exist; create it with %s=true "+
				"(berth topic create %s --config %s=true), or set the broker setting %s=true",
				errTopic, dlqTopic, group, berthmsg.TopicConfigDLQGroupEnable, dlqTopic, berthmsg.TopicConfigDLQGroupEnable,
				berthmsg.BrokerDLQAutoCreateTopicsEnable)
		}
		return w.create(ctx, dlqTopic)
	}
	cl := config.Cluster{Nodes: im.Nodes(), ReplicationFactor: t.ReplicationFactor()}
	if v, _ := w.cfg.Broker.ResolveTopic(berthmsg.TopicConfigDLQGroupEnable, t.Configs, im.BrokerConfigs, cl); v != "true" {
		return fmt.Errorf("%w: %q (of share group %q) does not have %s=true, so it may not take dead-letter records (KIP-1191); "+
			"set it (berth topic alter %s --config %s=true) or name another topic",
			errTopic, dlqTopic, group, berthmsg.TopicConfigDLQGroupEnable, dlqTopic, berthmsg.TopicConfigDLQGroupEnable)
	}
	return nil
}

// create makes a missing dead-letter topic: one partition, the default
// replication factor (default.replication.factor: min(3, nodes) unless
// set), errors.deadletterqueue.group.enable=true. While too few brokers
// are up for that replication factor the creation fails and the
// dead-letter write is retried.
func (w *Writer) create(ctx context.Context, dlqTopic string) error {
	cl, err := w.client()
	if err != nil {
		return err
	}
	enable := "true"
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, map[string]*string{berthmsg.TopicConfigDLQGroupEnable: &enable}, dlqTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating dead-letter topic %s: %w", dlqTopic, err)
	}
	w.log.Info("share: created dead-letter topic", "topic", dlqTopic, "replication_factor", resp.ReplicationFactor)
	return nil
}

// sourceRecords reads the records [a.First, a.Last] of the source
// partition and makes their dead-letter records, stamped parkedAt;
// offsets with no record (compacted, deleted, control batches) are
// skipped.
func (w *Writer) sourceRecords(k share.Key, topic, dlqTopic string, a share.DLQAction, copyRecord bool, parkedAt time.Time) ([]*kgo.Record, error) {
	part := w.cfg.Replicas.Get(topic, k.Partition)
	if part == nil {
		return nil, fmt.Errorf("reading records to dead-letter: %s/%d is not on this broker", topic, k.Partition)
	}
	scratch := batch.GetScratch()
	defer batch.PutScratch(scratch)
	var out []*kgo.Record
	off := a.First
	for off <= a.Last {
		off = max(off, part.LogStartOffset())
		if off > a.Last {
			break
		}
		res, err := part.Read(off, readBytes, true, nil)
		if err != nil {
			return nil, fmt.Errorf("reading %s/%d at %d to dead-letter: %w", topic, k.Partition, off, err)
		}
		if len(res.Records) == 0 {
			break // nothing readable past here (the high watermark)
		}
		next := off
		for b := res.Records; len(b) >= batch.HeaderSize; {
			h := batch.DecodeHeader(b)
			size := h.Size()
			if size < batch.HeaderSize || size > len(b) {
				break
			}
			one := b[:size]
			b = b[size:]
			last := h.BaseOffset + int64(h.LastOffsetDelta)
			next = max(next, last+1)
			if h.Control() || last < off || h.BaseOffset > a.Last {
				continue
			}
			recs, _, err := batch.Records(one, scratch)
			if err != nil {
				return nil, fmt.Errorf("reading %s/%d at %d to dead-letter: %w", topic, k.Partition, h.BaseOffset, err)
			}
			for _, r := range recs {
				o := h.BaseOffset + r.OffsetDelta
				if o < off || o > a.Last {
					continue
				}
				ts := h.BaseTimestamp + r.TimestampDelta
				if h.Attributes&batch.AttrLogAppendTime != 0 {
					ts = h.MaxTimestamp
				}
				out = append(out, record(k, topic, dlqTopic, o, ts, parkedAt, r, a, copyRecord))
			}
		}
		if next <= off {
			break
		}
		off = next
	}
	return out, nil
}

// record is the dead-letter record of source record r at offset o,
// whose timestamp is ts (ms): its own timestamp is parkedAt, ts goes in
// a context header. Its slices are copies: r aliases the read buffer or
// the scratch.
func record(k share.Key, topic, dlqTopic string, o, ts int64, parkedAt time.Time, r batch.Record, a share.DLQAction, copyRecord bool) *kgo.Record {
	rec := &kgo.Record{Topic: dlqTopic, Timestamp: parkedAt}
	if copyRecord {
		rec.Key = cloneBytes(r.Key)
		rec.Value = cloneBytes(r.Value)
		for _, h := range r.Headers {
			if strings.HasPrefix(h.Key, "__dlq.errors.") && h.Key != berthmsg.HeaderDLQRedriveCount {
				continue
			}
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: cloneBytes(h.Value)})
		}
	}
	for _, h := range share.DLQHeaders(k.Group, topic, k.Partition, o, ts, a) {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return rec
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// client returns the writer's Kafka client, made on first use and closed
// by Close.
func (w *Writer) client() (*kgo.Client, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, errors.New("dead-letter writer: the node is shutting down")
	}
	if w.cl != nil {
		return w.cl, nil
	}
	addr := w.cfg.Listener()
	if addr == nil {
		return nil, errors.New("dead-letter writer: the Kafka listener is not serving yet")
	}
	opts := []kgo.Opt{}
	if d := w.cfg.Dial; d != nil {
		opts = append(opts, kgo.Dialer(func(ctx context.Context, _, host string) (net.Conn, error) { return d(ctx, host) }))
	}
	cl, err := kgo.NewClient(append(opts,
		kgo.SeedBrokers(loopback(addr)),
		kgo.ClientID("berth-dlq-"+strconv.Itoa(int(w.cfg.NodeID))),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.RecordRetries(10),
		// A topic just created (auto-creation) or moved is looked up
		// again soon rather than after kgo's default 5 s.
		kgo.MetadataMinAge(250*time.Millisecond),
		saslOpt(w.cfg.SASL),
	)...)
	if err != nil {
		return nil, fmt.Errorf("dead-letter writer: %w", err)
	}
	w.cl = cl
	return cl, nil
}

// Close closes the writer's client (a Park in flight fails and is
// retried by the share-partition's next load); later Parks fail.
func (w *Writer) Close() {
	w.mu.Lock()
	w.closed = true
	cl := w.cl
	w.mu.Unlock()
	if cl != nil {
		cl.Close()
	}
}

// loopback is the address to reach this node's own listener: its bound
// address, with a wildcard host replaced by the loopback address.
func loopback(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	ip := ta.IP
	switch {
	case ip == nil || ip.IsUnspecified() && ip.To4() != nil:
		ip = net.IPv4(127, 0, 0, 1)
	case ip.IsUnspecified():
		ip = net.IPv6loopback
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(ta.Port))
}

// saslOpt authenticates with m, when set.
func saslOpt(m sasl.Mechanism) kgo.Opt {
	if m == nil {
		return kgo.WithHooks() // no-op
	}
	return kgo.SASL(m)
}
