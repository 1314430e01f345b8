// Package schemareg is Berth's schema registry: the state of a Confluent
// Schema Registry compatible store (subjects, versions, global schema ids,
// compatibility levels and modes), the compatibility rules, and the REST
// API that serializers and tools speak.
//
// The state is built only by applying records (Apply), in the format
// Confluent Schema Registry keeps in its `_schemas` topic, so the same
// records can live in a compacted topic and every node can rebuild the
// registry by reading it. Writes (Registry.Register and the other
// mutators) compute the records a change needs under the writer lock and
// hand them to a Log, which makes them durable and applies them.
//
// AVRO, JSON Schema and Protobuf schemas are parsed and checked here
// (compat.go, jsonschema.go, protobuf.go), and CheckWire is the publish
// gate's per-record check. The node (internal/app) keeps the records in
// the `_schemas` topic and serves Handler on its HTTP listener.
package schemareg

import (
	"encoding/json"
	"fmt"
)

// Record key types, as Confluent names them.
const (
	keySchema        = "SCHEMA"
	keyConfig        = "CONFIG"
	keyMode          = "MODE"
	keyDeleteSubject = "DELETE_SUBJECT"
)

// Record is one entry of the registry's log: a JSON key and a JSON value;
// a nil value is a tombstone (a permanent delete).
type Record struct {
	Key, Value []byte
}

// recordKey is a record's key. Subject is nil for the global config and
// mode.
type recordKey struct {
	KeyType string  `json:"keytype"`
	Subject *string `json:"subject"`
	Version int     `json:"version,omitempty"`
	Magic   int     `json:"magic"`
}

// Reference names another subject's version whose schema this one uses
// (an Avro named type, a JSON Schema $ref, a Protobuf import).
type Reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// schemaValue is a SCHEMA record's value: one version of one subject.
type schemaValue struct {
	Subject    string          `json:"subject"`
	Version    int             `json:"version"`
	ID         int             `json:"id"`
	SchemaType string          `json:"schemaType,omitempty"`
	References []Reference     `json:"references,omitempty"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
	RuleSet    json.RawMessage `json:"ruleSet,omitempty"`
	Schema     string          `json:"schema"`
	Deleted    bool            `json:"deleted"`
}

type configValue struct {
	CompatibilityLevel string `json:"compatibilityLevel"`
}

type modeValue struct {
	Mode string `json:"mode"`
}

type deleteSubjectValue struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

func subjectPtr(s string, global bool) *string {
	if global {
		return nil
	}
	return &s
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("schemareg: encoding a record: %v", err)) // only our own types
	}
	return b
}

func schemaRecord(v schemaValue) Record {
	return Record{
		Key:   mustJSON(recordKey{KeyType: keySchema, Subject: &v.Subject, Version: v.Version, Magic: 1}),
		Value: mustJSON(v),
	}
}

func schemaTombstone(subject string, version int) Record {
	return Record{Key: mustJSON(recordKey{KeyType: keySchema, Subject: &subject, Version: version, Magic: 1})}
}

// configRecord sets (level != "") or clears the compatibility level of a
// subject, or the global one when global.
func configRecord(subject string, global bool, level string) Record {
	r := Record{Key: mustJSON(recordKey{KeyType: keyConfig, Subject: subjectPtr(subject, global)})}
	if level != "" {
		r.Value = mustJSON(configValue{CompatibilityLevel: level})
	}
	return r
}

// modeRecord sets (mode != "") or clears the mode of a subject, or the
// global one when global.
func modeRecord(subject string, global bool, mode string) Record {
	r := Record{Key: mustJSON(recordKey{KeyType: keyMode, Subject: subjectPtr(subject, global)})}
	if mode != "" {
		r.Value = mustJSON(modeValue{Mode: mode})
	}
	return r
}

func deleteSubjectRecord(subject string, latest int) Record {
	return Record{
		Key:   mustJSON(recordKey{KeyType: keyDeleteSubject, Subject: &subject}),
		Value: mustJSON(deleteSubjectValue{Subject: subject, Version: latest}),
	}
}

// rawJSON is a JSON value kept as it came (metadata and rule sets, stored
// and returned, not enforced).
type rawJSON = json.RawMessage
