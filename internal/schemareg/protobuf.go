package schemareg

// Protobuf schemas: a .proto file's text, parsed with protocompile, or
// a base64 FileDescriptorProto (what Confluent's serializers register); its
// references are its imports (a reference's name is the import path) and
// the well-known google/protobuf/*.proto files resolve without one.
//
// Compatibility has two parts. What a reader built from one version can
// decode of data another wrote (Confluent's Protobuf rules; checked in
// the directions the level asks, as for the other types):
//
//   - a message or enum the writer has must still exist (same full name,
//     so a package change removes every message);
//   - a field number keeps a wire-compatible type: int32, uint32, int64,
//     uint64 and bool are one group, sint32/sint64, fixed32/sfixed32,
//     fixed64/sfixed64, string/bytes others; message and enum fields keep
//     their type's full name; map key and value types stay;
//   - a field keeps its cardinality (singular, repeated, map);
//   - a proto2 required field is neither added nor removed.
//
// And how the new version evolved from the old one (Buf's WIRE rules,
// checked once per earlier version at any level but NONE):
//
//   - a field removed has its number reserved (else a later field may
//     take the number with another type), and a field added does not take
//     a number or name the old version reserved;
//   - a reserved range or name is not dropped;
//   - a field does not move into or out of a oneof, except one field
//     alone into a new oneof;
//   - an enum value removed has its number reserved, and a value added
//     does not take a reserved number.
//
// Messages and enums of imported (referenced) files are compared too.

