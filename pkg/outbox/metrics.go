package outbox

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector returns a Prometheus collector of the relay's metrics, each
// labelled with the outbox table: berth_outbox_unsent_rows and
// berth_outbox_oldest_unsent_age_seconds (queried from the database at
// each scrape, within 2 s), berth_outbox_published_total and
// berth_outbox_publish_errors_total (this relay's).
func (r *Relay) Collector() prometheus.Collector { return relayCollector{r} }

var (
	descUnsent = prometheus.NewDesc("berth_outbox_unsent_rows",
		"Outbox rows not yet published.", []string{"table"}, nil)
	descOldest = prometheus.NewDesc("berth_outbox_oldest_unsent_age_seconds",
		"Age of the oldest outbox row not yet published (0 when none): how far the relay is behind.", []string{"table"}, nil)
	descPublished = prometheus.NewDesc("berth_outbox_published_total",
		"Outbox rows this relay published and marked sent.", []string{"table"}, nil)
	descErrors = prometheus.NewDesc("berth_outbox_publish_errors_total",
		"Records this relay failed to publish (they stay unsent and are retried).", []string{"table"}, nil)
)

type relayCollector struct{ r *Relay }

func (c relayCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descUnsent
	ch <- descOldest
	ch <- descPublished
	ch <- descErrors
}

func (c relayCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.r.Stats(ctx)
	t := c.r.t
	if err == nil {
		ch <- prometheus.MustNewConstMetric(descUnsent, prometheus.GaugeValue, float64(st.Unsent), t)
		ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, st.OldestUnsent.Seconds(), t)
	} else {
		ch <- prometheus.NewInvalidMetric(descUnsent, err)
	}
	ch <- prometheus.MustNewConstMetric(descPublished, prometheus.CounterValue, float64(st.Published), t)
	ch <- prometheus.MustNewConstMetric(descErrors, prometheus.CounterValue, float64(st.PublishErrors), t)
}
