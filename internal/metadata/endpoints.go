package metadata

import "fmt"

// Endpoint is one of a broker's advertised listeners: the listener's
// name (as in listeners=), the address clients that arrive on that
// listener are given, and its security protocol.
type Endpoint struct {
	Name     string `json:"name"`
	Host     string `json:"host"`
	Port     int32  `json:"port"`
	Protocol string `json:"protocol,omitempty"`
}

// Endpoint finds the broker's endpoint of listener name. A broker
// registered before endpoints were recorded has one, its Host and Port,
// which every listener name finds.
func (b Broker) Endpoint(name string) (Endpoint, bool) {
	if len(b.Endpoints) == 0 {
		return Endpoint{Name: name, Host: b.Host, Port: b.Port}, true
	}
	for _, e := range b.Endpoints {
		if e.Name == name {
			return e, true
		}
	}
	return Endpoint{}, false
}

// checkEndpoints validates a registration's endpoints: names unique and
// non-empty, hosts set, ports in range.
func checkEndpoints(id int32, eps []Endpoint) error {
	seen := map[string]bool{}
	for _, e := range eps {
		switch {
		case e.Name == "":
			return fmt.Errorf("%w: broker %d has an endpoint with no listener name", ErrInvalidRecord, id)
		case seen[e.Name]:
			return fmt.Errorf("%w: broker %d has two endpoints named %s", ErrInvalidRecord, id, e.Name)
		case e.Host == "":
			return fmt.Errorf("%w: broker %d endpoint %s has no host", ErrInvalidRecord, id, e.Name)
		case e.Port < 1 || e.Port > 65535:
			return fmt.Errorf("%w: broker %d endpoint %s port %d out of range", ErrInvalidRecord, id, e.Name, e.Port)
		}
		seen[e.Name] = true
	}
	return nil
}
