package berthmsg

// Dead-letter queue names from KIP-1191 ("Dead-letter queues for share
// groups", Apache Kafka 4.4), as Kafka's GroupConfig,
// GroupCoordinatorConfig, topic configs and ShareGroupDLQRecordHelper
// spell them.
const (
	// ConfigDLQTopicName is the group config naming the group's DLQ topic;
	// blank (the default) means the group has none.
	ConfigDLQTopicName = "errors.deadletterqueue.topic.name"
	// ConfigDLQCopyRecordEnable is the group config choosing whether the
	// DLQ record carries the original key, value and headers (true) or
	// only the context headers (false, Kafka's default).
	ConfigDLQCopyRecordEnable = "errors.deadletterqueue.copy.record.enable"
	// TopicConfigDLQGroupEnable must be true on a topic for a group to use
	// it as its DLQ topic.
	TopicConfigDLQGroupEnable = "errors.deadletterqueue.group.enable"
	// BrokerDLQTopicNamePrefix is the prefix every DLQ topic name must
	// have; DefaultDLQTopicNamePrefix is its default.
	BrokerDLQTopicNamePrefix  = "errors.deadletterqueue.topic.name.prefix"
	DefaultDLQTopicNamePrefix = "dlq."
	// BrokerDLQAutoCreateTopicsEnable lets the broker create a missing DLQ
	// topic (default false).
	BrokerDLQAutoCreateTopicsEnable = "errors.deadletterqueue.auto.create.topics.enable"

	// The context headers of a DLQ record (KIP-1191; note the two leading
	// underscores, as Kafka writes them). Values are UTF-8 strings.
	HeaderDLQTopic         = "__dlq.errors.topic"
	HeaderDLQPartition     = "__dlq.errors.partition"
	HeaderDLQOffset        = "__dlq.errors.offset"
	HeaderDLQGroup         = "__dlq.errors.group"
	HeaderDLQDeliveryCount = "__dlq.errors.delivery.count"
	HeaderDLQMessage       = "__dlq.errors.message"

	// Berth additions to the context headers (Kafka has no equivalent):
	// the reason as a stable token (Reason.String), the source record's
	// timestamp (milliseconds since the epoch; the DLQ record's own
	// timestamp is the time it was parked, as Kafka's writer sets it, so
	// the job's original time would be lost without this header), the
	// consumer's error text and stack as sent with its REJECT, and the
	// number of times the record was redriven from the DLQ (the redrive
	// loop guard).
	HeaderDLQReason       = "__dlq.errors.berth.reason"
	HeaderDLQTimestamp    = "__dlq.errors.berth.timestamp"
	HeaderDLQClientError  = "__dlq.errors.berth.client.error"
	HeaderDLQRedriveCount = "__dlq.errors.berth.redrive.count"
)
