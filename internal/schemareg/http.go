package schemareg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// ContentType is what the registry answers with (and accepts, beside
// application/json and application/octet-stream, as Confluent does).
const ContentType = "application/vnd.schemaregistry.v1+json"

// maxBody bounds a request body (a schema with its references list).
const maxBody = 16 << 20

// Route is a request as the API routed it: what a Middleware decides on.
// Subject and ID are the path's values exactly as the handler reads them
// (unescaped once), so an authorizer checks the subject that is served.
type Route struct {
	Pattern string // the route's pattern, e.g. "POST /subjects/{subject}/versions"
	Subject string // {subject}, "" where the route has none
	ID      string // {id}, "" where the route has none
	Write   bool   // the request changes the registry (and goes to its writer)
}

// Middleware wraps every routed request: it may answer w itself (a refusal,
// a forward) or call next, with a request of its own (WithSubjectFilter)
// or a wrapped writer. Requests no route matches get 404 without it.
type Middleware func(rt Route, w http.ResponseWriter, r *http.Request, next http.Handler)

// route is one endpoint of the API.
type route struct {
	pattern string
	write   bool
	serve   func(*api, http.ResponseWriter, *http.Request)
}

func static(v any) func(*api, http.ResponseWriter, *http.Request) {
	return func(_ *api, w http.ResponseWriter, _ *http.Request) { writeJSON(w, v) }
}

// routes is the API: Confluent's endpoints (docs/schema-registry.md).
var routes = []route{
	{"GET /{$}", false, static(map[string]any{})},
	{"GET /subjects", false, (*api).subjects},
	{"POST /subjects/{subject}", false, (*api).lookUp},
	{"DELETE /subjects/{subject}", true, (*api).deleteSubject},
	{"GET /subjects/{subject}/versions", false, (*api).versions},
	{"POST /subjects/{subject}/versions", true, (*api).register},
	{"GET /subjects/{subject}/versions/{version}", false, (*api).version},
	{"DELETE /subjects/{subject}/versions/{version}", true, (*api).deleteVersion},
	{"GET /subjects/{subject}/versions/{version}/schema", false, (*api).versionSchema},
	{"GET /subjects/{subject}/versions/{version}/referencedby", false, (*api).referencedBy},
	{"GET /schemas", false, (*api).schemas},
	{"GET /schemas/ids/{id}", false, (*api).byID},
	{"GET /schemas/ids/{id}/schema", false, (*api).byIDSchema},
	{"GET /schemas/ids/{id}/subjects", false, (*api).idSubjects},
	{"GET /schemas/ids/{id}/versions", false, (*api).idVersions},
	{"GET /schemas/types", false, static([]string{TypeJSON, TypeProtobuf, TypeAvro})},
	{"GET /config", false, (*api).getConfig},
	{"PUT /config", true, (*api).putConfig},
	{"DELETE /config", true, (*api).deleteConfig},
	{"GET /config/{subject}", false, (*api).getConfig},
	{"PUT /config/{subject}", true, (*api).putConfig},
	{"DELETE /config/{subject}", true, (*api).deleteConfig},
	{"GET /mode", false, (*api).getMode},
	{"PUT /mode", true, (*api).putMode},
	{"DELETE /mode", true, (*api).deleteMode},
	{"GET /mode/{subject}", false, (*api).getMode},
	{"PUT /mode/{subject}", true, (*api).putMode},
	{"DELETE /mode/{subject}", true, (*api).deleteMode},
	{"POST /compatibility/subjects/{subject}/versions/{version}", false, (*api).check},
	{"POST /compatibility/subjects/{subject}/versions", false, (*api).check},
	{"GET /contexts", false, static([]string{"."})},
}

// Patterns lists the API's route patterns, for a Middleware's tests.
func Patterns() []string {
	out := make([]string, len(routes))
	for i, rt := range routes {
		out[i] = rt.pattern
	}
	return out
}

// Handler serves the Confluent Schema Registry REST API for reg; mw, if
// not nil, wraps every routed request.
func Handler(reg *Registry, mw Middleware) http.Handler {
	h := &api{reg: reg}
	mux := http.NewServeMux()
	for _, rt := range routes {
		next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rt.serve(h, w, r) })
		mux.HandleFunc(rt.pattern, func(w http.ResponseWriter, r *http.Request) {
			if mw == nil {
				next(w, r)
				return
			}
			mw(Route{Pattern: rt.pattern, Subject: r.PathValue("subject"), ID: r.PathValue("id"), Write: rt.write}, w, r, next)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			writeError(w, &Error{http.StatusNotFound, http.StatusNotFound, "HTTP 404 Not Found"})
			return
		}
		mux.ServeHTTP(w, r)
	})
}

