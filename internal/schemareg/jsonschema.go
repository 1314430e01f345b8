package schemareg

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// JSON Schema: parsed (and so validated as a schema) with
// santhosh-tekuri/jsonschema; compatibility by comparing the two schemas'
// documents, rule by rule, as Confluent documents them for JSON Schema:
// "reader reads writer" holds when every instance the writer's schema
// accepts, the reader's accepts too. A change these rules cannot prove
// safe is reported as incompatible (a false "incompatible" can be
// overridden with NONE; a false "compatible" would break consumers).

// jsonDoc is a parsed JSON Schema document and the documents it refers to
// by reference name.
type jsonDoc struct {
	root     any
	refs     map[string]any
	compiled *jsonschema.Schema // for payload validation (the publish gate)
}

// mainURL names the registered schema inside the compiler.
const mainURL = "berth:///schema.json"

// noLoader refuses to fetch anything: a schema's references must be
// registered ones.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("reference %s is not a registered schema (give it in references)", url)
}

func decodeJSONDoc(s string) (any, error) {
	return jsonschema.UnmarshalJSON(strings.NewReader(s))
}

// parseJSONSchema compiles c against its (already loaded) references.
func (s *state) parseJSONSchema(c content) (*parsed, error) {
	doc := &jsonDoc{refs: map[string]any{}}
	comp := jsonschema.NewCompiler()
	comp.UseLoader(noLoader{})
	if err := s.loadJSONRefs(c.References, comp, doc); err != nil {
		return nil, err
	}
	root, err := decodeJSONDoc(c.Schema)
	if err != nil {
		return nil, &errInvalidSchema{fmt.Sprintf("Invalid schema %s: %v", abbreviate(c.Schema), err)}
	}
	if err := comp.AddResource(mainURL, root); err != nil {
		return nil, &errInvalidSchema{fmt.Sprintf("Invalid schema %s: %v", abbreviate(c.Schema), err)}
	}
	compiled, err := comp.Compile(mainURL)
	if err != nil {
		return nil, &errInvalidSchema{fmt.Sprintf("Invalid schema %s: %v", abbreviate(c.Schema), err)}
	}
	doc.root = root
	doc.compiled = compiled
	return &parsed{typ: TypeJSON, json: doc, text: c.Schema}, nil
}

func (s *state) loadJSONRefs(refs []Reference, comp *jsonschema.Compiler, doc *jsonDoc) error {
	return s.walkRefs(refs, map[string]bool{}, 0, func(r Reference, sv *schemaValue) error {
		d, err := decodeJSONDoc(sv.Schema)
		if err == nil {
			err = comp.AddResource(refURL(r.Name), d)
		}
		if err != nil {
			return err
		}
		doc.refs[r.Name] = d
		return nil
	})
}

// refURL is where a reference's name resolves from the main schema's
// URL, as a $ref with that name does.
func refURL(name string) string {
	if strings.Contains(name, "://") {
		return name
	}
	return strings.TrimSuffix(mainURL, "schema.json") + strings.TrimPrefix(name, "/")
}

// jsonCanonical is the document with object keys sorted and no spaces
// (normalize=true).
func jsonCanonical(v any) string {
	b, err := json.Marshal(v) // encoding/json sorts map keys
	if err != nil {
		return ""
	}
	return string(b)
}

// jsonReadable reports why an instance valid under writer may be invalid
// under reader; nil when none.
func jsonReadable(reader, writer *jsonDoc) []string {
	c := &jsonCompare{r: reader, w: writer}
	c.compare(reader.root, writer.root, "#", 0)
	return c.msgs
}

type jsonCompare struct {
	r, w *jsonDoc
	msgs []string
}

func (c *jsonCompare) fail(path, format string, args ...any) {
	c.msgs = append(c.msgs, path+": "+fmt.Sprintf(format, args...))
}

// maxJSONDepth bounds the comparison (recursive $refs).
const maxJSONDepth = 64

