package app

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/metadata"
)

// newAuthorizer builds the authorizer authorizer.class.name names: Berth's
// ACL authorizer over the metadata image's ACLs, or nil (allow all) when
// the setting is empty.
func newAuthorizer(cfg *config.Config, ctrl *metadata.Controller, log *slog.Logger) (auth.Authorizer, error) {
	class := cfg.Get("authorizer.class.name")
	if class == "" {
		return nil, nil
	}
	if class == config.LegacyAclAuthorizer {
		log.Warn("authorizer.class.name names Kafka's ZooKeeper-era AclAuthorizer: Berth's authorizer applies, with the same semantics as StandardAuthorizer and the ACLs in the metadata log",
			"authorizer.class.name", class)
	}
	supers, err := auth.ParseSuperUsers(cfg.Get("super.users"))
	if err != nil {
		return nil, err
	}
	return &auth.ACLAuthorizer{Image: ctrl.Image, SuperUsers: supers, AllowIfNoACL: cfg.Bool("allow.everyone.if.no.acl.found")}, nil
}

var descDenials = prometheus.NewDesc("berth_authorization_denials_total",
	"Actions the authorizer refused, by resource type (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, ...).", []string{"resource_type"}, nil)

// denialCollector reports the handler's authorization denials.
type denialCollector struct{ n *Node }

func (c *denialCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descDenials }

func (c *denialCollector) Collect(ch chan<- prometheus.Metric) {
	for typ, v := range c.n.kh.Denials() {
		ch <- prometheus.MustNewConstMetric(descDenials, prometheus.CounterValue, float64(v), kmsg.ACLResourceType(typ).String())
	}
}

// MetadataImage is the node's current metadata image (tests compare
// images before and after requests that must change nothing).
func (n *Node) MetadataImage() *metadata.Image { return n.ctrl.Image() }
