package app

// The schema registry on a node: its records live in _schemas (one
// partition, compacted, replicated like the other internal topics). Every
// node follows that partition from its leader with Fetch, as a consumer
// would, and applies each record up to the high watermark to its own
// in-memory registry, which serves every read. Writes are planned and
// appended by one writer, the partition's leader: another node forwards a
// write to the leader's HTTP listener (the address in its broker
// registration), and answers once its own copy has the result.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/cluster"
	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/handler"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/schemareg"
)

// schemasSpec is _schemas as cluster.Topics creates it on the first
// write: one partition (the log's order is the registry's), compacted
// (the latest record of a key is its state), kafkastore.topic.replication.factor
// replicas capped at the cluster's nodes.
var schemasSpec = cluster.InternalTopic{
	Name: metadata.SchemasTopic, ReplicationFactor: "kafkastore.topic.replication.factor",
}

// Headers of the registry's node-to-node forwarding.
const (
	// forwardedHeader marks a write another node forwarded: it is served
	// here or refused, never forwarded again.
	forwardedHeader = "X-Berth-Forwarded-By"
	// offsetHeader is the _schemas offset a write's answer reflects: the
	// forwarding node answers once its own copy has reached it.
	offsetHeader = "X-Berth-Schemas-Offset"
)

// errNotWriter: a write reached a node that does not lead _schemas.
var errNotWriter = &schemareg.Error{Status: http.StatusInternalServerError, Code: 50004,
	Message: "This node is not the schema registry's writer (the leader of _schemas); retry: writes are forwarded to it"}

// schemaStore is a node's registry and its follower of _schemas.
type schemaStore struct {
	n   *Node
	reg *schemareg.Registry
	log *slog.Logger

	mu      sync.Mutex
	next    int64         // the offset of the next record to apply
	changed chan struct{} // closed and replaced when next moves

	stop chan struct{}
	done chan struct{}

	transportOnce sync.Once
	transport     *http.Transport // tlsTransport

	// Metrics.
	registrations  atomic.Int64 // writes answered by this node as the writer
	forwarded      atomic.Int64
	incompatible   atomic.Int64
	gateRefusals   sync.Map // topic → *atomic.Int64
	recordsApplied atomic.Int64
}

// startSchemas makes the node's registry and starts following _schemas.
func (n *Node) startSchemas(cfg *config.Config) error {
	s := &schemaStore{n: n, log: n.log.With("component", "schema-registry"), changed: make(chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{})}
	s.reg = schemareg.New(s)
	if err := s.reg.SetDefaultLevel(cfg.Get("schema.compatibility.level")); err != nil {
		return fmt.Errorf("schema.compatibility.level: %w", err)
	}
	n.schemas = s
	go s.follow()
	return nil
}

func (s *schemaStore) close() {
	close(s.stop)
	<-s.done
	s.transportOnce.Do(func() {}) // orders the read below after tlsTransport's write
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
}

// applied returns the offset of the next record to apply and the channel
// closed when it moves.
func (s *schemaStore) applied() (int64, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next, s.changed
}