type api struct{ reg *Registry }

// subjectFilterKey carries a request's subject filter (WithSubjectFilter).
type subjectFilterKey struct{}

// WithSubjectFilter makes the listings of a request (GET /subjects, GET
// /schemas) keep only the subjects keep accepts: the node's authorizer
// cuts them to what the principal may describe.
func WithSubjectFilter(ctx context.Context, keep func(subject string) bool) context.Context {
	return context.WithValue(ctx, subjectFilterKey{}, keep)
}

func subjectFilter(r *http.Request) func(string) bool {
	if f, ok := r.Context().Value(subjectFilterKey{}).(func(string) bool); ok {
		return f
	}
	return nil
}

// WriteError answers err as Confluent does: its status and a JSON body
// with error_code and message.
func WriteError(w http.ResponseWriter, err error) { writeError(w, err) }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", ContentType)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{500, 50001, err.Error()}
	}
	w.Header().Set("Content-Type", ContentType)
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(e)
}

func boolParam(r *http.Request, name string) bool {
	v, _ := strconv.ParseBool(r.URL.Query().Get(name))
	return v
}

// versionParam parses {version}: 1..2^31-1, "latest" or -1 (the newest,
// returned as -1).
func versionParam(r *http.Request) (int, error) {
	s := r.PathValue("version")
	if s == "latest" {
		return -1, nil
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil || v == 0 || v < -1 || v > math.MaxInt32 {
		return 0, errInvalidVersion(s)
	}
	return int(v), nil
}

func idParam(r *http.Request) (int, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 32)
	if err != nil || id <= 0 {
		return 0, errSchemaNotFound()
	}
	return int(id), nil
}

func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	if err := dec.Decode(v); err != nil {
		return &Error{http.StatusBadRequest, http.StatusBadRequest, fmt.Sprintf("Malformed request body: %v", err)}
	}
	return nil
}

func (h *api) schemas(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	all := h.reg.Schemas(q.Get("subjectPrefix"), boolParam(r, "deleted"), boolParam(r, "latestOnly"))
	if keep := subjectFilter(r); keep != nil {
		all = slices.DeleteFunc(all, func(sv SubjectVersion) bool { return !keep(sv.Subject) })
	}
	offset, _ := strconv.Atoi(q.Get("offset"))
	limit, _ := strconv.Atoi(q.Get("limit"))
	all = all[min(max(offset, 0), len(all)):]
	if limit > 0 && limit < len(all) {
		all = all[:limit]
	}
	writeJSON(w, all)
}

func (h *api) subjects(w http.ResponseWriter, r *http.Request) {
	subjects := h.reg.Subjects(r.URL.Query().Get("subjectPrefix"), boolParam(r, "deleted"))
	if keep := subjectFilter(r); keep != nil {
		subjects = slices.DeleteFunc(subjects, func(s string) bool { return !keep(s) })
	}
	writeJSON(w, subjects)
}

