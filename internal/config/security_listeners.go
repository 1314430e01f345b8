package config

import (
	"errors"
	"fmt"
	"strings"
)

// Named listeners, as Kafka configures them: listeners= holds any number
// of NAME://host:port entries, listener.security.protocol.map gives each
// name its security protocol, advertised.listeners the address clients
// of each listener are given, and inter.broker.listener.name (or
// security.inter.broker.protocol) the one other brokers use.

func init() {
	brokerDefs = append(brokerDefs,
		Def{Name: "listener.security.protocol.map", Kind: KindList, Default: DefaultProtocolMap, Valid: validProtocolMap,
			Doc: "Security protocol of each listener name, NAME:PROTOCOL,... (Kafka's)."},
		Def{Name: "inter.broker.listener.name", Kind: KindString, Default: "",
			Doc: "The listener other brokers connect to; empty: security.inter.broker.protocol's listener, or the first."},
		Def{Name: "security.inter.broker.protocol", Kind: KindString, Default: "PLAINTEXT", Valid: oneOf(Protocols...),
			Doc: "The inter-broker listener's name when inter.broker.listener.name is empty (Kafka's)."},
	)
}

// Protocols are Kafka's security protocols.
var Protocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

// DefaultProtocolMap is Kafka's default listener.security.protocol.map.
const DefaultProtocolMap = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"

// IsTLS reports whether a security protocol runs over TLS.
func IsTLS(protocol string) bool { return protocol == "SSL" || protocol == "SASL_SSL" }

func isProtocol(s string) bool {
	for _, p := range Protocols {
		if s == p {
			return true
		}
	}
	return false
}

func parseProtocolMap(s string) (map[string]string, error) {
	m := map[string]string{}
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		name, proto, ok := strings.Cut(e, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" {
			return nil, fmt.Errorf("entry %q is not NAME:PROTOCOL", e)
		}
		if !isProtocol(proto) {
			return nil, fmt.Errorf("entry %q: protocol must be one of %s", e, strings.Join(Protocols, ", "))
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("listener name %s is mapped twice", name)
		}
		m[name] = proto
	}
	return m, nil
}

func validProtocolMap(s string) error {
	_, err := parseProtocolMap(s)
	return err
}

// ProtocolOf is the security protocol of listener name: its entry in
// listener.security.protocol.map, else the name itself when it is a
// protocol's name. The controller listener, when unmapped, is PLAINTEXT
// (defaulted true: say so at start, as Kafka warns).
func (c *Config) ProtocolOf(name string) (proto string, defaulted bool, err error) {
	m, err := parseProtocolMap(c.Get("listener.security.protocol.map"))
	if err != nil {
		return "", false, fmt.Errorf("listener.security.protocol.map: %w", err)
	}
	if p, ok := m[name]; ok {
		return p, false, nil
	}
	if isProtocol(name) {
		return name, false, nil
	}
	if c.isControllerListener(name) {
		return "PLAINTEXT", true, nil
	}
	return "", false, fmt.Errorf("listener %s has no security protocol: add %s:PLAINTEXT (or SSL, SASL_PLAINTEXT, SASL_SSL) to listener.security.protocol.map", name, name)
}

// KafkaListeners are the listeners that serve Kafka clients (all of
// listeners= but the controller listener), in order, with their
// security protocols.
func (c *Config) KafkaListeners() ([]Listener, error) {
	var out []Listener
	seen := map[string]bool{}
	for _, s := range strings.Split(c.Get("listeners"), ",") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		l, err := ParseListener(strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		if seen[l.Name] {
			return nil, fmt.Errorf("listeners: the name %s is used twice; give each listener its own name (and map it in listener.security.protocol.map)", l.Name)
		}
		seen[l.Name] = true
		if c.isControllerListener(l.Name) {
			continue
		}
		if l.Protocol, _, err = c.ProtocolOf(l.Name); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, errors.New("listeners: no Kafka listener (only the controller listener); add one, e.g. PLAINTEXT://127.0.0.1:9092")
	}
	return out, nil
}