func (s *schemaStore) advance(next int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if next > s.next {
		s.next = next
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

// waitApplied returns once the registry has applied every record before
// off, or fails when ctx ends or after 15 s.
func (s *schemaStore) waitApplied(ctx context.Context, off int64) error {
	timer := time.NewTimer(15 * time.Second)
	defer timer.Stop()
	for {
		next, ch := s.applied()
		if next >= off {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return &schemareg.Error{Status: http.StatusInternalServerError, Code: 50002,
				Message: fmt.Sprintf("Operation timed out: this node's registry reached offset %d of _schemas, not %d", next, off)}
		case <-s.stop:
			return errors.New("node shutting down")
		}
	}
}

// follow reads _schemas from its leader and applies it, until close.
func (s *schemaStore) follow() {
	defer close(s.done)
	var lastErr string
	var lastWarn time.Time
	for {
		select {
		case <-s.stop:
			return
		default:
		}
		err := s.fetch()
		if err == nil {
			lastErr = ""
			continue
		}
		select {
		case <-s.stop:
			return // the node is stopping: its fetch was cut short
		default:
		}
		// No topic yet is the normal state before the first write; other
		// errors (no leader during a failover, a refused fetch) get a
		// warning every 10 s at most.
		switch msg := err.Error(); {
		case errors.Is(err, errNoSchemasTopic):
		case time.Since(lastWarn) > 10*time.Second:
			lastWarn, lastErr = time.Now(), msg
			s.log.Warn("following _schemas: this node's schema registry may be behind", "err", err)
		case msg != lastErr:
			lastErr = msg
			s.log.Debug("following _schemas", "err", err)
		}
		select {
		case <-s.stop:
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// errNoSchemasTopic: _schemas does not exist yet (no write so far).
var errNoSchemasTopic = errors.New("_schemas does not exist yet")

// fetch reads once from the leader of _schemas, waiting up to 500 ms
// for records past the registry's, and applies what it gets.
func (s *schemaStore) fetch() error {
	im := s.n.ctrl.Image()
	t := im.Topic(metadata.SchemasTopic)
	if t == nil {
		return errNoSchemasTopic
	}
	mp := t.Partition(0)
	if mp == nil || mp.Leader == metadata.NoLeader {
		return errors.New("_schemas has no leader")
	}
	b, ok := im.Broker(mp.Leader)
	if !ok {
		return fmt.Errorf("_schemas leader %d is not registered", mp.Leader)
	}
	from, _ := s.applied()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 13
	req.ReplicaID = -1
	req.MaxWaitMillis = 500
	req.MinBytes = 1
	req.MaxBytes = 8 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = t.ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = 0
	rp.FetchOffset = from
	rp.PartitionMaxBytes = 8 << 20
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	addr := netAddr(b.Host, b.Port)
	resp, err := s.n.peers.Request(ctx, addr, req, 10*time.Second)
	if err != nil {
		return err
	}
	fr := resp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
		return err
	}
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		return errors.New("fetch of _schemas: malformed response")
	}
	p := fr.Topics[0].Partitions[0]
	if p.ErrorCode == kerr.OffsetOutOfRange.Code {
		// The log restarted below us (it is compacted, never truncated
		// at its start, so this is a log recreated): read it again.
		s.log.Warn("_schemas offset out of range: reloading the registry from the start", "offset", from, "log_start", p.LogStartOffset)
		s.reg.Reset()
		s.mu.Lock()
		s.next = max(p.LogStartOffset, 0)
		s.mu.Unlock()
		return nil
	}
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return err
	}
	scratch := batch.GetScratch()
	defer batch.PutScratch(scratch)
	var applyErr error
	next, err := batch.Each(p.RecordBatches, from, scratch, func(off int64, r batch.Record) {
		rec := schemareg.Record{Key: clone(r.Key), Value: clone(r.Value)}
		if err := s.reg.Apply(rec); err != nil && applyErr == nil {
			applyErr = fmt.Errorf("offset %d: %w", off, err)
		}
		s.recordsApplied.Add(1)
	})
	if applyErr != nil {
		// A record Berth cannot read (another tool wrote it) is skipped,
		// as Confluent's reader does.
		s.log.Warn("skipping a _schemas record", "err", applyErr)
	}
	// Only committed records came (a consumer's fetch stops at the high
	// watermark), and next is past the last of them: never past an
	// offset not returned. An empty answer below the high watermark (a
	// fetch throttled by a quota comes without data) moves nothing.
	s.advance(next)
	if err == nil && fr.ThrottleMillis > 0 {
		// Over a consumer quota: wait as a client would, then go on.
		select {
		case <-s.stop:
		case <-time.After(time.Duration(fr.ThrottleMillis) * time.Millisecond):
		}
	}
	return err
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func netAddr(host string, port int32) string {
	return host + ":" + strconv.Itoa(int(port))
}

// Prepare implements schemareg.Preparer: this node must lead _schemas
// and its registry must have applied the whole log, so the write is
// planned on every record before it.
func (s *schemaStore) Prepare(ctx context.Context) error {
	part, err := s.writer(ctx)
	if err != nil {
		return err
	}
	return s.waitApplied(ctx, part.LogEndOffset())
}

// writer returns this node's _schemas partition once it leads it. The
// metadata names a new leader (the topic just created, a failover) a
// moment before the replica has taken the role: while it still names
// this node, wait up to 5 s for that.
func (s *schemaStore) writer(ctx context.Context) (*replica.Partition, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		part := s.n.replicas.Get(metadata.SchemasTopic, 0)
		if part != nil && part.IsLeader() {
			return part, nil
		}
		t := s.n.ctrl.Image().Topic(metadata.SchemasTopic)
		if t == nil || t.Partition(0) == nil || t.Partition(0).Leader != s.n.nodeID || time.Now().After(deadline) {
			return nil, errNotWriter
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Append implements schemareg.Log: the records go into _schemas as one
// batch; it returns once every in-sync replica has them and this node's
// registry has applied them.
func (s *schemaStore) Append(ctx context.Context, recs []schemareg.Record) error {
	part, err := s.writer(ctx)
	if err != nil {
		return err
	}
	kvs := make([]batch.KV, len(recs))
	for i, r := range recs {
		kvs[i] = batch.KV{Key: r.Key, Value: r.Value}
	}
	res, err := part.Append(batch.Build(kvs, time.Now().UnixMilli()), nil)
	if err != nil {
		return err
	}
	if err := part.WaitDurable(res.Durable, res.Gen, time.Now().Add(15*time.Second), true); err != nil {
		return err
	}
	return s.waitApplied(ctx, res.BaseOffset+int64(len(recs)))
}

// ensureTopic creates _schemas if it does not exist yet.
func (s *schemaStore) ensureTopic(ctx context.Context) (*metadata.Topic, error) {
	return s.n.topics.EnsureInternal(ctx, schemasSpec)
}

// handler serves the registry's REST API: each routed request is
// authorized (route), reads are served from this node's copy, writes
// here when this node leads _schemas and forwarded to the leader
// otherwise.
func (s *schemaStore) handler() http.Handler {
	return schemareg.Handler(s.reg, s.route)
}

// route is the registry's schemareg.Middleware.
func (s *schemaStore) route(rt schemareg.Route, w http.ResponseWriter, r *http.Request, local http.Handler) {
	a, ok := actionOf(rt)
	r, ok = s.authorize(w, r, rt, a, ok)
	if !ok {
		return
	}
	if !rt.Write {
		local.ServeHTTP(w, r)
		return
	}
	t, err := s.ensureTopic(r.Context())
	if err != nil {
		writeRegistryError(w, &schemareg.Error{Status: http.StatusInternalServerError, Code: 50004,
			Message: "Cannot create _schemas, the registry's topic: " + err.Error()})
		return
	}
	leader := metadata.NoLeader
	if p := t.Partition(0); p != nil {
		leader = p.Leader
	}
	if leader == s.n.nodeID || r.Header.Get(forwardedHeader) != "" {
		s.serveWrite(local, w, r, a)
		return
	}
	b, ok := s.n.ctrl.Image().Broker(leader)
	if !ok || b.HTTP == "" {
		writeRegistryError(w, &schemareg.Error{Status: http.StatusInternalServerError, Code: 50004,
			Message: fmt.Sprintf("Unknown leader: _schemas is led by node %d, whose HTTP listener is not known; retry", leader)})
		return
	}
	s.forward(w, r, b.HTTP)
}

// serveWrite serves a write here, adds the _schemas offset its answer
// reflects, and records a change made in the audit trail.
func (s *schemaStore) serveWrite(local http.Handler, w http.ResponseWriter, r *http.Request, a registryAction) {
	s.registrations.Add(1)
	ow := &offsetWriter{ResponseWriter: w, s: s}
	local.ServeHTTP(ow, r)
	if ow.status < 300 && a.change != "" {
		s.audit(r, requestPrincipal(r), a, true, "")
	}
}

// offsetWriter adds offsetHeader to a write's answer.
type offsetWriter struct {
	http.ResponseWriter
	s      *schemaStore
	done   bool
	status int
}

func (o *offsetWriter) WriteHeader(code int) {
	if !o.done {
		o.done = true
		o.status = code
		next, _ := o.s.applied()
		o.Header().Set(offsetHeader, strconv.FormatInt(next, 10))
		if code == http.StatusConflict {
			o.s.incompatible.Add(1)
		}
	}
	o.ResponseWriter.WriteHeader(code)
}

func (o *offsetWriter) Write(b []byte) (int, error) {
	if !o.done {
		o.WriteHeader(http.StatusOK)
	}
	return o.ResponseWriter.Write(b)
}

// forward sends a write to the writer's HTTP listener and answers with
// its answer once this node's registry has caught up with it.
func (s *schemaStore) forward(w http.ResponseWriter, r *http.Request, addr string) {
	s.forwarded.Add(1)
	scheme := "http"
	transport := http.DefaultTransport
	if st := s.n.httpTLS; st != nil {
		scheme = "https"
		transport = s.tlsTransport()
	}
	target := &url.URL{Scheme: scheme, Host: addr}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = r.Host
			pr.Out.Header.Set(forwardedHeader, strconv.Itoa(int(s.n.nodeID)))
		},
		Transport: transport,
		ModifyResponse: func(resp *http.Response) error {
			if off, err := strconv.ParseInt(resp.Header.Get(offsetHeader), 10, 64); err == nil {
				ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
				defer cancel()
				_ = s.waitApplied(ctx, off) // best effort: the write is done either way
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			writeRegistryError(w, &schemareg.Error{Status: http.StatusInternalServerError, Code: 50003,
				Message: fmt.Sprintf("Error while forwarding the request to the primary (%s): %v", addr, err)})
		},
	}
	proxy.ServeHTTP(w, r)
}

// tlsTransport returns the transport for forwarding over TLS: one for
// the node, so connections to the writer are kept alive and reused; each
// new connection takes the node's certificates as they are then (they
// are reloaded when their files change).
func (s *schemaStore) tlsTransport() http.RoundTripper {
	s.transportOnce.Do(func() {
		s.transport = &http.Transport{
			DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				host, _, _ := splitHostPort(addr)
				d := tls.Dialer{Config: s.n.httpTLS.ClientConfig(host, true)}
				return d.DialContext(ctx, network, addr)
			},
			MaxIdleConnsPerHost: 8,
			IdleConnTimeout:     90 * time.Second,
		}
	})
	return s.transport
}

func splitHostPort(addr string) (string, string, error) {
	u, err := url.Parse("//" + addr)
	if err != nil {
		return "", "", err
	}
	return u.Hostname(), u.Port(), nil
}

func writeRegistryError(w http.ResponseWriter, e *schemareg.Error) {
	schemareg.WriteError(w, e)
}

// Check implements handler.SchemaGate.
func (s *schemaStore) Check(t *metadata.Topic, records []byte, scratch *batch.Scratch) error {
	type side struct {
		on    bool
		check schemareg.GateCheck
	}
	payload := t.Configs["berth.schema.validation.payload"] == "true"
	sides := [2]side{
		{on: boolConf(t, "confluent.key.schema.validation"), check: schemareg.GateCheck{Topic: t.Name, Key: true,
			Strategy: strategy(t, "confluent.key.subject.name.strategy"), Payload: payload}},
		{on: boolConf(t, "confluent.value.schema.validation"), check: schemareg.GateCheck{Topic: t.Name,
			Strategy: strategy(t, "confluent.value.subject.name.strategy"), Payload: payload}},
	}
	var refused []handler.RecordError
	// The id that passed last, per side: the records of a batch mostly
	// carry one id, so the registry is asked once per batch and id (not
	// with payload checks, which look at every record).
	passed := [2]int{-1, -1}
	index := int32(0)
	err := batch.Visit(records, scratch, func(_ *batch.Header, r *batch.Record) bool {
		defer func() { index++ }()
		for i, sd := range sides {
			if !sd.on {
				continue
			}
			data, name := r.Value, schemareg.ValueSchemaIDHeader
			if i == 0 {
				data, name = r.Key, schemareg.KeySchemaIDHeader
			}
			var header []byte
			for _, h := range r.Headers {
				if h.Key == name {
					header = h.Value
				}
			}
			id, ok := schemareg.WireID(data, header)
			if ok && !sd.check.Payload && id == passed[i] {
				continue
			}
			if msg := s.reg.CheckWire(sd.check, data, header); msg != "" {
				refused = append(refused, handler.RecordError{Index: index, Message: msg})
				return true
			}
			passed[i] = id
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("%w: %v", kerr.CorruptMessage, err)
	}
	if len(refused) == 0 {
		return nil
	}
	c, _ := s.gateRefusals.LoadOrStore(t.Name, new(atomic.Int64))
	c.(*atomic.Int64).Add(int64(len(refused)))
	return &handler.InvalidRecords{Topic: t.Name, Records: refused}
}

func boolConf(t *metadata.Topic, name string) bool {
	v := t.Configs[name]
	return v == "true" || v == "TRUE" || v == "True"
}

func strategy(t *metadata.Topic, name string) string {
	if v, ok := t.Configs[name]; ok {
		if s := config.SubjectStrategy(v); s != "" {
			return s
		}
	}
	return schemareg.TopicNameStrategy
}

var (
	descSRWrites       = prometheus.NewDesc("berth_schema_registry_writes_total", "Registry writes (registrations, deletions, config and mode changes) this node served as the writer (the leader of _schemas).", nil, nil)
	descSRForwarded    = prometheus.NewDesc("berth_schema_registry_forwarded_total", "Registry writes this node forwarded to the writer.", nil, nil)
	descSRIncompatible = prometheus.NewDesc("berth_schema_registry_incompatible_total", "Registrations this node refused as incompatible (409) as the writer.", nil, nil)
	descSRApplied      = prometheus.NewDesc("berth_schema_registry_records_applied_total", "_schemas records this node's registry applied.", nil, nil)
	descSROffset       = prometheus.NewDesc("berth_schema_registry_applied_offset", "The _schemas offset this node's registry has applied up to.", nil, nil)
	descSRSubjects     = prometheus.NewDesc("berth_schema_registry_subjects", "Subjects in the registry (not deleted).", nil, nil)
	descSRGate         = prometheus.NewDesc("berth_schema_validation_refused_records_total", "Records refused by the publish path's schema check (confluent.*.schema.validation), by topic, on this node.", []string{"topic"}, nil)
)

// schemaCollector reports the registry's metrics at scrape time.
type schemaCollector struct{ s *schemaStore }

func (c schemaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSRWrites, descSRForwarded, descSRIncompatible, descSRApplied, descSROffset, descSRSubjects, descSRGate} {
		ch <- d
	}
}

func (c schemaCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	ch <- prometheus.MustNewConstMetric(descSRWrites, prometheus.CounterValue, float64(s.registrations.Load()))
	ch <- prometheus.MustNewConstMetric(descSRForwarded, prometheus.CounterValue, float64(s.forwarded.Load()))
	ch <- prometheus.MustNewConstMetric(descSRIncompatible, prometheus.CounterValue, float64(s.incompatible.Load()))
	ch <- prometheus.MustNewConstMetric(descSRApplied, prometheus.CounterValue, float64(s.recordsApplied.Load()))
	next, _ := s.applied()
	ch <- prometheus.MustNewConstMetric(descSROffset, prometheus.GaugeValue, float64(next))
	ch <- prometheus.MustNewConstMetric(descSRSubjects, prometheus.GaugeValue, float64(len(s.reg.Subjects("", false))))
	s.gateRefusals.Range(func(k, v any) bool {
		ch <- prometheus.MustNewConstMetric(descSRGate, prometheus.CounterValue, float64(v.(*atomic.Int64).Load()), k.(string))
		return true
	})
}

// registryAction is what a registry request does, for the authorizer:
// an operation on a subject (Berth's SUBJECT resource), on the cluster
// (the global config and mode), or nothing to check.
type registryAction struct {
	op      kmsg.ACLOperation
	typ     kmsg.ACLResourceType
	name    string
	check   bool
	filter  bool   // a listing: answered with the subjects the principal may describe
	byID    bool   // /schemas/ids/{id}...: READ on one of the id's subjects
	change  string // the audit trail's method, for a change: schema-registry.<what>
	subject string
}

// actionOf maps a routed registry request to its action; ok is false for
// a route it does not know, which is refused (a test keeps every route
// known).
func actionOf(rt schemareg.Route) (a registryAction, ok bool) {
	sub := func(op kmsg.ACLOperation, change string) registryAction {
		return registryAction{op: op, typ: metadata.ACLResourceTypeSubject, name: rt.Subject, check: true, change: change, subject: rt.Subject}
	}
	cluster := func(op kmsg.ACLOperation, change string) registryAction {
		return registryAction{op: op, typ: kmsg.ACLResourceTypeCluster, name: metadata.ClusterResourceName, check: true, change: change}
	}
	switch rt.Pattern {
	case "GET /{$}", "GET /schemas/types", "GET /contexts":
		return registryAction{}, true
	case "GET /subjects", "GET /schemas":
		return registryAction{filter: true}, true
	case "GET /schemas/ids/{id}", "GET /schemas/ids/{id}/schema", "GET /schemas/ids/{id}/subjects", "GET /schemas/ids/{id}/versions":
		return registryAction{byID: true, filter: true}, true
	case "POST /subjects/{subject}", "GET /subjects/{subject}/versions", "GET /subjects/{subject}/versions/{version}",
		"GET /subjects/{subject}/versions/{version}/schema", "GET /subjects/{subject}/versions/{version}/referencedby",
		"POST /compatibility/subjects/{subject}/versions/{version}", "POST /compatibility/subjects/{subject}/versions":
		return sub(kmsg.ACLOperationRead, ""), true
	case "POST /subjects/{subject}/versions":
		return sub(kmsg.ACLOperationWrite, "RegisterSchema"), true
	case "DELETE /subjects/{subject}":
		return sub(kmsg.ACLOperationDelete, "DeleteSubject"), true
	case "DELETE /subjects/{subject}/versions/{version}":
		return sub(kmsg.ACLOperationDelete, "DeleteSchemaVersion"), true
	case "GET /config", "GET /mode":
		return cluster(kmsg.ACLOperationDescribeConfigs, ""), true
	case "PUT /config":
		return cluster(kmsg.ACLOperationAlterConfigs, "UpdateCompatibility"), true
	case "DELETE /config":
		return cluster(kmsg.ACLOperationAlterConfigs, "DeleteCompatibility"), true
	case "PUT /mode":
		return cluster(kmsg.ACLOperationAlterConfigs, "UpdateMode"), true
	case "DELETE /mode":
		return cluster(kmsg.ACLOperationAlterConfigs, "DeleteMode"), true
	case "GET /config/{subject}", "GET /mode/{subject}":
		return sub(kmsg.ACLOperationDescribeConfigs, ""), true
	case "PUT /config/{subject}":
		return sub(kmsg.ACLOperationAlterConfigs, "UpdateCompatibility"), true
	case "DELETE /config/{subject}":
		return sub(kmsg.ACLOperationAlterConfigs, "DeleteCompatibility"), true
	case "PUT /mode/{subject}":
		return sub(kmsg.ACLOperationAlterConfigs, "UpdateMode"), true
	case "DELETE /mode/{subject}":
		return sub(kmsg.ACLOperationAlterConfigs, "DeleteMode"), true
	}
	return registryAction{}, false
}

// authorize checks a routed request against the authorizer: its
// operation on its subject (or the cluster); listings are cut to the
// subjects the principal may describe; a schema by id needs READ on one
// of its subjects, soft-deleted ones included. It answers a refusal
// itself and returns the request to serve.
func (s *schemaStore) authorize(w http.ResponseWriter, r *http.Request, rt schemareg.Route, a registryAction, known bool) (*http.Request, bool) {
	az := s.n.authz
	p := requestPrincipal(r)
	host := hostOf(r.RemoteAddr)
	on := az != nil && auth.Enabled(az)
	may := func(op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) bool {
		return !on || az.Authorize(auth.Action{Principal: p, Host: host, Op: op, Type: typ, Name: name})
	}
	refuse := func(a registryAction, msg string) (*http.Request, bool) {
		s.audit(r, p, a, false, "not authorized")
		schemareg.WriteError(w, &schemareg.Error{Status: http.StatusForbidden, Code: 40301, Message: msg})
		return nil, false
	}
	// A forwarded write was authorized by the node it came through,
	// and comes with that node's principal (its certificate) or the
	// client's own credentials, checked again here.
	switch {
	case !known:
		if on {
			return refuse(a, fmt.Sprintf("User %s is not authorized to %s (an endpoint this node cannot authorize)", p, rt.Pattern))
		}
	case a.check && !may(a.op, a.typ, a.name):
		return refuse(a, fmt.Sprintf("User %s is not authorized to %s %s %s", p, a.op, metadata.ResourceTypeName(a.typ), a.name))
	case a.byID && on:
		id, err := strconv.ParseInt(rt.ID, 10, 32)
		if err != nil {
			break // the handler answers 40403
		}
		vs, err := s.reg.IDVersions(int(id), true)
		if err != nil {
			break // no such id: the handler answers 40403
		}
		if !slices.ContainsFunc(vs, func(v schemareg.IDVersion) bool {
			return may(kmsg.ACLOperationRead, metadata.ACLResourceTypeSubject, v.Subject)
		}) {
			name := ""
			if len(vs) > 0 {
				name = vs[0].Subject
			}
			return refuse(registryAction{op: kmsg.ACLOperationRead, typ: metadata.ACLResourceTypeSubject, name: name},
				fmt.Sprintf("User %s is not authorized to READ a subject of schema id %d", p, id))
		}
	}
	if a.filter && on {
		r = r.WithContext(schemareg.WithSubjectFilter(r.Context(), func(subject string) bool {
			return may(kmsg.ACLOperationDescribe, metadata.ACLResourceTypeSubject, subject)
		}))
	}
	return r, true
}

// audit records a registry change (or a refused request) in the audit
// trail: method schema-registry.<change> (RegisterSchema, DeleteSubject,
// DeleteSchemaVersion, UpdateCompatibility, DeleteCompatibility,
// UpdateMode, DeleteMode; schema-registry.Request for a refused read).
func (s *schemaStore) audit(r *http.Request, p auth.Principal, a registryAction, allowed bool, reason string) {
	if s.n.audit == nil {
		return
	}
	kind, method := "management", "schema-registry."+a.change
	if !allowed {
		kind = "authorization"
		if a.change == "" {
			method = "schema-registry.Request"
		}
	}
	s.n.audit.Audit(auth.Event{Time: time.Now(), Principal: p, Host: r.RemoteAddr, Listener: "http", Kind: kind,
		Method: method, Operation: a.op.String(), ResourceType: metadata.ResourceTypeName(a.typ), ResourceName: a.name,
		Allowed: allowed, Error: reason, Detail: map[string]string{"http": r.Method + " " + r.URL.Path, "query": r.URL.RawQuery}})
}

// auditHTTPAuthFailure records a failed HTTP authentication.
func (n *Node) auditHTTPAuthFailure(p auth.Principal, addr, method, reason string) {
	n.log.Warn("http authentication failed", "principal", p.String(), "remote", addr, "method", method, "err", reason)
	if n.audit != nil {
		n.audit.Audit(auth.Event{Time: time.Now(), Principal: p, Host: addr, Listener: "http", Kind: "authentication",
			Method: "HTTP " + method, Allowed: false, Error: reason})
	}
}