import (
	"context"
	"encoding/base64"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// protoMain is the registered schema's file name inside the compiler.
const protoMain = "berth/registered.proto"

// parseProtobuf compiles c with its references as the files it imports.
func (s *state) parseProtobuf(c content) (*parsed, error) {
	files := map[string]string{protoMain: c.Schema}
	err := s.walkRefs(c.References, map[string]bool{}, 0, func(r Reference, sv *schemaValue) error {
		files[r.Name] = sv.Schema
		return nil
	})
	if err != nil {
		return nil, err
	}
	comp := protocompile.Compiler{
		MaxParallelism: 1,
		Resolver: protocompile.WithStandardImports(protocompile.ResolverFunc(func(path string) (protocompile.SearchResult, error) {
			text, ok := files[path]
			if !ok {
				return protocompile.SearchResult{}, fmt.Errorf("import %q is not a registered schema (give it in references): %w", path, fs.ErrNotExist)
			}
			if fdp := serializedProto(text); fdp != nil {
				fdp.Name = &path
				return protocompile.SearchResult{Proto: fdp}, nil
			}
			return protocompile.SearchResult{Source: strings.NewReader(text)}, nil
		})),
	}
	res, err := comp.Compile(context.Background(), protoMain)
	if err != nil {
		return nil, &errInvalidSchema{fmt.Sprintf("Invalid schema %s: %v", abbreviate(c.Schema), err)}
	}
	return &parsed{typ: TypeProtobuf, proto: res[0], text: c.Schema}, nil
}

// serializedProto decodes a schema given as a base64 FileDescriptorProto
// (what Confluent's serializers register, and the registry's
// format=serialized), nil when text is .proto source.
func serializedProto(text string) *descriptorpb.FileDescriptorProto {
	text = strings.TrimSpace(text)
	if text == "" || strings.ContainsAny(text, " \n\t;{") {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return nil
	}
	fdp := &descriptorpb.FileDescriptorProto{}
	if err := proto.Unmarshal(b, fdp); err != nil || (len(fdp.MessageType) == 0 && len(fdp.EnumType) == 0 && fdp.Package == nil) {
		return nil
	}
	for _, m := range fdp.MessageType {
		fillJSONNames(m)
	}
	return fdp
}

// fillJSONNames gives every field without a json_name its default one,
// as protoc's descriptors have them (descriptors built by a runtime, such
// as Python's, may leave them out; the linker would take the missing
// ones for custom names that collide).
func fillJSONNames(m *descriptorpb.DescriptorProto) {
	for _, f := range m.Field {
		if f.JsonName == nil || *f.JsonName == "" {
			name := defaultJSONName(f.GetName())
			f.JsonName = &name
		}
	}
	for _, n := range m.NestedType {
		fillJSONNames(n)
	}
}

// defaultJSONName is protoc's JSON name of a field: underscores dropped,
// the letter after each upper-cased.
func defaultJSONName(name string) string {
	var b strings.Builder
	up := false
	for _, r := range name {
		switch {
		case r == '_':
			up = true
		case up && r >= 'a' && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
			up = false
		default:
			b.WriteRune(r)
			up = false
		}
	}
	return b.String()
}

// protoFirstMessage is the file's first message's full name (the record
// name of Confluent's record name strategies), "" if it has none.
func protoFirstMessage(fd protoreflect.FileDescriptor) string {
	if fd.Messages().Len() == 0 {
		return ""
	}
	return string(fd.Messages().Get(0).FullName())
}

// protoCompare collects what breaks between two versions.
type protoCompare struct {
	msgs []string
}

func (c *protoCompare) fail(format string, args ...any) {
	if len(c.msgs) < 20 {
		c.msgs = append(c.msgs, fmt.Sprintf(format, args...))
	}
}

// protoReadable returns why a reader built from reader cannot decode
// what writer wrote (none: it can).
func protoReadable(reader, writer protoreflect.FileDescriptor) []string {
	c := &protoCompare{}
	rm, re := protoIndex(reader)
	wm, we := protoIndex(writer)
	for _, name := range sortedNames(wm) {
		r, ok := rm[name]
		if !ok {
			c.fail("message %s removed", name)
			continue
		}
		c.message(r, wm[name])
	}
	for _, name := range sortedNames(we) {
		if _, ok := re[name]; !ok {
			c.fail("enum %s removed", name)
		}
	}
	return c.msgs
}

// protoEvolution returns what breaks Buf's WIRE rules from old to next.
func protoEvolution(old, next protoreflect.FileDescriptor) []string {
	c := &protoCompare{}
	om, oe := protoIndex(old)
	nm, ne := protoIndex(next)
	for _, name := range sortedNames(om) {
		if m, ok := nm[name]; ok {
			c.evolveMessage(om[name], m)
		}
	}
	for _, name := range sortedNames(oe) {
		if e, ok := ne[name]; ok {
			c.evolveEnum(oe[name], e)
		}
	}
	return c.msgs
}

// protoIndex indexes the messages and enums of a file and of the files
// it imports but the standard ones.
func protoIndex(fd protoreflect.FileDescriptor) (map[protoreflect.FullName]protoreflect.MessageDescriptor, map[protoreflect.FullName]protoreflect.EnumDescriptor) {
	ms, es := map[protoreflect.FullName]protoreflect.MessageDescriptor{}, map[protoreflect.FullName]protoreflect.EnumDescriptor{}
	seen := map[string]bool{}
	var walk func(f protoreflect.FileDescriptor)
	walk = func(f protoreflect.FileDescriptor) {
		if seen[f.Path()] || strings.HasPrefix(f.Path(), "google/protobuf/") {
			return
		}
		seen[f.Path()] = true
		collectProto(f.Messages(), f.Enums(), ms, es)
		for i := range f.Imports().Len() {
			walk(f.Imports().Get(i).FileDescriptor)
		}
	}
	walk(fd)
	return ms, es
}

// collectProto indexes every message and enum, nested ones included (map
// entries are their fields' business).
func collectProto(ms protoreflect.MessageDescriptors, es protoreflect.EnumDescriptors,
	mo map[protoreflect.FullName]protoreflect.MessageDescriptor, eo map[protoreflect.FullName]protoreflect.EnumDescriptor) {
	for i := range es.Len() {
		eo[es.Get(i).FullName()] = es.Get(i)
	}
	for i := range ms.Len() {
		m := ms.Get(i)
		if m.IsMapEntry() {
			continue
		}
		mo[m.FullName()] = m
		collectProto(m.Messages(), m.Enums(), mo, eo)
	}
}

func sortedNames[V any](m map[protoreflect.FullName]V) []protoreflect.FullName {
	out := make([]protoreflect.FullName, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// wireGroup is a field kind's group of kinds that decode each other's
// values.
func wireGroup(k protoreflect.Kind) string {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Uint32Kind, protoreflect.Int64Kind, protoreflect.Uint64Kind, protoreflect.BoolKind:
		return "varint"
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return "zigzag"
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return "fixed32"
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return "fixed64"
	case protoreflect.StringKind, protoreflect.BytesKind:
		return "bytes"
	}
	return k.String()
}

// cardinality is singular, repeated or map.
func cardinality(f protoreflect.FieldDescriptor) string {
	switch {
	case f.IsMap():
		return "map"
	case f.IsList():
		return "repeated"
	}
	return "singular"
}

// typeName is a field's type as a message names it.
func typeName(f protoreflect.FieldDescriptor) string {
	switch {
	case f.IsMap():
		return fmt.Sprintf("map<%s, %s>", typeName(f.MapKey()), typeName(f.MapValue()))
	case f.Message() != nil:
		return string(f.Message().FullName())
	case f.Enum() != nil:
		return string(f.Enum().FullName())
	}
	return f.Kind().String()
}

func realOneof(f protoreflect.FieldDescriptor) protoreflect.OneofDescriptor {
	if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
		return o
	}
	return nil
}

func (c *protoCompare) message(r, w protoreflect.MessageDescriptor) {
	name := w.FullName()
	rf, wf := r.Fields(), w.Fields()
	for i := range wf.Len() {
		f := wf.Get(i)
		g := rf.ByNumber(f.Number())
		if g == nil {
			if f.Cardinality() == protoreflect.Required {
				c.fail("%s: required field %s (number %d) removed", name, f.Name(), f.Number())
			}
			continue
		}
		if cf, cg := cardinality(f), cardinality(g); cf != cg {
			c.fail("%s: field number %d changed from %s to %s", name, f.Number(), cf, cg)
			continue
		}
		switch {
		case f.IsMap() || f.Message() != nil || g.Message() != nil || f.Enum() != nil || g.Enum() != nil:
			if typeName(f) != typeName(g) {
				c.fail("%s: field number %d changed type from %s to %s", name, f.Number(), typeName(f), typeName(g))
			}
		case wireGroup(f.Kind()) != wireGroup(g.Kind()):
			c.fail("%s: field number %d changed type from %s to %s, which do not decode each other's values", name, f.Number(), f.Kind(), g.Kind())
		}
		if (f.Cardinality() == protoreflect.Required) != (g.Cardinality() == protoreflect.Required) {
			c.fail("%s: field number %d changed between required and optional", name, f.Number())
		}
	}
	for i := range rf.Len() {
		if g := rf.Get(i); g.Cardinality() == protoreflect.Required && wf.ByNumber(g.Number()) == nil {
			c.fail("%s: required field %s (number %d) added", name, g.Name(), g.Number())
		}
	}
}

func (c *protoCompare) evolveMessage(o, n protoreflect.MessageDescriptor) {
	name := o.FullName()
	of, nf := o.Fields(), n.Fields()
	movedInto := map[protoreflect.Name]int{} // new oneofs, by the old fields moved in
	for i := range of.Len() {
		f := of.Get(i)
		g := nf.ByNumber(f.Number())
		if g == nil {
			if !n.ReservedRanges().Has(f.Number()) {
				c.fail("%s: field %s (number %d) removed without reserving its number (add: reserved %d;)", name, f.Name(), f.Number(), f.Number())
			}
			continue
		}
		fo, gor := realOneof(f), realOneof(g)
		switch {
		case fo == nil && gor != nil:
			if o.Oneofs().ByName(gor.Name()) != nil {
				c.fail("%s: field %s moved into the existing oneof %s", name, g.Name(), gor.Name())
			} else {
				movedInto[gor.Name()]++
			}
		case fo != nil && gor == nil:
			c.fail("%s: field %s moved out of oneof %s", name, f.Name(), fo.Name())
		case fo != nil && gor != nil && fo.Name() != gor.Name():
			c.fail("%s: field %s moved from oneof %s to %s", name, f.Name(), fo.Name(), gor.Name())
		}
	}
	for _, o := range slices.Sorted(maps.Keys(movedInto)) {
		if n := movedInto[o]; n > 1 {
			c.fail("%s: %d existing fields moved into the new oneof %s", name, n, o)
		}
	}
	for i := range nf.Len() {
		g := nf.Get(i)
		if of.ByNumber(g.Number()) != nil {
			continue
		}
		if o.ReservedRanges().Has(g.Number()) {
			c.fail("%s: field %s takes number %d, which was reserved", name, g.Name(), g.Number())
		}
		if o.ReservedNames().Has(g.Name()) {
			c.fail("%s: field %s takes the reserved name %s", name, g.Name(), g.Name())
		}
	}
	or := o.ReservedRanges()
	for i := range or.Len() {
		rg := or.Get(i)
		for num := rg[0]; num < rg[1] && num-rg[0] <= 1<<16; num++ { // a huge range: its first numbers tell
			if !n.ReservedRanges().Has(num) && nf.ByNumber(num) == nil {
				c.fail("%s: reserved number %d no longer reserved", name, num)
				break
			}
		}
	}
	for i := range o.ReservedNames().Len() {
		if rn := o.ReservedNames().Get(i); !n.ReservedNames().Has(rn) && nf.ByName(rn) == nil {
			c.fail("%s: reserved name %s no longer reserved", name, rn)
		}
	}
}

func (c *protoCompare) evolveEnum(o, n protoreflect.EnumDescriptor) {
	name := o.FullName()
	for i := range o.Values().Len() {
		v := o.Values().Get(i)
		if n.Values().ByNumber(v.Number()) == nil && !n.ReservedRanges().Has(v.Number()) {
			c.fail("%s: value %s (number %d) removed without reserving its number", name, v.Name(), v.Number())
		}
	}
	for i := range n.Values().Len() {
		v := n.Values().Get(i)
		if o.Values().ByNumber(v.Number()) == nil && o.ReservedRanges().Has(v.Number()) {
			c.fail("%s: value %s takes number %d, which was reserved", name, v.Name(), v.Number())
		}
	}
}
