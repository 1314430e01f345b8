package handler

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/metadata"
)

// SchemaGate checks the records a producer sends to a topic against the
// schema registry before they are appended (Confluent's broker-side
// schema validation). The node's gate reads the registry from memory: it
// never calls out over the network.
type SchemaGate interface {
	// Check returns nil when t does not validate or every record of
	// records (a partition's record batches) passes; else an
	// *InvalidRecords, or a kerr error for records that do not parse.
	Check(t *metadata.Topic, records []byte, scratch *batch.Scratch) error
}

// RecordError is one refused record: its index among the partition's
// records in the request, and why.
type RecordError struct {
	Index   int32
	Message string
}

// InvalidRecords refuses a partition's batch whole (INVALID_RECORD),
// naming each refused record in the response's RecordErrors (Produce v8+).
type InvalidRecords struct {
	Topic   string
	Records []RecordError
}

// maxRecordErrors bounds the record errors one response carries.
const maxRecordErrors = 100

func (e *InvalidRecords) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d record(s) refused by the schema registry check of topic %s", len(e.Records), e.Topic)
	if len(e.Records) > 0 {
		fmt.Fprintf(&b, "; record %d: %s", e.Records[0].Index, e.Records[0].Message)
	}
	return b.String()
}

func (e *InvalidRecords) Unwrap() error { return kerr.InvalidRecord }

// ValidatesSchemas reports whether t has schema validation on (either
// setting), the gate's quick way out for the topics without it.
func ValidatesSchemas(t *metadata.Topic) bool {
	return strings.EqualFold(t.Configs["confluent.value.schema.validation"], "true") ||
		strings.EqualFold(t.Configs["confluent.key.schema.validation"], "true")
}

// fillRecordErrors copies an *InvalidRecords' records into a produce
// response partition (v8+).
func fillRecordErrors(sp *kmsg.ProduceResponseTopicPartition, ir *InvalidRecords) {
	for i, re := range ir.Records {
		if i == maxRecordErrors {
			break
		}
		e := kmsg.NewProduceResponseTopicPartitionErrorRecord()
		e.RelativeOffset = re.Index
		msg := re.Message
		e.ErrorMessage = &msg
		sp.ErrorRecords = append(sp.ErrorRecords, e)
	}
}
