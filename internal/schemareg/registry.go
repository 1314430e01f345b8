package schemareg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Error is a registry error with Confluent's HTTP status and error code.
type Error struct {
	Status  int    `json:"-"`
	Code    int    `json:"error_code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("%d: %s", e.Code, e.Message) }

func errSubjectNotFound(s string) *Error {
	return &Error{404, 40401, fmt.Sprintf("Subject '%s' not found.", s)}
}

func errVersionNotFound(s string, v int) *Error {
	return &Error{404, 40402, fmt.Sprintf("Version %d not found.", v)}
}

func errSchemaNotFound() *Error { return &Error{404, 40403, "Schema not found"} }

func errSubjectSoftDeleted(s string) *Error {
	return &Error{404, 40404, fmt.Sprintf("Subject '%s' was soft deleted.Set permanent=true to delete permanently", s)}
}

func errSubjectNotSoftDeleted(s string) *Error {
	return &Error{404, 40405, fmt.Sprintf("Subject '%s' was not deleted first before being permanently deleted", s)}
}

func errVersionSoftDeleted(s string, v int) *Error {
	return &Error{404, 40406, fmt.Sprintf("Subject '%s' Version %d was soft deleted.Set permanent=true to delete permanently", s, v)}
}

func errVersionNotSoftDeleted(s string, v int) *Error {
	return &Error{404, 40407, fmt.Sprintf("Subject '%s' Version %d was not deleted first before being permanently deleted", s, v)}
}

func errSubjectLevelConfig(s string) *Error {
	return &Error{404, 40408, fmt.Sprintf("Subject '%s' does not have subject-level compatibility configured", s)}
}

func errSubjectLevelMode(s string) *Error {
	return &Error{404, 40409, fmt.Sprintf("Subject '%s' does not have subject-level mode configured", s)}
}

func errIncompatible(msgs []string) *Error {
	return &Error{409, 409, "Schema being registered is incompatible with an earlier schema for subject; details: [" + strings.Join(msgs, "; ") + "]"}
}

func errInvalidSchemaErr(msg string) *Error { return &Error{422, 42201, msg} }

func errInvalidVersion(v string) *Error {
	return &Error{422, 42202, fmt.Sprintf("The specified version '%s' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"", v)}
}

func errInvalidLevel() *Error {
	return &Error{422, 42203, "Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive"}
}

func errInvalidMode() *Error {
	return &Error{422, 42204, "Invalid mode. Valid values are READWRITE, READONLY and IMPORT"}
}

func errNotPermitted(msg string) *Error { return &Error{422, 42205, msg} }

func errReferenceExists(msg string) *Error { return &Error{422, 42206, msg} }

func errStore(err error) *Error {
	return &Error{500, 50001, "Error in the backend data store: " + err.Error()}
}

// Log makes records durable and applies them to the registry, in order,
// before Append returns (for a Registry, through Registry.Apply).
type Log interface {
	Append(ctx context.Context, recs []Record) error
}

// Registry is the schema registry of one node: the state built by Apply,
// read under a shared lock, and the writes, which compute records under
// the writer lock and hand them to the Log.
type Registry struct {
	writeMu sync.Mutex // serialises writes: ids and versions are decided under it
	mu      sync.RWMutex
	st      *state
	log     Log
	gate    gateCache // the publish gate's parsed schemas, by id
}

// New returns an empty registry writing through log (nil: records are
// applied in memory only, for tests and single-process use).
func New(log Log) *Registry {
	r := &Registry{st: newState()}
	if log == nil {
		log = memoryLog{r}
	}
	r.log = log
	return r
}

// memoryLog applies records at once.
type memoryLog struct{ r *Registry }

func (m memoryLog) Append(_ context.Context, recs []Record) error {
	for _, rec := range recs {
		if err := m.r.Apply(rec); err != nil {
			return err
		}
	}
	return nil
}

// Apply applies one record from the log.
func (r *Registry) Apply(rec Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.apply(rec)
}

// Preparer is a Log that must get ready before a write is planned: the
// topic log checks that this node is the writer and has applied every
// record in the log, so ids and versions are decided on the whole state.
type Preparer interface {
	Prepare(ctx context.Context) error
}

// beginWrite takes the writer lock and readies the log for a write; on
// success the caller unlocks writeMu.
func (r *Registry) beginWrite(ctx context.Context) error {
	r.writeMu.Lock()
	if p, ok := r.log.(Preparer); ok {
		if err := p.Prepare(ctx); err != nil {
			r.writeMu.Unlock()
			var e *Error
			if errors.As(err, &e) {
				return e
			}
			return errStore(err)
		}
	}
	return nil
}

// Reset drops the whole state, for a log read again from its start.
func (r *Registry) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	def := r.st.defLevel
	r.st = newState()
	r.st.defLevel = def
	r.gate.mu.Lock()
	r.gate.entries = nil
	r.gate.mu.Unlock()
}

// SetDefaultLevel sets the compatibility level in force while no global
// level is set (schema.compatibility.level); level must be valid.
func (r *Registry) SetDefaultLevel(level string) error {
	level = strings.ToUpper(level)
	if !slices.Contains(levels, level) {
		return errInvalidLevel()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.defLevel = level
	return nil
}

func (r *Registry) append(ctx context.Context, recs ...Record) error {
	if err := r.log.Append(ctx, recs); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return e
		}
		return errStore(err)
	}
	return nil
}

// SchemaRequest is a schema to register, look up or check.
type SchemaRequest struct {
	Schema     string      `json:"schema"`
	SchemaType string      `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
	Metadata   rawJSON     `json:"metadata,omitempty"`
	RuleSet    rawJSON     `json:"ruleSet,omitempty"`
	ID         int         `json:"id,omitempty"`      // IMPORT mode only
	Version    int         `json:"version,omitempty"` // IMPORT mode only
}

