package schemareg

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// parsed is a schema parsed with its references resolved.
type parsed struct {
	typ   string
	avro  avro.Schema
	json  *jsonDoc
	proto protoreflect.FileDescriptor
	text  string // the schema as registered, for messages
}

// canonical is the schema's normalised text (normalize=true).
func (p *parsed) canonical() string {
	switch {
	case p.avro != nil:
		return p.avro.String()
	case p.json != nil:
		return jsonCanonical(p.json.root)
	}
	return p.text
}

// errInvalidSchema is a schema that does not parse (42201).
type errInvalidSchema struct{ msg string }

func (e *errInvalidSchema) Error() string { return e.msg }

// maxReferenceDepth bounds reference chains (and cycles).
const maxReferenceDepth = 32

// parse parses c, resolving its references against s.
func (s *state) parse(c content) (*parsed, error) {
	switch typeOrAvro(c.Type) {
	case TypeAvro:
		cache := &avro.SchemaCache{}
		err := s.walkRefs(c.References, map[string]bool{}, 0, func(_ Reference, sv *schemaValue) error {
			_, err := avro.ParseWithCache(sv.Schema, "", cache)
			return err
		})
		if err != nil {
			return nil, err
		}
		sch, err := avro.ParseWithCache(c.Schema, "", cache)
		if err != nil {
			return nil, &errInvalidSchema{fmt.Sprintf("Invalid schema %s: %v", abbreviate(c.Schema), err)}
		}
		return &parsed{typ: TypeAvro, avro: sch}, nil
	case TypeJSON:
		return s.parseJSONSchema(c)
	case TypeProtobuf:
		return s.parseProtobuf(c)
	default:
		return nil, &errInvalidSchema{fmt.Sprintf("Invalid schema type %q: want AVRO, JSON or PROTOBUF", c.Type)}
	}
}

// walkRefs visits the schemas refs name, each once by reference name,
// the ones they refer to before them, so a visit finds what its schema
// needs loaded already. A reference to a version that does not exist, or
// a chain deeper than maxReferenceDepth (a cycle), is an invalid schema.
func (s *state) walkRefs(refs []Reference, seen map[string]bool, depth int, visit func(r Reference, sv *schemaValue) error) error {
	if depth > maxReferenceDepth {
		return &errInvalidSchema{"Invalid schema: references nest deeper than 32 (a cycle?)"}
	}
	for _, r := range refs {
		if seen[r.Name] {
			continue
		}
		sv := s.subjects[r.Subject][r.Version]
		if sv == nil {
			return &errInvalidSchema{fmt.Sprintf("Invalid schema: reference %q to subject %q version %d not found", r.Name, r.Subject, r.Version)}
		}
		if err := s.walkRefs(sv.References, seen, depth+1, visit); err != nil {
			return err
		}
		seen[r.Name] = true
		if err := visit(r, sv); err != nil {
			return &errInvalidSchema{fmt.Sprintf("Invalid schema: reference %q (subject %q version %d): %v", r.Name, r.Subject, r.Version, err)}
		}
	}
	return nil
}

// compatible checks a new schema against the earlier ones (oldest first)
// at level and returns why it is not compatible; none when it is.
func compatible(level string, next *parsed, earlier []*parsed) []string {
	if level == LevelNone || len(earlier) == 0 {
		return nil
	}
	against := earlier
	if !strings.HasSuffix(level, "_TRANSITIVE") {
		against = earlier[len(earlier)-1:]
	}
	backward := strings.HasPrefix(level, "BACKWARD") || strings.HasPrefix(level, "FULL")
	forward := strings.HasPrefix(level, "FORWARD") || strings.HasPrefix(level, "FULL")
	var msgs []string
	for i := len(against) - 1; i >= 0; i-- {
		old := against[i]
		if old.typ != next.typ {
			msgs = append(msgs, fmt.Sprintf("Incompatible schema type: %s against %s", next.typ, old.typ))
			continue
		}
		if backward {
			if err := readable(next, old); err != nil {
				msgs = append(msgs, fmt.Sprintf("BACKWARD: the new schema cannot read data written with an earlier one (%s): %v", abbreviate(old.canonical()), err))
			}
		}
		if forward {
			if err := readable(old, next); err != nil {
				msgs = append(msgs, fmt.Sprintf("FORWARD: an earlier schema (%s) cannot read data written with the new one: %v", abbreviate(old.canonical()), err))
			}
		}
		if old.proto != nil && next.proto != nil {
			if ev := protoEvolution(old.proto, next.proto); len(ev) > 0 {
				msgs = append(msgs, fmt.Sprintf("the change from an earlier schema (%s) breaks Protobuf's wire rules: %s", abbreviate(old.canonical()), strings.Join(ev, "; ")))
			}
		}
	}
	return msgs
}

// readable reports whether reader can read data written with writer.
func readable(reader, writer *parsed) error {
	if reader.avro != nil && writer.avro != nil {
		return avro.NewSchemaCompatibility().Compatible(reader.avro, writer.avro)
	}
	if reader.json != nil && writer.json != nil {
		if msgs := jsonReadable(reader.json, writer.json); len(msgs) > 0 {
			return errors.New(strings.Join(msgs, "; "))
		}
		return nil
	}
	if reader.proto != nil && writer.proto != nil {
		if msgs := protoReadable(reader.proto, writer.proto); len(msgs) > 0 {
			return errors.New(strings.Join(msgs, "; "))
		}
		return nil
	}
	return fmt.Errorf("schema type %s has no compatibility rules yet", reader.typ)
}

// abbreviate shortens a schema for a message.
func abbreviate(s string) string {
	const n = 200
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