// resolve follows a $ref within doc (a local pointer) or to a reference.
func resolve(doc *jsonDoc, v any) any {
	for range maxReferenceDepth {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		ref, ok := m["$ref"].(string)
		if !ok || len(m) != 1 {
			return v
		}
		base, frag, _ := strings.Cut(ref, "#")
		target := doc.root
		if base != "" {
			if target, ok = doc.refs[base]; !ok {
				return v
			}
		}
		next, found := pointer(target, frag)
		if !found {
			return v
		}
		v = next
	}
	return v
}

// pointer evaluates a JSON pointer fragment ("/definitions/a").
func pointer(v any, frag string) (any, bool) {
	if frag == "" {
		return v, true
	}
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[tok]; !ok {
			return nil, false
		}
	}
	return v, true
}

// acceptsAll reports whether s accepts every instance (true, {}, or only
// annotations).
func acceptsAll(s any) bool {
	switch v := s.(type) {
	case bool:
		return v
	case map[string]any:
		for k := range v {
			switch k {
			case "$schema", "$id", "id", "title", "description", "default", "examples", "$comment", "definitions", "$defs":
			default:
				return false
			}
		}
		return true
	}
	return false
}

func rejectsAll(s any) bool {
	b, ok := s.(bool)
	return ok && !b
}

