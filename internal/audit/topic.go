package audit

import (
	"strconv"

	"github.com/berthmq/berth/internal/cluster"
	"github.com/berthmq/berth/internal/config"
)

// TopicSpec is __berth_audit as cluster.Topics creates it on first use:
// audit.log.topic.* partitions, replication factor (capped at the
// cluster's nodes) and segment size; cleanup.policy=delete (an audit
// trail is never compacted: every event of a principal is kept, not its
// last) and retention.ms from audit.log.retention.ms.
func TopicSpec(cfg *config.Config) cluster.InternalTopic {
	return cluster.InternalTopic{
		Name: Topic, Partitions: "audit.log.topic.num.partitions",
		ReplicationFactor: "audit.log.topic.replication.factor", SegmentBytes: "audit.log.topic.segment.bytes",
		Configs: map[string]string{
			"cleanup.policy": "delete",
			"retention.ms":   strconv.FormatInt(cfg.Int("audit.log.retention.ms"), 10),
		},
	}
}
