package config

// Client quota settings (docs/security.md#quotas): the measuring windows
// Kafka names quota.window.*, Berth's default violation action and the
// cap on the per-principal metrics.
func init() {
	brokerDefs = append(brokerDefs,
		Def{Name: "quota.window.num", Kind: KindInt, Default: "11", Doc: "Sample windows a client quota's rate is measured over.", Valid: atLeast(2)},
		Def{Name: "quota.window.size.seconds", Kind: KindInt, Default: "1", Doc: "Length of one client quota sample window.", Valid: atLeast(1)},
		Def{Name: "quota.violation.action", Kind: KindString, Default: "throttle", Doc: "What a produce over its quota gets when its quota entity sets no violation_action: throttle (Kafka's behaviour: accepted, throttle_time_ms, connection muted) or reject (THROTTLING_QUOTA_EXCEEDED, nothing appended).", Valid: oneOf("throttle", "reject"), Dynamic: true},
		Def{Name: "max.connection.creation.rate", Kind: KindInt, Default: "2147483647", Doc: "New connections per second the broker accepts on its Kafka listener; above it, accepting waits.", Valid: atLeast(1)},
		Def{Name: "quota.metrics.max.principals", Kind: KindInt, Default: "1000", Doc: "Distinct principals the per-principal metrics (berth_client_*) label; later ones are counted under principal=\"other\".", Valid: atLeast(1)},
	)
}
