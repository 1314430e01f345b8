package share

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/pkg/berthmsg"
)

// DLQHeaders returns the context headers of the DLQ record for the source
// record at offset (with its timestamp in milliseconds) parked by action
// a: KIP-1191's, then Berth's. With errors.deadletterqueue.copy.record.enable
// the caller writes them after the source record's own headers, with its
// key and value; otherwise the DLQ record has these headers only.
func DLQHeaders(group, topic string, partition int32, offset, timestampMs int64, a DLQAction) []kmsg.Header {
	h := []kmsg.Header{
		{Key: berthmsg.HeaderDLQTopic, Value: []byte(topic)},
		{Key: berthmsg.HeaderDLQPartition, Value: strconv.AppendInt(nil, int64(partition), 10)},
		{Key: berthmsg.HeaderDLQOffset, Value: strconv.AppendInt(nil, offset, 10)},
		{Key: berthmsg.HeaderDLQGroup, Value: []byte(group)},
		{Key: berthmsg.HeaderDLQDeliveryCount, Value: strconv.AppendInt(nil, int64(a.DeliveryCount), 10)},
		{Key: berthmsg.HeaderDLQMessage, Value: []byte(a.Reason.Message())},
		{Key: berthmsg.HeaderDLQReason, Value: []byte(a.Reason.String())},
		{Key: berthmsg.HeaderDLQTimestamp, Value: strconv.AppendInt(nil, timestampMs, 10)},
	}
	if a.ErrorText != "" {
		h = append(h, kmsg.Header{Key: berthmsg.HeaderDLQClientError, Value: []byte(a.ErrorText)})
	}
	return h
}