// SubjectVersion is one version of a subject, as the API returns it.
type SubjectVersion struct {
	Subject    string      `json:"subject"`
	ID         int         `json:"id"`
	Version    int         `json:"version"`
	SchemaType string      `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
	Metadata   rawJSON     `json:"metadata,omitempty"`
	RuleSet    rawJSON     `json:"ruleSet,omitempty"`
	Schema     string      `json:"schema"`
	Deleted    bool        `json:"-"`
}

func toSubjectVersion(sv *schemaValue) SubjectVersion {
	return SubjectVersion{
		Subject: sv.Subject, ID: sv.ID, Version: sv.Version, SchemaType: sv.SchemaType,
		References: sv.References, Metadata: rawJSON(sv.Metadata), RuleSet: rawJSON(sv.RuleSet),
		Schema: sv.Schema, Deleted: sv.Deleted,
	}
}

// content of a request, normalised when asked (and its parse).
func (s *state) requestContent(req SchemaRequest, normalize bool) (content, *parsed, error) {
	c := content{Type: typeOrAvro(strings.ToUpper(req.SchemaType)), Schema: req.Schema, References: req.References}
	p, err := s.parse(c)
	if err != nil {
		var inv *errInvalidSchema
		if errors.As(err, &inv) {
			return c, nil, errInvalidSchemaErr(inv.msg)
		}
		return c, nil, err
	}
	if normalize {
		c.Schema = p.canonical()
	}
	return c, p, nil
}

// findInSubject returns the live (or, with deleted, any) version of
// subject holding content c.
func (s *state) findInSubject(subject string, c content, deleted bool) *schemaValue {
	key := c.key()
	var found *schemaValue
	for _, v := range s.versions(subject, deleted) {
		sv := s.subjects[subject][v]
		if (content{Type: typeOrAvro(sv.SchemaType), Schema: sv.Schema, References: sv.References}).key() == key {
			found = sv // the newest such version
		}
	}
	return found
}

// earlierParsed parses a subject's live versions, oldest first.
func (s *state) earlierParsed(subject string) ([]*parsed, error) {
	var out []*parsed
	for _, v := range s.versions(subject, false) {
		sv := s.subjects[subject][v]
		p, err := s.parse(content{Type: typeOrAvro(sv.SchemaType), Schema: sv.Schema, References: sv.References})
		if err != nil {
			return nil, fmt.Errorf("parsing %s version %d: %w", subject, v, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Register registers a schema under subject and returns its id: the id it
// has already if this content is registered anywhere, a new one otherwise.
// Registering a schema the subject holds already returns its id and adds
// no version.
func (r *Registry) Register(ctx context.Context, subject string, req SchemaRequest, normalize bool) (int, error) {
	if err := r.beginWrite(ctx); err != nil {
		return 0, err
	}
	defer r.writeMu.Unlock()
	r.mu.RLock()
	recs, id, err := r.planRegister(subject, req, normalize)
	r.mu.RUnlock()
	if err != nil || len(recs) == 0 {
		return id, err
	}
	return id, r.append(ctx, recs...)
}

func (r *Registry) planRegister(subject string, req SchemaRequest, normalize bool) ([]Record, int, error) {
	s := r.st
	mode := s.mode(subject)
	if mode == ModeReadOnly {
		return nil, 0, errNotPermitted(fmt.Sprintf("Subject %s is in read-only mode", subject))
	}
	if (req.ID != 0 || req.Version != 0) && mode != ModeImport {
		return nil, 0, errNotPermitted(fmt.Sprintf("Subject %s is not in import mode: a schema id or version may only be given in IMPORT mode", subject))
	}
	c, p, err := s.requestContent(req, normalize)
	if err != nil {
		return nil, 0, err
	}
	if sv := s.findInSubject(subject, c, false); sv != nil && req.ID == 0 {
		return nil, sv.ID, nil
	}
	id, ok := s.byKey[c.key()]
	if mode == ModeImport {
		if req.ID <= 0 {
			return nil, 0, errNotPermitted(fmt.Sprintf("Subject %s is in import mode: give the schema's id", subject))
		}
		if have, taken := s.ids[req.ID]; taken && have.key() != c.key() {
			return nil, 0, errNotPermitted(fmt.Sprintf("Overwrite new schema with id %d is not permitted: the id holds another schema", req.ID))
		}
		id = req.ID
	} else {
		if level := s.level(subject); level != LevelNone {
			earlier, err := s.earlierParsed(subject)
			if err != nil {
				return nil, 0, errStore(err)
			}
			if msgs := compatible(level, p, earlier); len(msgs) > 0 {
				return nil, 0, errIncompatible(msgs)
			}
		}
		if !ok {
			id = s.maxID + 1
		}
	}
	version := 1
	if l := s.latest(subject, true); l != nil {
		version = l.Version + 1
	}
	if req.Version > 0 {
		if s.subjects[subject][req.Version] != nil {
			return nil, 0, errNotPermitted(fmt.Sprintf("Subject %s version %d exists already", subject, req.Version))
		}
		version = req.Version
	}
	sv := schemaValue{
		Subject: subject, Version: version, ID: id, Schema: c.Schema, References: c.References,
		Metadata: []byte(req.Metadata), RuleSet: []byte(req.RuleSet),
	}
	if c.Type != TypeAvro {
		sv.SchemaType = c.Type
	}
	return []Record{schemaRecord(sv)}, id, nil
}

// LookUp finds the version of subject holding a schema (POST /subjects/{s}).
func (r *Registry) LookUp(subject string, req SchemaRequest, normalize, deleted bool) (SubjectVersion, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s := r.st
	if s.subjects[subject] == nil || (!deleted && !s.live(subject)) {
		return SubjectVersion{}, errSubjectNotFound(subject)
	}
	c, _, err := s.requestContent(req, normalize)
	if err != nil {
		return SubjectVersion{}, err
	}
	sv := s.findInSubject(subject, c, deleted)
	if sv == nil {
		return SubjectVersion{}, errSchemaNotFound()
	}
	return toSubjectVersion(sv), nil
}

// Subjects lists subjects with a live version (any, with deleted) that
// start with prefix.
func (r *Registry) Subjects(prefix string, deleted bool) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := []string{}
	for name := range r.st.subjects {
		if strings.HasPrefix(name, prefix) && (deleted || r.st.live(name)) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Schemas lists every version of the subjects starting with prefix, by
// subject then version (GET /schemas); latestOnly keeps each subject's
// newest.
func (r *Registry) Schemas(prefix string, deleted, latestOnly bool) []SubjectVersion {
	out := []SubjectVersion{}
	for _, name := range r.Subjects(prefix, deleted) {
		r.mu.RLock()
		vs := r.st.versions(name, deleted)
		if latestOnly && len(vs) > 0 {
			vs = vs[len(vs)-1:]
		}
		for _, v := range vs {
			out = append(out, toSubjectVersion(r.st.subjects[name][v]))
		}
		r.mu.RUnlock()
	}
	return out
}

// Versions lists a subject's versions.
func (r *Registry) Versions(subject string, deleted bool) ([]int, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	vs := r.st.versions(subject, deleted)
	if len(vs) == 0 {
		return nil, errSubjectNotFound(subject)
	}
	return vs, nil
}

// Version returns version v of subject; v < 0 (-1, "latest") is the newest.
func (r *Registry) Version(subject string, v int, deleted bool) (SubjectVersion, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	sv, err := r.st.version(subject, v, deleted)
	if err != nil {
		return SubjectVersion{}, err
	}
	return toSubjectVersion(sv), nil
}

func (s *state) version(subject string, v int, deleted bool) (*schemaValue, *Error) {
	if s.subjects[subject] == nil || (!deleted && !s.live(subject)) {
		return nil, errSubjectNotFound(subject)
	}
	if v < 0 {
		return s.latest(subject, deleted), nil
	}
	sv := s.subjects[subject][v]
	if sv == nil || (sv.Deleted && !deleted) {
		return nil, errVersionNotFound(subject, v)
	}
	return sv, nil
}

// ReferencedBy returns the ids of schemas that refer to subject's version v.
func (r *Registry) ReferencedBy(subject string, v int) ([]int, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	sv, err := r.st.version(subject, v, false)
	if err != nil {
		return nil, err
	}
	out := r.st.referencedBy(subject, sv.Version)
	if out == nil {
		out = []int{}
	}
	return out, nil
}

// SchemaByID is GET /schemas/ids/{id}.
type SchemaByID struct {
	Schema     string      `json:"schema"`
	SchemaType string      `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
}

