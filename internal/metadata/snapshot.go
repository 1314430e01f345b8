package metadata

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/berthmq/berth/internal/vfs"
)

// Snapshot files are named snapshot-<20-digit index>.json and hold one JSON
// object (docs/format/metadata.md):
//
//	{"version":1,"index":N,"term":T,"confState":{...},"crc32c":C,"image":{...}}
//
// where crc32c is the CRC32C of the image member's bytes exactly as stored.
// The image member is also the Data of the raft snapshot sent to followers.
const (
	snapPrefix  = "snapshot-"
	snapSuffix  = ".json"
	snapVersion = 1
)

type snapshotFile struct {
	Version   int             `json:"version"`
	Index     uint64          `json:"index"`
	Term      uint64          `json:"term"`
	ConfState confStateJSON   `json:"confState"`
	CRC       uint32          `json:"crc32c"`
	Image     json.RawMessage `json:"image"`
}

type confStateJSON struct {
	Voters         []uint64 `json:"voters"`
	Learners       []uint64 `json:"learners,omitempty"`
	VotersOutgoing []uint64 `json:"votersOutgoing,omitempty"`
	LearnersNext   []uint64 `json:"learnersNext,omitempty"`
	AutoLeave      bool     `json:"autoLeave,omitempty"`
}

func toConfStateJSON(cs *pb.ConfState) confStateJSON {
	return confStateJSON{
		Voters:         cs.GetVoters(),
		Learners:       cs.GetLearners(),
		VotersOutgoing: cs.GetVotersOutgoing(),
		LearnersNext:   cs.GetLearnersNext(),
		AutoLeave:      cs.GetAutoLeave(),
	}
}

func (c confStateJSON) proto() *pb.ConfState {
	return &pb.ConfState{
		Voters:         c.Voters,
		Learners:       c.Learners,
		VotersOutgoing: c.VotersOutgoing,
		LearnersNext:   c.LearnersNext,
		AutoLeave:      new(c.AutoLeave),
	}
}

// imageJSON is the serialized Image: slices sorted by id / name and
// json's sorted map keys make it deterministic, so equal images encode to
// equal bytes.
type imageJSON struct {
	Index          uint64            `json:"index"`
	ClusterID      string            `json:"clusterId"`
	NextProducerID int64             `json:"nextProducerId"`
	Brokers        []brokerJSON      `json:"brokers"`
	BrokerConfigs  map[string]string `json:"brokerConfigs"`
	GroupConfigs   []groupConfigJSON `json:"groupConfigs,omitempty"`
	Topics         []topicJSON       `json:"topics"`
	Controllers    []controllerJSON  `json:"controllers,omitempty"`
	ClientQuotas   []clientQuotaJSON `json:"clientQuotas,omitempty"`

	ACLs       []ACL       `json:"acls,omitempty"`
	ScramUsers []scramJSON `json:"scramUsers,omitempty"`
}

type groupConfigJSON struct {
	Group   string            `json:"group"`
	Configs map[string]string `json:"configs"`
}

type controllerJSON struct {
	ID   int32  `json:"id"`
	Addr string `json:"addr"`
}

type brokerJSON struct {
	ID     int32  `json:"id"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
	Rack   string `json:"rack,omitempty"`
	Fenced bool   `json:"fenced,omitempty"`
	// InControlledShutdown: omitted when false.
	InControlledShutdown bool `json:"inControlledShutdown,omitempty"`
	// Endpoints: every listener's advertised address; older snapshots have none.
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	HTTP      string     `json:"http,omitempty"`
}

type topicJSON struct {
	Name       string            `json:"name"`
	ID         uuidText          `json:"id"`
	Internal   bool              `json:"internal,omitempty"`
	Configs    map[string]string `json:"configs"`
	Partitions []partitionJSON   `json:"partitions"`
}

type partitionJSON struct {
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leaderEpoch"`
	PartitionEpoch int32   `json:"partitionEpoch"`
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
	Adding         []int32 `json:"addingReplicas,omitempty"`
	Removing       []int32 `json:"removingReplicas,omitempty"`
}

// EncodeImage serializes an image (the snapshot format's "image" member).
func EncodeImage(im *Image) []byte {
	j := imageJSON{
		Index:          im.Index,
		ClusterID:      im.ClusterID,
		NextProducerID: im.NextProducerID,
		Brokers:        make([]brokerJSON, 0, len(im.Brokers)),
		BrokerConfigs:  im.BrokerConfigs,
		Topics:         make([]topicJSON, 0, len(im.Topics)),
	}
	for _, id := range im.BrokerIDs() {
		b := im.Brokers[id]
		j.Brokers = append(j.Brokers, brokerJSON(b))
	}
	for _, name := range im.TopicNames() {
		t := im.Topics[name]
		tj := topicJSON{Name: t.Name, ID: uuidText(t.ID), Internal: t.Internal, Configs: t.Configs,
			Partitions: make([]partitionJSON, len(t.Partitions))}
		for i, p := range t.Partitions {
			tj.Partitions[i] = partitionJSON{p.Leader, p.LeaderEpoch, p.PartitionEpoch, p.Replicas, p.ISR, p.AddingReplicas, p.RemovingReplicas}
		}
		j.Topics = append(j.Topics, tj)
	}
	for _, g := range slices.Sorted(maps.Keys(im.GroupConfigs)) {
		j.GroupConfigs = append(j.GroupConfigs, groupConfigJSON{g, im.GroupConfigs[g]})
	}
	for _, id := range slices.Sorted(maps.Keys(im.Controllers)) {
		j.Controllers = append(j.Controllers, controllerJSON{id, im.Controllers[id]})
	}
	if len(im.ClientQuotas) > 0 {
		j.ClientQuotas = encodeClientQuotas(im)
	}

	j.ACLs = im.ACLs.All()
	j.ScramUsers = encodeScram(im)
	b, err := json.Marshal(j)
	if err != nil {
		panic("metadata: encoding image: " + err.Error()) // only plain types: cannot fail
	}
	return b
}

