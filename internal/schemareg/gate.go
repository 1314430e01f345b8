package schemareg

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/hamba/avro/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Headers that carry a record's schema id instead of a prefix of the
// payload (Confluent's header form). Their value is the wire format's
// prefix: magic byte 0 and the 4-byte id.
const (
	ValueSchemaIDHeader = "__value_schema_id"
	KeySchemaIDHeader   = "__key_schema_id"
)

// Subject name strategies (confluent.*.subject.name.strategy).
const (
	TopicNameStrategy       = "TopicNameStrategy"
	RecordNameStrategy      = "RecordNameStrategy"
	TopicRecordNameStrategy = "TopicRecordNameStrategy"
)

// GateCheck is what the publish gate checks one key or value against.
type GateCheck struct {
	Topic    string
	Key      bool   // the record's key, not its value
	Strategy string // a subject name strategy (short name)
	// Payload also validates the payload against a JSON Schema.
	Payload bool
}

// gateEntry is what the gate keeps of a schema id: its record name (for
// the record name strategies) and, for JSON Schema, the compiled schema.
type gateEntry struct {
	name     string
	nameErr  string
	compiled *jsonschema.Schema
}

// gateCache holds the gate's entries by id. An id always names the same
// content (ids are never reused), so an entry stays true until the state
// is rebuilt (Reset).
type gateCache struct {
	mu      sync.RWMutex
	entries map[int]*gateEntry
}

// WireID returns the schema id a key or value carries: in the schema id
// header's value when there is one (header non-nil), else in the
// payload's wire-format prefix; ok false when the format is not there.
func WireID(data, header []byte) (id int, ok bool) {
	if header != nil {
		if len(header) != 5 || header[0] != 0 {
			return 0, false
		}
		return int(binary.BigEndian.Uint32(header[1:])), true
	}
	if len(data) < 5 || data[0] != 0 {
		return 0, false
	}
	return int(binary.BigEndian.Uint32(data[1:5])), true
}

// CheckWire checks one key or value (data, with the schema id header's
// value in header, nil when absent) as the publish gate does: it carries
// a registered schema id, registered under the subject c's strategy names
// (not soft-deleted), and, when c.Payload, a JSON payload its JSON Schema
// accepts. It returns why the record is refused, "" when it is not. Every
// lookup is in memory.
func (r *Registry) CheckWire(c GateCheck, data, header []byte) string {
	what := "value"
	if c.Key {
		what = "key"
	}
	var id int
	payload := data
	switch {
	case header != nil:
		if len(header) != 5 || header[0] != 0 {
			return fmt.Sprintf("%s schema id header is not magic byte 0 and a 4-byte schema id (%d bytes)", what, len(header))
		}
		id = int(binary.BigEndian.Uint32(header[1:]))
	case len(data) < 5 || data[0] != 0:
		return fmt.Sprintf("%s does not start with the schema registry wire format (magic byte 0 and a 4-byte schema id); serialize it with a schema registry serializer", what)
	default:
		id = int(binary.BigEndian.Uint32(data[1:5]))
		payload = data[5:]
	}
	e, ok := r.gateEntry(id)
	if !ok {
		return fmt.Sprintf("%s schema id %d is not registered", what, id)
	}
	subject := c.Topic + "-" + what
	if c.Strategy != TopicNameStrategy && c.Strategy != "" {
		if e.nameErr != "" {
			return fmt.Sprintf("%s schema id %d: %s", what, id, e.nameErr)
		}
		subject = e.name
		if c.Strategy == TopicRecordNameStrategy {
			subject = c.Topic + "-" + e.name
		}
	}
	if !r.hasID(subject, id) {
		return fmt.Sprintf("%s schema id %d is not registered under subject %s (%s)", what, id, subject, c.Strategy)
	}
	if c.Payload && e.compiled != nil {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
		if err != nil {
			return fmt.Sprintf("%s is not JSON: %v", what, err)
		}
		if err := e.compiled.Validate(v); err != nil {
			return fmt.Sprintf("%s does not match schema id %d: %v", what, id, err)
		}
	}
	return ""
}

// hasID reports whether subject has a live version with schema id.
func (r *Registry) hasID(subject string, id int) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, sv := range r.st.subjects[subject] {
		if sv.ID == id && !sv.Deleted {
			return true
		}
	}
	return false
}

// gateEntry returns the gate's entry of id, made on first use.
func (r *Registry) gateEntry(id int) (*gateEntry, bool) {
	r.gate.mu.RLock()
	e := r.gate.entries[id]
	r.gate.mu.RUnlock()
	if e != nil {
		return e, true
	}
	r.mu.RLock()
	c, ok := r.st.ids[id]
	var p *parsed
	var perr error
	if ok {
		p, perr = r.st.parse(c)
	}
	r.mu.RUnlock()
	if !ok {
		return nil, false
	}
	e = &gateEntry{}
	switch {
	case perr != nil:
		e.nameErr = "its schema does not parse: " + perr.Error()
	case p.avro != nil:
		if n, ok := p.avro.(avro.NamedSchema); ok {
			e.name = n.FullName()
		} else {
			e.nameErr = "a record name strategy needs a named Avro schema (record, enum or fixed)"
		}
	case p.proto != nil:
		if e.name = protoFirstMessage(p.proto); e.name == "" {
			e.nameErr = "a record name strategy needs a Protobuf schema with a message"
		}
	case p.json != nil:
		e.compiled = p.json.compiled
		if m, ok := p.json.root.(map[string]any); ok {
			if t, ok := m["title"].(string); ok && t != "" {
				e.name = t
			}
		}
		if e.name == "" {
			e.nameErr = "a record name strategy needs a JSON Schema with a title"
		}
	}
	r.gate.mu.Lock()
	if r.gate.entries == nil {
		r.gate.entries = map[int]*gateEntry{}
	}
	r.gate.entries[id] = e
	r.gate.mu.Unlock()
	return e, true
}