// InterBrokerListener is the listener other brokers connect to:
// inter.broker.listener.name, else the listener named after
// security.inter.broker.protocol when that is set, else the first.
func (c *Config) InterBrokerListener() (Listener, error) {
	ls, err := c.KafkaListeners()
	if err != nil {
		return Listener{}, err
	}
	name := strings.ToUpper(c.Get("inter.broker.listener.name"))
	proto := c.SourceOf("security.inter.broker.protocol") != SourceDefault
	switch {
	case name != "" && proto:
		return Listener{}, errors.New("set only one of inter.broker.listener.name and security.inter.broker.protocol")
	case name == "" && proto:
		name = c.Get("security.inter.broker.protocol")
	case name == "":
		return ls[0], nil
	}
	for _, l := range ls {
		if l.Name == name {
			return l, nil
		}
	}
	return Listener{}, fmt.Errorf("the inter-broker listener %s is not one of listeners (%s); add it or set inter.broker.listener.name", name, c.Get("listeners"))
}

// Advertised is the address clients of Kafka listener l are given, from
// advertised.listeners by name (ok false: not advertised, use the bound
// address). With one Kafka listener a single advertised entry applies
// whatever its name, as before named listeners.
func (c *Config) Advertised(l Listener) (adv Listener, ok bool, err error) {
	s := strings.TrimSpace(c.Get("advertised.listeners"))
	if s == "" {
		return Listener{}, false, nil
	}
	var advs []Listener
	for _, e := range strings.Split(s, ",") {
		if strings.TrimSpace(e) == "" {
			continue
		}
		a, err := ParseListener(strings.TrimSpace(e))
		if err != nil {
			return Listener{}, false, fmt.Errorf("advertised.listeners: %w", err)
		}
		advs = append(advs, a)
	}
	ls, err := c.KafkaListeners()
	if err != nil {
		return Listener{}, false, err
	}
	if len(ls) == 1 && len(advs) == 1 {
		return advs[0], true, nil
	}
	names := map[string]bool{}
	for _, k := range ls {
		names[k.Name] = true
	}
	for _, a := range advs {
		if !names[a.Name] {
			return Listener{}, false, fmt.Errorf("advertised.listeners names %s, which is not a Kafka listener of listeners (%s)", a.Name, c.Get("listeners"))
		}
	}
	for _, a := range advs {
		if a.Name == l.Name {
			return a, true, nil
		}
	}
	return Listener{}, false, nil
}

// validateListeners checks the named listeners as a whole.
func (c *Config) validateListeners() error {
	ls, err := c.KafkaListeners()
	if err != nil {
		return err
	}
	if _, err := c.InterBrokerListener(); err != nil {
		return err
	}
	if err := c.validateHTTP(); err != nil {
		return err
	}
	if _, ctl, ok, _ := c.Listeners(); ok {
		p, _, err := c.ProtocolOf(ctl.Name)
		if err != nil {
			return err
		}
		if IsTLS(p) {
			if err := c.validateTLS(ctl.Name); err != nil {
				return err
			}
		}
	}
	for _, l := range ls {
		if _, _, err := c.Advertised(l); err != nil {
			return err
		}
		if IsTLS(l.Protocol) {
			if err := c.validateTLS(l.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// canonicalListenerKey writes a per-listener setting's listener name in
// lower case (listener.name.SSL.x and listener.name.ssl.x are one
// setting, as ListenerGet reads it); other names are returned as given.
func canonicalListenerKey(name string) string {
	rest, ok := strings.CutPrefix(name, "listener.name.")
	if !ok {
		return name
	}
	l, key, ok := strings.Cut(rest, ".")
	if !ok {
		return name
	}
	return "listener.name." + strings.ToLower(l) + "." + key
}