func (h *api) register(w http.ResponseWriter, r *http.Request) {
	var req SchemaRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if strings.TrimSpace(req.Schema) == "" {
		writeError(w, errInvalidSchemaErr("Empty schema"))
		return
	}
	id, err := h.reg.Register(r.Context(), r.PathValue("subject"), req, boolParam(r, "normalize"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, map[string]int{"id": id})
}

func (h *api) lookUp(w http.ResponseWriter, r *http.Request) {
	var req SchemaRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	sv, err := h.reg.LookUp(r.PathValue("subject"), req, boolParam(r, "normalize"), boolParam(r, "deleted"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, sv)
}

func (h *api) versions(w http.ResponseWriter, r *http.Request) {
	vs, err := h.reg.Versions(r.PathValue("subject"), boolParam(r, "deleted"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, vs)
}

func (h *api) subjectVersion(r *http.Request) (SubjectVersion, error) {
	v, err := versionParam(r)
	if err != nil {
		return SubjectVersion{}, err
	}
	return h.reg.Version(r.PathValue("subject"), v, boolParam(r, "deleted"))
}

func (h *api) version(w http.ResponseWriter, r *http.Request) {
	sv, err := h.subjectVersion(r)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, sv)
}

func (h *api) versionSchema(w http.ResponseWriter, r *http.Request) {
	sv, err := h.subjectVersion(r)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", ContentType)
	io.WriteString(w, sv.Schema)
}

func (h *api) referencedBy(w http.ResponseWriter, r *http.Request) {
	v, err := versionParam(r)
	if err != nil {
		writeError(w, err)
		return
	}
	ids, err := h.reg.ReferencedBy(r.PathValue("subject"), v)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, ids)
}

func (h *api) deleteVersion(w http.ResponseWriter, r *http.Request) {
	v, err := versionParam(r)
	if err != nil {
		writeError(w, err)
		return
	}
	got, err := h.reg.DeleteVersion(r.Context(), r.PathValue("subject"), v, boolParam(r, "permanent"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, got)
}

func (h *api) deleteSubject(w http.ResponseWriter, r *http.Request) {
	vs, err := h.reg.DeleteSubject(r.Context(), r.PathValue("subject"), boolParam(r, "permanent"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, vs)
}

func (h *api) byID(w http.ResponseWriter, r *http.Request) {
	id, err := idParam(r)
	if err == nil {
		var s SchemaByID
		if s, err = h.reg.ByID(id); err == nil {
			writeJSON(w, s)
			return
		}
	}
	writeError(w, err)
}

func (h *api) byIDSchema(w http.ResponseWriter, r *http.Request) {
	id, err := idParam(r)
	if err == nil {
		var s SchemaByID
		if s, err = h.reg.ByID(id); err == nil {
			w.Header().Set("Content-Type", ContentType)
			io.WriteString(w, s.Schema)
			return
		}
	}
	writeError(w, err)
}

func (h *api) idVersionsOf(r *http.Request) ([]IDVersion, error) {
	id, err := idParam(r)
	if err != nil {
		return nil, err
	}
	vs, err := h.reg.IDVersions(id, boolParam(r, "deleted"))
	if keep := subjectFilter(r); keep != nil {
		vs = slices.DeleteFunc(vs, func(v IDVersion) bool { return !keep(v.Subject) })
	}
	return vs, err
}

func (h *api) idSubjects(w http.ResponseWriter, r *http.Request) {
	vs, err := h.idVersionsOf(r)
	if err != nil {
		writeError(w, err)
		return
	}
	subjects := []string{}
	for _, v := range vs {
		if len(subjects) == 0 || subjects[len(subjects)-1] != v.Subject {
			subjects = append(subjects, v.Subject)
		}
	}
	writeJSON(w, subjects)
}

func (h *api) idVersions(w http.ResponseWriter, r *http.Request) {
	vs, err := h.idVersionsOf(r)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, vs)
}

func (h *api) getConfig(w http.ResponseWriter, r *http.Request) {
	l, err := h.reg.Level(r.PathValue("subject"), boolParam(r, "defaultToGlobal"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, map[string]string{"compatibilityLevel": l})
}

func (h *api) putConfig(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Compatibility string `json:"compatibility"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	l, err := h.reg.SetLevel(r.Context(), r.PathValue("subject"), req.Compatibility)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, map[string]string{"compatibility": l})
}

func (h *api) deleteConfig(w http.ResponseWriter, r *http.Request) {
	l, err := h.reg.DeleteLevel(r.Context(), r.PathValue("subject"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, map[string]string{"compatibilityLevel": l})
}

func (h *api) getMode(w http.ResponseWriter, r *http.Request) {
	m, err := h.reg.Mode(r.PathValue("subject"), boolParam(r, "defaultToGlobal"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, map[string]string{"mode": m})
}

func (h *api) putMode(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Mode string `json:"mode"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	m, err := h.reg.SetMode(r.Context(), r.PathValue("subject"), req.Mode, boolParam(r, "force"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, map[string]string{"mode": m})
}

func (h *api) deleteMode(w http.ResponseWriter, r *http.Request) {
	m, err := h.reg.DeleteMode(r.Context(), r.PathValue("subject"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, map[string]string{"mode": m})
}

func (h *api) check(w http.ResponseWriter, r *http.Request) {
	v := 0 // every version the level names
	if r.PathValue("version") != "" {
		var err error
		if v, err = versionParam(r); err != nil {
			writeError(w, err)
			return
		}
	}
	var req SchemaRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	msgs, err := h.reg.Check(r.PathValue("subject"), v, req, boolParam(r, "normalize"))
	if err != nil {
		writeError(w, err)
		return
	}
	out := map[string]any{"is_compatible": len(msgs) == 0}
	if boolParam(r, "verbose") {
		if msgs == nil {
			msgs = []string{}
		}
		out["messages"] = msgs
	}
	writeJSON(w, out)
}
