package sharepart

import (
	"sync"

	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/share"
)

// Settings resolves share groups' settings (Config.Settings): a group's
// configs (the GROUP config resource, in the metadata image) over the
// broker settings, dynamic then static. It runs on every share-partition
// load and every ShareFetch, so it only reads the in-memory image.
// Settings that fail validation (only a group config set under other
// broker bounds can) fall back to the broker defaults, keeping the
// group's dead-letter topic, share.auto.offset.reset and
// share.isolation.level (and leaving the membership's timeouts to the
// coordinator's broker settings). Resolved settings are cached per metadata image
// (a new image, after any metadata change, starts a new cache).
type Settings struct {
	broker   *config.Config
	defaults share.PartitionConfig
	image    func() *metadata.Image

	mu     sync.Mutex // guards cached, byName; a leaf
	cached *metadata.Image
	byName map[string]GroupSettings
}

// NewSettings returns the settings of share groups over broker, with pc
// the broker's default share-partition config, read from image.
func NewSettings(broker *config.Config, pc share.PartitionConfig, image func() *metadata.Image) *Settings {
	return &Settings{broker: broker, defaults: pc, image: image}
}

// Group returns group's settings.
func (st *Settings) Group(group string) GroupSettings {
	im := st.image()
	st.mu.Lock()
	if st.cached != im {
		st.cached, st.byName = im, map[string]GroupSettings{}
	}
	s, ok := st.byName[group]
	st.mu.Unlock()
	if ok {
		return s
	}
	g, err := ResolveGroupConfig(st.broker, im.GroupConfig(group), im.BrokerConfigs)
	if err != nil {
		g.Partition = st.defaults
		g.Partition.DeadLetter = g.DLQTopic != ""
		g.SessionTimeout, g.HeartbeatInterval = 0, 0
	}
	s = GroupSettings{Partition: g.Partition, DLQTopic: g.DLQTopic, AutoOffsetReset: g.AutoOffsetReset,
		ReadCommitted:  g.IsolationLevel == config.ReadCommitted,
		SessionTimeout: g.SessionTimeout, HeartbeatInterval: g.HeartbeatInterval}
	st.mu.Lock()
	if st.cached == im {
		st.byName[group] = s
	}
	st.mu.Unlock()
	return s
}
