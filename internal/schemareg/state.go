package schemareg

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// Compatibility levels and modes, as Confluent names them.
const (
	LevelNone               = "NONE"
	LevelBackward           = "BACKWARD"
	LevelBackwardTransitive = "BACKWARD_TRANSITIVE"
	LevelForward            = "FORWARD"
	LevelForwardTransitive  = "FORWARD_TRANSITIVE"
	LevelFull               = "FULL"
	LevelFullTransitive     = "FULL_TRANSITIVE"

	ModeReadWrite = "READWRITE"
	ModeReadOnly  = "READONLY"
	ModeImport    = "IMPORT"
)

var levels = []string{LevelNone, LevelBackward, LevelBackwardTransitive, LevelForward, LevelForwardTransitive, LevelFull, LevelFullTransitive}

var modes = []string{ModeReadWrite, ModeReadOnly, ModeImport}

// Schema types. An empty type in the API is AVRO.
const (
	TypeAvro     = "AVRO"
	TypeJSON     = "JSON"
	TypeProtobuf = "PROTOBUF"
)

// content is what a schema id stands for: the schema and what it refers
// to. The same content registered under several subjects has one id.
type content struct {
	Type       string
	Schema     string
	References []Reference
}

// contentKey identifies equal contents.
func (c content) key() string {
	if len(c.References) == 0 {
		c.References = nil // "references": [] is none, as omitted
	}
	return string(mustJSON(c))
}

// state is the registry as the applied records make it. Not safe for
// concurrent use: Registry guards it.
type state struct {
	subjects map[string]map[int]*schemaValue // subject → version → record
	ids      map[int]content
	byKey    map[string]int // content key → id
	maxID    int
	configs  map[string]string // subject → level; "" the global one
	modes    map[string]string // subject → mode; "" the global one
	// defLevel is the level while no global one is set.
	defLevel string
	// applied counts records applied, for tests and metrics.
	applied int64
}

func newState() *state {
	return &state{
		defLevel: LevelBackward,
		subjects: map[string]map[int]*schemaValue{},
		ids:      map[int]content{},
		byKey:    map[string]int{},
		configs:  map[string]string{},
		modes:    map[string]string{},
	}
}

// apply applies one record. A record it cannot parse is an error and
// changes nothing (the caller logs and skips it: a newer writer may write
// key types this one does not know).
func (s *state) apply(r Record) error {
	var k recordKey
	if err := json.Unmarshal(r.Key, &k); err != nil {
		return fmt.Errorf("schema registry record key %q: %w", r.Key, err)
	}
	subject := ""
	if k.Subject != nil {
		subject = *k.Subject
	}
	s.applied++
	switch k.KeyType {
	case keySchema:
		if k.Subject == nil {
			return fmt.Errorf("schema registry record key %q: a schema record without a subject", r.Key)
		}
		if r.Value == nil {
			s.removeVersion(subject, k.Version)
			return nil
		}
		var v schemaValue
		if err := json.Unmarshal(r.Value, &v); err != nil {
			return fmt.Errorf("schema registry record value for %s version %d: %w", subject, k.Version, err)
		}
		if v.Subject != subject || v.Version != k.Version || v.ID <= 0 || v.Version <= 0 {
			return fmt.Errorf("schema registry record for %s version %d: value names %s version %d id %d", subject, k.Version, v.Subject, v.Version, v.ID)
		}
		if v.SchemaType == TypeAvro {
			v.SchemaType = ""
		}
		c := content{Type: typeOrAvro(v.SchemaType), Schema: v.Schema, References: v.References}
		if _, ok := s.ids[v.ID]; !ok {
			s.ids[v.ID] = c
			s.byKey[c.key()] = v.ID
		}
		s.maxID = max(s.maxID, v.ID)
		vs := s.subjects[subject]
		if vs == nil {
			vs = map[int]*schemaValue{}
			s.subjects[subject] = vs
		}
		vs[v.Version] = &v
	case keyConfig:
		if r.Value == nil {
			delete(s.configs, subject)
			return nil
		}
		var v configValue
		if err := json.Unmarshal(r.Value, &v); err != nil || !slices.Contains(levels, v.CompatibilityLevel) {
			return fmt.Errorf("schema registry config record for %q: %q", subject, r.Value)
		}
		s.configs[subject] = v.CompatibilityLevel
	case keyMode:
		if r.Value == nil {
			delete(s.modes, subject)
			return nil
		}
		var v modeValue
		if err := json.Unmarshal(r.Value, &v); err != nil || !slices.Contains(modes, v.Mode) {
			return fmt.Errorf("schema registry mode record for %q: %q", subject, r.Value)
		}
		s.modes[subject] = v.Mode
	case keyDeleteSubject:
		// A soft delete of the whole subject: every version up to the
		// one named is marked deleted (the writer also writes each
		// version's record; this keeps readers of older logs right).
		if r.Value == nil {
			return nil
		}
		var v deleteSubjectValue
		if err := json.Unmarshal(r.Value, &v); err != nil {
			return fmt.Errorf("schema registry delete-subject record for %q: %w", subject, err)
		}
		for ver, sv := range s.subjects[subject] {
			if ver <= v.Version {
				sv.Deleted = true
			}
		}
	default:
		s.applied--
		return fmt.Errorf("schema registry record key type %q unknown", k.KeyType)
	}
	return nil
}

// removeVersion forgets a permanently deleted version. Its id stays
// taken: ids are never reused, and another subject may still use it.
func (s *state) removeVersion(subject string, version int) {
	vs := s.subjects[subject]
	delete(vs, version)
	if len(vs) == 0 {
		delete(s.subjects, subject)
	}
}

func typeOrAvro(t string) string {
	if t == "" {
		return TypeAvro
	}
	return t
}

// versions returns a subject's version numbers in order, with the
// soft-deleted ones when deleted.
func (s *state) versions(subject string, deleted bool) []int {
	var out []int
	for v, sv := range s.subjects[subject] {
		if deleted || !sv.Deleted {
			out = append(out, v)
		}
	}
	sort.Ints(out)
	return out
}

// live reports whether the subject has a version not soft-deleted.
func (s *state) live(subject string) bool {
	for _, sv := range s.subjects[subject] {
		if !sv.Deleted {
			return true
		}
	}
	return false
}

// latest returns the subject's newest version (soft-deleted ones too when
// deleted), or nil.
func (s *state) latest(subject string, deleted bool) *schemaValue {
	vs := s.versions(subject, deleted)
	if len(vs) == 0 {
		return nil
	}
	return s.subjects[subject][vs[len(vs)-1]]
}

// level is the compatibility level in force for subject.
func (s *state) level(subject string) string {
	if l, ok := s.configs[subject]; ok {
		return l
	}
	if l, ok := s.configs[""]; ok {
		return l
	}
	return s.defLevel
}

// mode is the mode in force for subject.
func (s *state) mode(subject string) string {
	if m, ok := s.modes[subject]; ok {
		return m
	}
	if m, ok := s.modes[""]; ok {
		return m
	}
	return ModeReadWrite
}

// referencedBy returns the ids of the live versions that refer to subject
// at version.
func (s *state) referencedBy(subject string, version int) []int {
	var out []int
	for _, vs := range s.subjects {
		for _, sv := range vs {
			if sv.Deleted {
				continue
			}
			for _, r := range sv.References {
				if r.Subject == subject && r.Version == version {
					out = append(out, sv.ID)
				}
			}
		}
	}
	sort.Ints(out)
	return slices.Compact(out)
}
