package metadata

import (
	"encoding/json"
	"fmt"
)

// Record is one metadata change: a tagged union, exactly one field set.
// Records are JSON-encoded in Raft entries (see EncodeEntry and
// docs/format/metadata.md); the JSON member names are the format.
type Record struct {
	RegisterBroker   *RegisterBroker   `json:"registerBroker,omitempty"`
	FenceBroker      *FenceBroker      `json:"fenceBroker,omitempty"`
	CreateTopic      *CreateTopic      `json:"createTopic,omitempty"`
	DeleteTopic      *DeleteTopic      `json:"deleteTopic,omitempty"`
	CreatePartitions *CreatePartitions `json:"createPartitions,omitempty"`
	SetTopicConfigs  *SetTopicConfigs  `json:"setTopicConfigs,omitempty"`
	SetBrokerConfigs *SetBrokerConfigs `json:"setBrokerConfigs,omitempty"`
	SetGroupConfigs  *SetGroupConfigs  `json:"setGroupConfigs,omitempty"`
	ProducerIDBlock  *ProducerIDBlock  `json:"producerIdBlock,omitempty"`
	SetClusterID     *SetClusterID     `json:"setClusterId,omitempty"`
	PartitionChange  *PartitionChange  `json:"partitionChange,omitempty"`
	SetClientQuotas  *SetClientQuotas  `json:"setClientQuotas,omitempty"`
	CreateACLs       *CreateACLs       `json:"createAcls,omitempty"`
	DeleteACLs       *DeleteACLs       `json:"deleteAcls,omitempty"`

	UserScramCredential *UserScramCredential `json:"userScramCredential,omitempty"` // scram.go
}

// RegisterBroker adds a broker or replaces its registration (host, port,
// rack); registering unfences it.
type RegisterBroker struct {
	ID   int32  `json:"id"`
	Host string `json:"host"`
	Port int32  `json:"port"`
	Rack string `json:"rack,omitempty"`
	// Endpoints are every listener's advertised address; Host and Port
	// stay the inter-broker listener's. Older records have none.
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	// HTTP is the advertised address of the HTTP listener ("": none).
	HTTP string `json:"http,omitempty"`
}

// FenceBroker sets a registered broker's state: fenced or not, and in a
// controlled shutdown or not (both fields, so unfencing also ends a
// controlled shutdown).
type FenceBroker struct {
	ID     int32 `json:"id"`
	Fenced bool  `json:"fenced"`
	// InControlledShutdown: the broker is shutting down (KIP-841); it
	// leaves its ISRs and leaderships and may not join an ISR again until
	// it registers anew or is unfenced.
	InControlledShutdown bool `json:"inControlledShutdown,omitempty"`
}

// CreateTopic creates a topic. ID is chosen by the proposer (NewTopicID)
// and must be non-zero and unused. Replicas has one non-empty list per
// partition; the first replica becomes the leader with LeaderEpoch 0 and
// ISR = Replicas.
type CreateTopic struct {
	Name       string            `json:"name"`
	ID         [16]byte          `json:"-"` // JSON: "id", base64url (FormatUUID)
	Partitions int32             `json:"partitions"`
	Replicas   [][]int32         `json:"replicas"`
	Configs    map[string]string `json:"configs,omitempty"`
	Internal   bool              `json:"internal,omitempty"`
}

// DeleteTopic deletes a topic by Name or by ID (zero = unset). When both
// are set they must name the same topic.
type DeleteTopic struct {
	Name string   `json:"name,omitempty"`
	ID   [16]byte `json:"-"` // JSON: "id", base64url, omitted when zero
}

// CreatePartitions appends len(Replicas) partitions to a topic, one
// replica list per new partition.
type CreatePartitions struct {
	Name     string    `json:"name"`
	Replicas [][]int32 `json:"replicas"`
}

// SetTopicConfigs changes topic config overrides. Incremental by default
// (IncrementalAlterConfigs): set the keys in Set, remove the keys in
// Delete. With Replace (AlterConfigs) the overrides become exactly Set and
// Delete must be empty.
type SetTopicConfigs struct {
	Name    string            `json:"name"`
	Set     map[string]string `json:"set,omitempty"`
	Delete  []string          `json:"delete,omitempty"`
	Replace bool              `json:"replace,omitempty"`
}

// SetBrokerConfigs changes the cluster-wide dynamic broker configs, with
// the same semantics as SetTopicConfigs.
type SetBrokerConfigs struct {
	Set     map[string]string `json:"set,omitempty"`
	Delete  []string          `json:"delete,omitempty"`
	Replace bool              `json:"replace,omitempty"`
}

// SetGroupConfigs changes one group's configs (the GROUP config resource
// of DescribeConfigs and IncrementalAlterConfigs), with the same semantics
// as SetTopicConfigs. The group need not exist: Kafka lets configs be set
// before a group's first member joins. A group left with no configs is
// dropped from the image (Replace with an empty Set deletes them all, as
// DeleteGroups does).
type SetGroupConfigs struct {
	Group   string            `json:"group"`
	Set     map[string]string `json:"set,omitempty"`
	Delete  []string          `json:"delete,omitempty"`
	Replace bool              `json:"replace,omitempty"`
}

