package metadata

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/berthmq/berth/internal/vfs"
)

// DirName is the metadata directory's name under log.dirs, as in KRaft.
const DirName = "__cluster_metadata-0"

// Config configures a Controller. Call Defaults, then Validate.
type Config struct {
	// Dir holds the WAL and snapshot files; created if missing. The broker
	// uses filepath.Join(log.dirs, DirName).
	Dir string
	// NodeID is the Raft id of this node. Raft reserves 0, and Kafka's
	// node.id may be 0, so use RaftID(node.id) = node.id + 1.
	NodeID uint64
	// ClusterID is the Kafka cluster id. "" means: use the one in the
	// metadata log, or generate one (NewClusterID) on first start and store
	// it through a SetClusterID record. A non-empty value that differs from
	// the logged one makes Open fail with ErrClusterIDMismatch.
	ClusterID string
	// SnapshotEvery is the number of applied entries between snapshots
	// (default 1000). A snapshot is also taken on Close. After a snapshot
	// the Raft log is compacted and the WAL rewritten.
	SnapshotEvery uint64
	// TickInterval is the Raft logical clock period (default 100ms).
	// Elections take ElectionTicks ticks, heartbeats one tick.
	TickInterval time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Transport carries Raft messages to other members. nil =
	// LoopbackTransport (one voter; nothing is ever sent). A cluster uses
	// a TCPTransport; see quorum.go.
	Transport Transport
	// Voters is the voter set a new cluster starts with (Kafka's
	// controller.quorum.voters): Raft ids and controller addresses. It is
	// used once, when the directory is empty: every voter bootstraps the
	// same configuration from it. Later starts follow the configuration in
	// the log and only warn if Voters disagrees. A node whose id is not in
	// Voters starts empty and asks the leader to add it as an observer
	// (Raft learner). Empty Voters: a one-voter cluster of NodeID with no
	// network, as before clustering existed.
	Voters []Voter
	// Addr is this node's controller address as peers reach it,
	// host:port. With Voters set it defaults to NodeID's entry there; an
	// observer must set it.
	Addr string
	// FS is the filesystem of every file in Dir: WAL appends, reads and
	// truncation, snapshots, and the files replaced whole (snapshots, the
	// WAL's header and its rewrites after a snapshot) through
	// vfs.WriteFileAtomic; nil is the OS. Tests inject a vfs.FaultFS.
	FS vfs.FS
}

// Voter is one entry of Config.Voters.
type Voter struct {
	ID   uint64 // Raft id: RaftID(node.id)
	Addr string // host:port
}

// Raft timing in ticks: election timeout 10 ticks, heartbeat 1 tick, as in
// etcd's defaults.
const (
	ElectionTicks  = 10
	HeartbeatTicks = 1
)

// RaftID maps a Kafka node.id (which may be 0) to a Raft id (never 0).
func RaftID(nodeID int32) uint64 { return uint64(nodeID) + 1 }

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = 1000
	}
	if c.TickInterval == 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Transport == nil {
		c.Transport = LoopbackTransport{}
	}
	if c.FS == nil {
		c.FS = vfs.OS()
	}
	if c.Addr == "" {
		for _, v := range c.Voters {
			if v.ID == c.NodeID {
				c.Addr = v.Addr
			}
		}
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("metadata: Config.Dir is empty")
	case c.NodeID == 0:
		return errors.New("metadata: Config.NodeID must be > 0 (use RaftID(node.id))")
	case c.NodeID > 1<<31:
		return fmt.Errorf("metadata: Config.NodeID %d is out of range (RaftID of an int32 node.id)", c.NodeID)
	case c.SnapshotEvery == 0:
		return errors.New("metadata: Config.SnapshotEvery must be > 0")
	case c.TickInterval <= 0:
		return errors.New("metadata: Config.TickInterval must be > 0")
	}
	if c.ClusterID != "" {
		if err := validClusterID(c.ClusterID); err != nil {
			return err
		}
	}
	seen := map[uint64]bool{}
	for _, v := range c.Voters {
		switch {
		case v.ID == 0 || v.ID > 1<<31:
			return fmt.Errorf("metadata: voter id %d is out of range", v.ID)
		case seen[v.ID]:
			return fmt.Errorf("metadata: voter %d is listed twice", v.ID)
		case v.Addr == "":
			return fmt.Errorf("metadata: voter %d has no address", v.ID)
		}
		seen[v.ID] = true
	}
	if len(c.Voters) > 0 {
		if _, loop := c.Transport.(LoopbackTransport); loop && !(len(c.Voters) == 1 && seen[c.NodeID]) {
			return errors.New("metadata: Config.Voters names other nodes but Transport is LoopbackTransport; use a TCPTransport")
		}
		if c.Addr == "" {
			return fmt.Errorf("metadata: node %d is not in Config.Voters, so it joins as an observer and needs Config.Addr", c.NodeID)
		}
	}
	return nil
}