// DecodeImage parses EncodeImage's output and checks its invariants.
func DecodeImage(b []byte) (*Image, error) {
	var j imageJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("%w: image: %v", ErrCorrupt, err)
	}
	im := emptyImage()
	im.Index, im.ClusterID, im.NextProducerID = j.Index, j.ClusterID, j.NextProducerID
	for k, v := range j.BrokerConfigs {
		im.BrokerConfigs[k] = v
	}
	bad := func(format string, args ...any) (*Image, error) {
		return nil, fmt.Errorf("%w: image: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	for _, g := range j.GroupConfigs {
		if _, dup := im.GroupConfigs[g.Group]; dup || g.Group == "" || len(g.Configs) == 0 {
			return bad("group configs of %q twice, unnamed or empty", g.Group)
		}
		im.GroupConfigs[g.Group] = maps.Clone(g.Configs)
	}
	if err := decodeClientQuotas(im, j.ClientQuotas); err != nil {
		return nil, err
	}
	if err := decodeScram(j.ScramUsers, im); err != nil {
		return nil, err
	}
	for _, b := range j.Brokers {
		if _, dup := im.Brokers[b.ID]; dup {
			return bad("broker %d twice", b.ID)
		}
		im.Brokers[b.ID] = Broker(b)
	}
	for _, c := range j.Controllers {
		if _, dup := im.Controllers[c.ID]; dup || c.ID < 0 {
			return bad("controller %d twice or negative", c.ID)
		}
		im.Controllers[c.ID] = c.Addr
	}
	if len(j.ACLs) > 0 {
		acls, err := changeACLs(nil, j.ACLs, nil)
		if err != nil || acls.Len() != len(j.ACLs) {
			return bad("acls: invalid or duplicate binding (%v)", err)
		}
		im.ACLs = acls
	}
	for _, tj := range j.Topics {
		if im.Topics[tj.Name] != nil {
			return bad("topic %q twice", tj.Name)
		}
		id := [16]byte(tj.ID)
		if _, dup := im.TopicIDs[id]; dup || id == ([16]byte{}) {
			return bad("topic %q: zero or duplicate topic id", tj.Name)
		}
		t := &Topic{Name: tj.Name, ID: id, Internal: tj.Internal, Configs: map[string]string{},
			Partitions: make([]Partition, len(tj.Partitions))}
		for k, v := range tj.Configs {
			t.Configs[k] = v
		}
		for i, p := range tj.Partitions {
			t.Partitions[i] = Partition{Index: int32(i), Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				PartitionEpoch: p.PartitionEpoch, Replicas: p.Replicas, ISR: p.ISR,
				AddingReplicas: p.Adding, RemovingReplicas: p.Removing}
		}
		im.Topics[t.Name] = t
		im.TopicIDs[id] = t.Name
	}
	return im, nil
}

func snapName(index uint64) string { return fmt.Sprintf("%s%020d%s", snapPrefix, index, snapSuffix) }

// writeSnapshot writes the snapshot file for snap atomically.
func writeSnapshot(fs vfs.FS, dir string, snap *pb.Snapshot) error {
	md := snap.GetMetadata()
	f := snapshotFile{
		Version:   snapVersion,
		Index:     md.GetIndex(),
		Term:      md.GetTerm(),
		ConfState: toConfStateJSON(md.GetConfState()),
		CRC:       crc32.Checksum(snap.GetData(), crcTable),
		Image:     snap.GetData(),
	}
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("metadata: encoding snapshot: %w", err)
	}
	return replaceFile(fs, filepath.Join(dir, snapName(f.Index)), b)
}

// readSnapshot reads and checks one snapshot file.
func readSnapshot(fs vfs.FS, path string) (*pb.Snapshot, error) {
	b, err := vfs.ReadFile(fs, path)
	if err != nil {
		return nil, err
	}
	var f snapshotFile
	corrupt := func(reason string) error { return &CorruptionError{File: path, Reason: reason} }
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, corrupt(err.Error())
	}
	if f.Version != snapVersion {
		return nil, corrupt(fmt.Sprintf("version %d, want %d", f.Version, snapVersion))
	}
	if crc32.Checksum(f.Image, crcTable) != f.CRC {
		return nil, corrupt("image checksum mismatch")
	}
	if name := snapName(f.Index); filepath.Base(path) != name {
		return nil, corrupt("index does not match the file name")
	}
	return &pb.Snapshot{
		Data: f.Image,
		Metadata: &pb.SnapshotMetadata{
			Index:     new(f.Index),
			Term:      new(f.Term),
			ConfState: f.ConfState.proto(),
		},
	}, nil
}

// listSnapshots returns the snapshot files' indexes in dir, ascending.
func listSnapshots(fs vfs.FS, dir string) ([]uint64, error) {
	names, err := fs.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var idx []uint64
	for _, n := range names {
		if !strings.HasPrefix(n, snapPrefix) || !strings.HasSuffix(n, snapSuffix) {
			continue
		}
		i, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(n, snapPrefix), snapSuffix), 10, 64)
		if err != nil || snapName(i) != n {
			continue
		}
		idx = append(idx, i)
	}
	slices.SortFunc(idx, cmp.Compare)
	return idx, nil
}