// types returns the schema's type set; nil when unconstrained.
func types(m map[string]any) []string {
	switch t := m["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func hasType(ts []string, t string) bool {
	return ts == nil || slices.Contains(ts, t) || (t == "integer" && slices.Contains(ts, "number"))
}

func num(v any) (*big.Rat, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(n.String())
	return r, ok
}

func (c *jsonCompare) compare(reader, writer any, path string, depth int) {
	if depth > maxJSONDepth {
		c.fail(path, "schemas nest too deep to compare")
		return
	}
	reader, writer = resolve(c.r, reader), resolve(c.w, writer)
	if acceptsAll(reader) || rejectsAll(writer) {
		return
	}
	if rejectsAll(reader) {
		c.fail(path, "the schema now rejects every value")
		return
	}
	rm, _ := reader.(map[string]any)
	wm, _ := writer.(map[string]any)
	if rm == nil {
		c.fail(path, "cannot compare a non-schema value")
		return
	}
	if wm == nil {
		wm = map[string]any{} // writer true: anything
	}
	if jsonCanonical(rm) == jsonCanonical(wm) {
		return
	}
	// Combinators and $refs these rules do not open up must be unchanged.
	for _, k := range []string{"oneOf", "anyOf", "allOf", "not", "if", "then", "else", "$ref", "dependencies", "dependentSchemas", "dependentRequired", "patternProperties", "propertyNames", "contains", "prefixItems"} {
		if rv, ok := rm[k]; ok && jsonCanonical(rv) != jsonCanonical(wm[k]) {
			c.fail(path, "%s changed (Berth compares it only for equality)", k)
		}
	}
	rt, wt := types(rm), types(wm)
	if rt != nil {
		if wt == nil {
			c.fail(path, "a type (%s) was added where any type was allowed", strings.Join(rt, ", "))
		}
		for _, t := range wt {
			if !hasType(rt, t) {
				c.fail(path, "type %s is no longer allowed (now %s)", t, strings.Join(rt, ", "))
			}
		}
	}
	c.enum(rm, wm, path)
	c.bounds(rm, wm, path)
	if rp, ok := rm["pattern"]; ok && rp != wm["pattern"] {
		c.fail(path, "pattern changed to %v", rp)
	}
	if rf, ok := rm["format"]; ok && rf != wm["format"] {
		c.fail(path, "format changed to %v", rf)
	}
	if ru, _ := rm["uniqueItems"].(bool); ru {
		if wu, _ := wm["uniqueItems"].(bool); !wu {
			c.fail(path, "uniqueItems added")
		}
	}
	if ri, ok := rm["items"]; ok {
		wi, ok := wm["items"]
		if !ok {
			wi = true
		}
		c.compare(ri, wi, path+"/items", depth+1)
	}
	if hasType(wt, "object") {
		c.object(rm, wm, path, depth)
	}
}

func (c *jsonCompare) enum(rm, wm map[string]any, path string) {
	for _, k := range []string{"enum", "const"} {
		rv, ok := rm[k]
		if !ok {
			continue
		}
		wv, ok := wm[k]
		if !ok {
			c.fail(path, "%s added", k)
			continue
		}
		allowed := map[string]bool{}
		list := func(v any) []any {
			if k == "const" {
				return []any{v}
			}
			l, _ := v.([]any)
			return l
		}
		for _, x := range list(rv) {
			allowed[jsonCanonical(x)] = true
		}
		for _, x := range list(wv) {
			if !allowed[jsonCanonical(x)] {
				c.fail(path, "%s value %s removed", k, jsonCanonical(x))
			}
		}
	}
}

// bounds checks numeric, length and count limits: the reader's may not be
// tighter than the writer's.
func (c *jsonCompare) bounds(rm, wm map[string]any, path string) {
	for _, k := range []string{"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"} {
		rv, ok := num(rm[k])
		if !ok {
			continue
		}
		wv, ok := num(wm[k])
		if !ok || wv.Cmp(rv) < 0 {
			c.fail(path, "%s raised to %s", k, rv.RatString())
		}
	}
	for _, k := range []string{"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"} {
		rv, ok := num(rm[k])
		if !ok {
			continue
		}
		wv, ok := num(wm[k])
		if !ok || wv.Cmp(rv) > 0 {
			c.fail(path, "%s lowered to %s", k, rv.RatString())
		}
	}
	if rv, ok := num(rm["multipleOf"]); ok {
		wv, ok := num(wm["multipleOf"])
		if !ok || !new(big.Rat).Quo(wv, rv).IsInt() {
			c.fail(path, "multipleOf %s added or changed", rv.RatString())
		}
	}
}

// object compares properties, required and the content model (open:
// additionalProperties absent or true; closed: false; or a schema).
func (c *jsonCompare) object(rm, wm map[string]any, path string, depth int) {
	rprops, _ := rm["properties"].(map[string]any)
	wprops, _ := wm["properties"].(map[string]any)
	rextra, hasR := rm["additionalProperties"]
	if !hasR {
		rextra = true
	}
	wextra, hasW := wm["additionalProperties"]
	if !hasW {
		wextra = true
	}
	wreq := map[string]bool{}
	if l, ok := wm["required"].([]any); ok {
		for _, x := range l {
			if s, ok := x.(string); ok {
				wreq[s] = true
			}
		}
	}
	if l, ok := rm["required"].([]any); ok {
		for _, x := range l {
			if s, ok := x.(string); ok && !wreq[s] {
				c.fail(path, "property %q is now required", s)
			}
		}
	}
	names := make([]string, 0, len(rprops)+len(wprops))
	for k := range wprops {
		names = append(names, k)
	}
	for k := range rprops {
		if _, ok := wprops[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		rp, inR := rprops[k]
		wp, inW := wprops[k]
		switch {
		case inR && inW:
			c.compare(rp, wp, path+"/properties/"+k, depth+1)
		case inW: // removed: the reader's additionalProperties must take it
			if rejectsAll(rextra) {
				c.fail(path, "property %q removed from a closed content model", k)
			} else {
				c.compare(rextra, wp, path+"/properties/"+k, depth+1)
			}
		default: // added: what the writer let in under that name must fit
			if !rejectsAll(wextra) {
				if acceptsAll(wextra) && !acceptsAll(rp) {
					c.fail(path, "property %q added to an open content model", k)
				} else {
					c.compare(rp, wextra, path+"/properties/"+k, depth+1)
				}
			}
		}
	}
	// Other names: the writer's additionalProperties against the reader's.
	if !rejectsAll(wextra) {
		if rejectsAll(rextra) {
			c.fail(path, "additionalProperties closed (false) where the writer allowed more")
		} else {
			c.compare(rextra, wextra, path+"/additionalProperties", depth+1)
		}
	}
}
