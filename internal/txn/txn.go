package txn

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Status is a transaction's state, with Kafka's TransactionState ids (the
// TransactionStatus field of __transaction_state values).
type Status int8

const (
	Empty             Status = 0
	Ongoing           Status = 1
	PrepareCommit     Status = 2
	PrepareAbort      Status = 3
	CompleteCommit    Status = 4
	CompleteAbort     Status = 5
	Dead              Status = 6
	PrepareEpochFence Status = 7
)

var statusNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// String is Kafka's name of the state, as DescribeTransactions and
// ListTransactions return it.
func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Unknown(%d)", int8(s))
}

// ParseStatus is the inverse of String (ListTransactions state filters).
func ParseStatus(name string) (Status, bool) {
	for i, n := range statusNames {
		if n == name {
			return Status(i), true
		}
	}
	return 0, false
}

// TopicPartition names a partition written in a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

func compareTP(a, b TopicPartition) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// Client transaction versions (Kafka's TransactionVersion feature levels):
// 0 the original protocol, 1 KIP-890 part 1 (partition leaders verify
// that a partition is in the transaction), 2 KIP-890 part 2
// (Transactions V2: implicit enlistment by Produce, an epoch bump at the
// end of every transaction).
const (
	TV0 int16 = 0
	TV1 int16 = 1
	TV2 int16 = 2
)

// NoProducerID and NoEpoch are Kafka's -1 "none" values.
const (
	NoProducerID int64 = -1
	NoEpoch      int16 = -1
)

// exhausted is Kafka's TransactionMetadata.isEpochExhausted: an epoch
// that cannot be bumped twice more (once to fence, once to abort).
func exhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

// Txn is the metadata of one transactional id (Kafka's
// TransactionMetadata). Every field is persisted, so a coordinator that
// replays the records rebuilds it exactly.
type Txn struct {
	ID string
	// ProducerID and ProducerEpoch are the producer id and epoch in use.
	ProducerID    int64
	ProducerEpoch int16
	// PrevProducerID is the producer id before the last transition (it
	// differs from ProducerID after a rotation): a client retrying an
	// InitProducerId whose answer it lost may present it (KIP-360).
	PrevProducerID int64
	// NextProducerID is the producer id that replaces ProducerID when a
	// Transactions V2 transaction completes with its epoch exhausted.
	NextProducerID int64
	// LastProducerEpoch is the epoch before the last bump the client asked
	// for with its producer id (KIP-360): a retry with it gets the current
	// epoch again instead of PRODUCER_FENCED. NoEpoch once another
	// producer fenced it.
	LastProducerEpoch int16
	TimeoutMs         int32
	Status            Status
	// Partitions are the partitions in the transaction, sorted.
	Partitions []TopicPartition
	// Groups are the consumer groups whose offsets were added
	// (AddOffsetsToTxn), sorted. Kafka does not keep them; Berth shows
	// them in `berth txn describe`.
	Groups        []string
	StartMs       int64 // when the transaction began (first partition added); -1: none
	LastUpdateMs  int64
	ClientVersion int16 // TV0, TV1 or TV2
}

func (t *Txn) clone() *Txn {
	c := *t
	c.Partitions = slices.Clone(t.Partitions)
	c.Groups = slices.Clone(t.Groups)
	return &c
}

func (t *Txn) has(tp TopicPartition) bool {
	_, ok := slices.BinarySearchFunc(t.Partitions, tp, compareTP)
	return ok
}

func (t *Txn) addPartition(tp TopicPartition) {
	if i, ok := slices.BinarySearchFunc(t.Partitions, tp, compareTP); !ok {
		t.Partitions = slices.Insert(t.Partitions, i, tp)
	}
}

func (t *Txn) addGroup(g string) {
	if i, ok := slices.BinarySearch(t.Groups, g); !ok {
		t.Groups = slices.Insert(t.Groups, i, g)
	}
}

// Config holds the coordinator's settings, with Kafka's broker config
// names.
type Config struct {
	// MaxTimeout is transaction.max.timeout.ms: the largest
	// transaction.timeout.ms a producer may ask for.
	MaxTimeout time.Duration
	// IDExpiration is transactional.id.expiration.ms: an id whose last
	// transaction ended this long ago (or that never began one) is deleted.
	IDExpiration time.Duration
	// AbortInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms: how
	// often the caller should run AbortTimedOut.
	AbortInterval time.Duration
	// ExpireInterval is
	// transaction.remove.expired.transaction.cleanup.interval.ms: how
	// often the caller should run ExpireIDs.
	ExpireInterval time.Duration
	// OffsetsPartitions is offsets.topic.num.partitions: AddOffsetsToTxn
	// adds the group's __consumer_offsets partition.
	OffsetsPartitions int32
}

// Defaults returns Kafka's defaults.
func Defaults() Config {
	return Config{
		MaxTimeout:        15 * time.Minute,
		IDExpiration:      7 * 24 * time.Hour,
		AbortInterval:     10 * time.Second,
		ExpireInterval:    time.Hour,
		OffsetsPartitions: 50,
	}
}

// ErrInvalidConfig is returned by Validate.
var ErrInvalidConfig = errors.New("txn: invalid config")

// Validate checks the settings.
func (c Config) Validate() error {
	switch {
	case c.MaxTimeout <= 0 || c.MaxTimeout.Milliseconds() > math.MaxInt32:
		return fmt.Errorf("%w: transaction.max.timeout.ms %v", ErrInvalidConfig, c.MaxTimeout)
	case c.IDExpiration <= 0:
		return fmt.Errorf("%w: transactional.id.expiration.ms %v", ErrInvalidConfig, c.IDExpiration)
	case c.AbortInterval <= 0:
		return fmt.Errorf("%w: transaction.abort.timed.out.transaction.cleanup.interval.ms %v", ErrInvalidConfig, c.AbortInterval)
	case c.ExpireInterval <= 0:
		return fmt.Errorf("%w: transaction.remove.expired.transaction.cleanup.interval.ms %v", ErrInvalidConfig, c.ExpireInterval)
	case c.OffsetsPartitions <= 0:
		return fmt.Errorf("%w: offsets.topic.num.partitions %d", ErrInvalidConfig, c.OffsetsPartitions)
	}
	return nil
}
