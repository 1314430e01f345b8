package app

import (
	"errors"
	"fmt"

	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/group"
	"github.com/berthmq/berth/internal/metadata"
)

// topicResolver answers the coordinator's topic questions from the
// current metadata image.
type topicResolver struct{ ctrl *metadata.Controller }

func (r topicResolver) PartitionExists(topic string, p int32) bool {
	return r.ctrl.Image().Topic(topic).Partition(p) != nil
}

func (r topicResolver) TopicName(id [16]byte) (string, bool) {
	if t := r.ctrl.Image().TopicByID(id); t != nil {
		return t.Name, true
	}
	return "", false
}

func (r topicResolver) TopicID(name string) ([16]byte, bool) {
	if t := r.ctrl.Image().Topic(name); t != nil {
		return t.ID, true
	}
	return [16]byte{}, false
}

// Topics lists every topic for consumer group (KIP-848) assignment.
func (r topicResolver) Topics() []group.TopicInfo {
	im := r.ctrl.Image()
	out := make([]group.TopicInfo, 0, len(im.Topics))
	for _, t := range im.Topics {
		out = append(out, group.TopicInfo{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions))})
	}
	return out
}

// shareGroupBounds is Kafka's check of the share group broker settings:
// the session timeout and heartbeat interval within their min/max bounds,
// and the interval below the timeout.
func shareGroupBounds(cfg *config.Config) error {
	within := func(name, minName, maxName string) error {
		v, lo, hi := cfg.Int(name), cfg.Int(minName), cfg.Int(maxName)
		if v < lo || v > hi {
			return fmt.Errorf("%s (%d) must be between %s (%d) and %s (%d)", name, v, minName, lo, maxName, hi)
		}
		return nil
	}
	errs := []error{
		within("group.share.session.timeout.ms", "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
		within("group.share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
	}
	if hb, st := cfg.Int("group.share.heartbeat.interval.ms"), cfg.Int("group.share.session.timeout.ms"); hb >= st {
		errs = append(errs, fmt.Errorf("group.share.heartbeat.interval.ms (%d) must be less than group.share.session.timeout.ms (%d)", hb, st))
	}
	return errors.Join(errs...)
}
