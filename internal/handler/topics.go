package handler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berthmq/berth/internal/cluster"
	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/metadata"
)

// maxTopicName is Kafka's limit on topic name length.
const maxTopicName = 249

// validTopicName applies Kafka's rules: 1-249 of [a-zA-Z0-9._-], not "." or "..".
func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > maxTopicName {
		return fmt.Errorf("%w: topic name %q must be 1-%d characters and not . or ..", kerr.InvalidTopicException, name, maxTopicName)
	}
	for _, c := range name {
		ok := c == '.' || c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !ok {
			return fmt.Errorf("%w: topic name %q may only contain ASCII letters, digits, '.', '_' and '-'", kerr.InvalidTopicException, name)
		}
	}
	return nil
}

// checkTopicConfigs validates topic-level settings.
func checkTopicConfigs(cfgs map[string]string) error {
	for k, v := range cfgs {
		d, ok := config.LookupTopic(k)
		if !ok {
			return fmt.Errorf("%w: unknown topic config %q", kerr.InvalidConfig, k)
		}
		if err := d.CheckValue(v); err != nil {
			return fmt.Errorf("%w: %v", kerr.InvalidConfig, err)
		}
	}
	return nil
}

// assignReplicas places count new partitions of topic with rf replicas
// each on the live brokers: rack-aware and balanced (cluster.Assign),
// starting at a random broker as Kafka does.
func assignReplicas(im *metadata.Image, topic string, count, rf int32) ([][]int32, error) {
	return cluster.Assign(im, cluster.AssignRequest{Topic: topic, Partitions: count, ReplicationFactor: rf, Seed: rand.Int64()})
}

// topicSpec is a topic to create.
type topicSpec struct {
	name       string
	partitions int32
	rf         int32
	assignment [][]int32 // manual assignment, or nil
	configs    map[string]string
}

// prepareTopic validates a spec against the image and builds the record.
func (b *Broker) prepareTopic(im *metadata.Image, s topicSpec) (metadata.Record, error) {
	if err := validTopicName(s.name); err != nil {
		return metadata.Record{}, err
	}
	if metadata.IsInternalTopic(s.name) {
		return metadata.Record{}, fmt.Errorf("%w: %s is an internal topic; the broker creates it", kerr.InvalidRequest, s.name)
	}
	if im.Topic(s.name) != nil {
		return metadata.Record{}, fmt.Errorf("%w: topic %q already exists", kerr.TopicAlreadyExists, s.name)
	}
	if err := checkTopicConfigs(s.configs); err != nil {
		return metadata.Record{}, err
	}
	var replicas [][]int32
	if len(s.assignment) > 0 {
		if s.partitions != -1 || s.rf != -1 {
			return metadata.Record{}, fmt.Errorf("%w: give either a replica assignment or partitions and replication factor", kerr.InvalidRequest)
		}
		if err := cluster.ValidateAssignment(im, s.assignment); err != nil {
			return metadata.Record{}, err
		}
		replicas = s.assignment
	} else {
		n, rf := s.partitions, s.rf
		if n == -1 {
			n = int32(atoi(b.brokerValue(im, "num.partitions")))
		}
		if rf == -1 {
			var err error
			if rf, err = b.defaultReplicationFactor(im); err != nil {
				return metadata.Record{}, err
			}
		}
		if n < 1 {
			return metadata.Record{}, fmt.Errorf("%w: %d partitions; a topic needs at least 1", kerr.InvalidPartitions, n)
		}
		if n > 100000 {
			return metadata.Record{}, fmt.Errorf("%w: %d partitions is more than the 100000 a topic may have", kerr.InvalidPartitions, n)
		}
		var err error
		if replicas, err = assignReplicas(im, s.name, n, rf); err != nil {
			return metadata.Record{}, err
		}
	}
	cfgs := map[string]string{}
	for k, v := range s.configs {
		cfgs[k] = v
	}
	return metadata.Record{CreateTopic: &metadata.CreateTopic{
		Name: s.name, ID: metadata.NewTopicID(), Partitions: int32(len(replicas)), Replicas: replicas, Configs: cfgs,
	}}, nil
}

// createTopic creates one topic and waits until its partitions are open.
func (b *Broker) createTopic(ctx context.Context, s topicSpec) (*metadata.Topic, error) {
	rec, err := b.prepareTopic(b.image(), s)
	if err != nil {
		return nil, err
	}
	if err := b.propose(ctx, rec); err != nil {
		return nil, err
	}
	t := b.image().Topic(s.name)
	if t == nil {
		return nil, fmt.Errorf("%w: topic %q vanished after creation", kerr.UnknownTopicOrPartition, s.name)
	}
	b.log.Info("topic created", "topic", s.name, "partitions", len(t.Partitions), "configs", s.configs)
	return t, nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func atoi(s string) int64 {
	var n int64
	neg := false
	for i, c := range s {
		if i == 0 && c == '-' {
			neg = true
			continue
		}
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		return -n
	}
	return n
}

// defaultReplicationFactor is default.replication.factor as it applies to
// a topic created now: the setting, or min(3, nodes) when nobody set it.
// cluster.ErrBrokersDown when the cluster has that many nodes but fewer
// are live brokers.
func (b *Broker) defaultReplicationFactor(im *metadata.Image) (int32, error) {
	nodes := im.Nodes()
	v, _ := b.Broker.ResolveBrokerIn("default.replication.factor", im.BrokerConfigs, config.Cluster{Nodes: nodes})
	rf := int32(atoi(v))
	if err := b.Topics.BrokersUp(im, rf, "default.replication.factor"); err != nil {
		return 0, fmt.Errorf("%w: %w", kerr.InvalidReplicationFactor, err)
	}
	return rf, nil
}
