package retry

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestConfigChecked(t *testing.T) {
	h := func(context.Context, *kgo.Record) error { return nil }
	if _, err := New(Config{Topic: "orders"}, h); err == nil {
		t.Error("no group accepted")
	}
	_, err := New(Config{Topic: "orders", Group: "g", Delays: []time.Duration{time.Second, time.Second}}, h)
	if err == nil || !strings.Contains(err.Error(), "orders.retry.1s") {
		t.Errorf("two retry topics of one name: %v", err)
	}
	if got := RetryTopicName("orders", 2*time.Second); got != "orders.retry.2s" {
		t.Errorf("RetryTopicName = %q", got)
	}
	c, err := New(Config{Topic: "orders", Group: "g", Client: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}}, h)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var names []string
	for _, tr := range c.tiers {
		names = append(names, tr.topic)
	}
	if got := strings.Join(names, " "); got != "orders orders.retry.2s orders.retry.4s orders.retry.8s orders.retry.16s" || c.cfg.DLQTopic != "orders.dlq" {
		t.Errorf("topics %s, DLQ %s", got, c.cfg.DLQTopic)
	}
}