// MaxProducerIDBlock bounds ProducerIDBlock.Count.
const MaxProducerIDBlock = 1 << 20

// ProducerIDBlock hands out Count producer ids starting at the image's
// NextProducerID. The first id is returned to the proposer as the apply
// result (see Controller.AllocateProducerIDs).
type ProducerIDBlock struct {
	Count int64 `json:"count"`
}

// SetClusterID sets the cluster id once; setting the same id again is a
// no-op, a different one fails with ErrClusterIDMismatch.
type SetClusterID struct {
	ID string `json:"id"`
}

// PartitionChange changes one partition's leader, ISR or replicas (nil =
// unchanged). LeaderEpoch bumps when the leader changes; PartitionEpoch
// bumps on every change (a change that changes nothing is a no-op). The resulting ISR must be a
// subset of the replicas, and the leader NoLeader or a member of the ISR.
// ExpectPartitionEpoch, when set, fences stale updates (AlterPartition's
// partitionEpoch): a mismatch fails with ErrStaleEpoch. With EligibleISR
// (a partition leader's ISR change) every broker the change adds to the
// ISR must be registered, unfenced and not in controlled shutdown, or the
// change fails with ErrIneligibleReplica (KIP-841).
type PartitionChange struct {
	Topic                string  `json:"topic"`
	Partition            int32   `json:"partition"`
	Leader               *int32  `json:"leader,omitempty"`
	ISR                  []int32 `json:"isr"`      // null = unchanged, [] = empty
	Replicas             []int32 `json:"replicas"` // null = unchanged
	ExpectPartitionEpoch *int32  `json:"expectPartitionEpoch,omitempty"`
	// EligibleISR asks apply to refuse a change that adds an ineligible
	// broker to the ISR. It is a field rather than a rule for every
	// change so that entries written before the rule existed replay to
	// the images they made then.
	EligibleISR bool `json:"eligibleIsr,omitempty"`
	// AddingReplicas and RemovingReplicas set the reassignment in
	// progress (null = unchanged, [] = none); both must be subsets of the
	// resulting replicas and disjoint.
	AddingReplicas   []int32 `json:"addingReplicas"` // null = unchanged
	RemovingReplicas []int32 `json:"removingReplicas"`
}

// kind returns the name of the one member set, or an error.
func (r *Record) kind() (string, error) {
	n, kind := 0, ""
	set := func(ok bool, name string) {
		if ok {
			n++
			kind = name
		}
	}
	set(r.RegisterBroker != nil, "registerBroker")
	set(r.FenceBroker != nil, "fenceBroker")
	set(r.CreateTopic != nil, "createTopic")
	set(r.DeleteTopic != nil, "deleteTopic")
	set(r.CreatePartitions != nil, "createPartitions")
	set(r.SetTopicConfigs != nil, "setTopicConfigs")
	set(r.SetBrokerConfigs != nil, "setBrokerConfigs")
	set(r.SetGroupConfigs != nil, "setGroupConfigs")
	set(r.ProducerIDBlock != nil, "producerIdBlock")
	set(r.SetClusterID != nil, "setClusterId")
	set(r.PartitionChange != nil, "partitionChange")
	set(r.SetClientQuotas != nil, "setClientQuotas")
	set(r.CreateACLs != nil, "createAcls")
	set(r.DeleteACLs != nil, "deleteAcls")
	set(r.UserScramCredential != nil, "userScramCredential")
	if n != 1 {
		return "", fmt.Errorf("%w: %d union members set, want 1", ErrInvalidRecord, n)
	}
	return kind, nil
}

// uuidText is a topic id in JSON: base64url without padding.
type uuidText [16]byte

func (u uuidText) MarshalText() ([]byte, error) { return []byte(FormatUUID(u)), nil }

func (u *uuidText) UnmarshalText(b []byte) error {
	id, err := ParseUUID(string(b))
	*u = id
	return err
}

// MarshalJSON encodes ID as "id": base64url.
func (r CreateTopic) MarshalJSON() ([]byte, error) {
	type plain CreateTopic
	return json.Marshal(struct {
		ID uuidText `json:"id"`
		plain
	}{uuidText(r.ID), plain(r)})
}

// UnmarshalJSON decodes MarshalJSON's output.
func (r *CreateTopic) UnmarshalJSON(b []byte) error {
	type plain CreateTopic
	var v struct {
		ID uuidText `json:"id"`
		plain
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = CreateTopic(v.plain)
	r.ID = v.ID
	return nil
}

// MarshalJSON encodes ID as "id": base64url, omitted when zero.
func (r DeleteTopic) MarshalJSON() ([]byte, error) {
	type plain DeleteTopic
	var id *uuidText
	if r.ID != ([16]byte{}) {
		id = (*uuidText)(&r.ID)
	}
	return json.Marshal(struct {
		ID *uuidText `json:"id,omitempty"`
		plain
	}{id, plain(r)})
}

// UnmarshalJSON decodes MarshalJSON's output.
func (r *DeleteTopic) UnmarshalJSON(b []byte) error {
	type plain DeleteTopic
	var v struct {
		ID *uuidText `json:"id"`
		plain
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = DeleteTopic(v.plain)
	if v.ID != nil {
		r.ID = *v.ID
	}
	return nil
}