// ByID returns the schema with id.
func (r *Registry) ByID(id int) (SchemaByID, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.st.ids[id]
	if !ok {
		return SchemaByID{}, errSchemaNotFound()
	}
	out := SchemaByID{Schema: c.Schema, References: c.References}
	if c.Type != TypeAvro {
		out.SchemaType = c.Type
	}
	return out, nil
}

// IDVersion is one subject version using an id.
type IDVersion struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// IDVersions returns the subject versions using id.
func (r *Registry) IDVersions(id int, deleted bool) ([]IDVersion, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if _, ok := r.st.ids[id]; !ok {
		return nil, errSchemaNotFound()
	}
	out := []IDVersion{}
	for name, vs := range r.st.subjects {
		for v, sv := range vs {
			if sv.ID == id && (deleted || !sv.Deleted) {
				out = append(out, IDVersion{name, v})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Subject != out[j].Subject {
			return out[i].Subject < out[j].Subject
		}
		return out[i].Version < out[j].Version
	})
	return out, nil
}

// DeleteVersion soft-deletes version v of subject (v < 0: the newest), or
// removes a soft-deleted one when permanent. It returns the version.
func (r *Registry) DeleteVersion(ctx context.Context, subject string, v int, permanent bool) (int, error) {
	if err := r.beginWrite(ctx); err != nil {
		return 0, err
	}
	defer r.writeMu.Unlock()
	r.mu.RLock()
	s := r.st
	var rec Record
	sv, err := s.version(subject, v, true)
	switch {
	case err != nil:
	case s.mode(subject) == ModeReadOnly:
		err = errNotPermitted(fmt.Sprintf("Subject %s is in read-only mode", subject))
	case permanent && !sv.Deleted:
		err = errVersionNotSoftDeleted(subject, sv.Version)
	case !permanent && sv.Deleted:
		err = errVersionSoftDeleted(subject, sv.Version)
	case len(s.referencedBy(subject, sv.Version)) > 0:
		err = errReferenceExists(fmt.Sprintf("One or more references exist to the schema {subject=%s,version=%d}", subject, sv.Version))
	case permanent:
		rec = schemaTombstone(subject, sv.Version)
	default:
		d := *sv
		d.Deleted = true
		rec = schemaRecord(d)
	}
	r.mu.RUnlock()
	if err != nil {
		return 0, err
	}
	return sv.Version, r.append(ctx, rec)
}

// DeleteSubject soft-deletes every version of subject, or removes them
// all when permanent (they must be soft-deleted first). It returns the
// versions deleted.
func (r *Registry) DeleteSubject(ctx context.Context, subject string, permanent bool) ([]int, error) {
	if err := r.beginWrite(ctx); err != nil {
		return nil, err
	}
	defer r.writeMu.Unlock()
	r.mu.RLock()
	s := r.st
	var recs []Record
	var err error
	all := s.versions(subject, true)
	live := s.versions(subject, false)
	switch {
	case len(all) == 0:
		err = errSubjectNotFound(subject)
	case s.mode(subject) == ModeReadOnly:
		err = errNotPermitted(fmt.Sprintf("Subject %s is in read-only mode", subject))
	case permanent && len(live) > 0:
		err = errSubjectNotSoftDeleted(subject)
	case !permanent && len(live) == 0:
		err = errSubjectSoftDeleted(subject)
	}
	if err == nil {
		for _, v := range all {
			if refs := s.referencedBy(subject, v); len(refs) > 0 {
				err = errReferenceExists(fmt.Sprintf("One or more references exist to the schema {subject=%s,version=%d}", subject, v))
				break
			}
		}
	}
	out := live
	if err == nil && permanent {
		out = all
		for _, v := range all {
			recs = append(recs, schemaTombstone(subject, v))
		}
		if _, ok := s.configs[subject]; ok {
			recs = append(recs, configRecord(subject, false, ""))
		}
		if _, ok := s.modes[subject]; ok {
			recs = append(recs, modeRecord(subject, false, ""))
		}
	} else if err == nil {
		for _, v := range live {
			d := *s.subjects[subject][v]
			d.Deleted = true
			recs = append(recs, schemaRecord(d))
		}
		recs = append(recs, deleteSubjectRecord(subject, live[len(live)-1]))
	}
	r.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	return out, r.append(ctx, recs...)
}

// Level returns the compatibility level of subject ("" the global one).
// A subject without its own level is 40408 unless defaultToGlobal.
func (r *Registry) Level(subject string, defaultToGlobal bool) (string, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if subject == "" {
		return r.st.level(""), nil
	}
	if l, ok := r.st.configs[subject]; ok {
		return l, nil
	}
	if defaultToGlobal {
		return r.st.level(subject), nil
	}
	return "", errSubjectLevelConfig(subject)
}

// SetLevel sets the compatibility level of subject ("" the global one).
func (r *Registry) SetLevel(ctx context.Context, subject, level string) (string, error) {
	level = strings.ToUpper(level)
	if !slices.Contains(levels, level) {
		return "", errInvalidLevel()
	}
	if err := r.beginWrite(ctx); err != nil {
		return "", err
	}
	defer r.writeMu.Unlock()
	return level, r.append(ctx, configRecord(subject, subject == "", level))
}

// DeleteLevel removes subject's level (the global one: back to BACKWARD)
// and returns the one it had.
func (r *Registry) DeleteLevel(ctx context.Context, subject string) (string, error) {
	if err := r.beginWrite(ctx); err != nil {
		return "", err
	}
	defer r.writeMu.Unlock()
	r.mu.RLock()
	prev, ok := r.st.configs[subject]
	r.mu.RUnlock()
	if !ok {
		if subject != "" {
			return "", errSubjectLevelConfig(subject)
		}
		return r.st.defLevel, nil
	}
	return prev, r.append(ctx, configRecord(subject, subject == "", ""))
}

// Mode returns the mode of subject ("" the global one); 40409 for a
// subject without its own unless defaultToGlobal.
func (r *Registry) Mode(subject string, defaultToGlobal bool) (string, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if subject == "" {
		return r.st.mode(""), nil
	}
	if m, ok := r.st.modes[subject]; ok {
		return m, nil
	}
	if defaultToGlobal {
		return r.st.mode(subject), nil
	}
	return "", errSubjectLevelMode(subject)
}

// SetMode sets the mode of subject ("" the global one). IMPORT needs the
// subject (all subjects, for the global mode) empty unless force.
func (r *Registry) SetMode(ctx context.Context, subject, mode string, force bool) (string, error) {
	mode = strings.ToUpper(mode)
	if !slices.Contains(modes, mode) {
		return "", errInvalidMode()
	}
	if err := r.beginWrite(ctx); err != nil {
		return "", err
	}
	defer r.writeMu.Unlock()
	if mode == ModeImport && !force {
		r.mu.RLock()
		nonEmpty := false
		if subject == "" {
			nonEmpty = len(r.st.subjects) > 0
		} else {
			nonEmpty = len(r.st.subjects[subject]) > 0
		}
		r.mu.RUnlock()
		if nonEmpty {
			return "", errNotPermitted("Cannot import since found existing subjects; set force=true to import anyway")
		}
	}
	return mode, r.append(ctx, modeRecord(subject, subject == "", mode))
}

// DeleteMode removes subject's mode and returns the one it had.
func (r *Registry) DeleteMode(ctx context.Context, subject string) (string, error) {
	if err := r.beginWrite(ctx); err != nil {
		return "", err
	}
	defer r.writeMu.Unlock()
	r.mu.RLock()
	prev, ok := r.st.modes[subject]
	r.mu.RUnlock()
	if !ok {
		if subject != "" {
			return "", errSubjectLevelMode(subject)
		}
		return ModeReadWrite, nil
	}
	return prev, r.append(ctx, modeRecord(subject, subject == "", ""))
}

// Check tests a schema against subject's version v (v < 0 the newest; v
// == 0 every version the level says) and returns why it is not compatible.
func (r *Registry) Check(subject string, v int, req SchemaRequest, normalize bool) ([]string, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s := r.st
	_, p, err := s.requestContent(req, normalize)
	if err != nil {
		return nil, err
	}
	if v == 0 {
		if len(s.versions(subject, false)) == 0 {
			return nil, nil // nothing to be incompatible with
		}
		earlier, err := s.earlierParsed(subject)
		if err != nil {
			return nil, errStore(err)
		}
		return compatible(s.level(subject), p, earlier), nil
	}
	sv, verr := s.version(subject, v, false)
	if verr != nil {
		return nil, verr
	}
	old, err := s.parse(content{Type: typeOrAvro(sv.SchemaType), Schema: sv.Schema, References: sv.References})
	if err != nil {
		return nil, errStore(err)
	}
	level := s.level(subject)
	if strings.HasSuffix(level, "_TRANSITIVE") {
		level = strings.TrimSuffix(level, "_TRANSITIVE")
	}
	return compatible(level, p, []*parsed{old}), nil
}
