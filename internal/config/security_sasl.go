package config

// SASL settings (Kafka's names). The JAAS config and the mechanism list
// are also read in their per-listener forms
// (listener.name.<l>.sasl.enabled.mechanisms,
// listener.name.<l>.plain.sasl.jaas.config) through ListenerGet.
func init() {
	brokerDefs = append(brokerDefs,
		Def{Name: "sasl.enabled.mechanisms", Kind: KindList, Default: "GSSAPI", Doc: "SASL mechanisms a SASL_PLAINTEXT or SASL_SSL listener enables: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (per listener: listener.name.<l>.sasl.enabled.mechanisms). GSSAPI, Kafka's default, is not supported: a SASL listener must set this."},
		Def{Name: "sasl.jaas.config", Kind: KindString, Default: "", Doc: "JAAS login module config, only in its per-listener form as Kafka brokers read it: listener.name.<l>.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_NAME=\"PASSWORD\" ...; names PLAIN's static users (a bootstrap admin). Users not listed are checked against the SCRAM credentials."},
		Def{Name: "sasl.mechanism.inter.broker.protocol", Kind: KindString, Default: "GSSAPI", Doc: "The mechanism this broker authenticates with when it connects to a SASL listener (its peers' and its own: replication, coordinator requests, the dead-letter writer), with the username and password of that mechanism's listener JAAS config. Left at Kafka's default GSSAPI (not supported), PLAIN is used."},
		Def{Name: "connection.failed.authentication.delay.ms", Kind: KindLong, Default: "100", Doc: "Delay of the answer to a failed authentication; it doubles with each further failure from the same address (up to 5 s) and decays after 30 s without one. 0 disables it.", Valid: atLeast(0)},
		Def{Name: "sasl.server.max.receive.size", Kind: KindInt, Default: "524288", Doc: "The largest request a connection on a SASL listener may send before it has authenticated (bytes); a larger frame closes the connection, so an unauthenticated client cannot make the broker read socket.request.max.bytes.", Valid: atLeast(1024)},
		Def{Name: "connections.max.reauth.ms", Kind: KindLong, Default: "0", Doc: "KIP-368: the longest SASL session before the client must re-authenticate on its connection (a connection that does not is closed at its next request); an OAUTHBEARER token's exp shortens it. 0: sessions do not end. Also per listener and mechanism: listener.name.<l>.<mech>.connections.max.reauth.ms.", Valid: atLeast(0)},
		Def{Name: "sasl.oauthbearer.jwks.endpoint.url", Kind: KindString, Default: "", Doc: "OAUTHBEARER: the JWKS (file:// or https:// URL) whose RSA or EC keys must have signed a token. Empty: unsecured tokens (alg none) are accepted, as Kafka's default development validator does (a warning at start)."},
		Def{Name: "sasl.oauthbearer.jwks.endpoint.refresh.ms", Kind: KindLong, Default: "3600000", Doc: "How often the JWKS is re-read (also at once when a token names an unknown key id).", Valid: atLeast(1000)},
		Def{Name: "sasl.oauthbearer.expected.audience", Kind: KindList, Default: "", Doc: "OAUTHBEARER: a token's aud must name one of these; empty: not checked."},
		Def{Name: "sasl.oauthbearer.expected.issuer", Kind: KindString, Default: "", Doc: "OAUTHBEARER: a token's iss must be this; empty: not checked."},
		Def{Name: "sasl.oauthbearer.sub.claim.name", Kind: KindString, Default: "sub", Doc: "OAUTHBEARER: the claim that names the principal (User:<value>)."},
		Def{Name: "sasl.oauthbearer.clock.skew.seconds", Kind: KindInt, Default: "30", Doc: "OAUTHBEARER: clock skew allowed when checking exp, nbf and iat.", Valid: atLeast(0)},
	)
}
