// Package handler serves the Kafka APIs: one file per API key
// (00_produce.go, 01_fetch.go, ...), each registering the versions it
// serves, so ApiVersions is built from the registrations. Handlers
// validate, call a service (replica, metadata) and map errors to Kafka
// codes in one table (errors.go). They touch no files and no raft.
package handler

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/cluster"
	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/group"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/peer"
	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/sharepart"
	"github.com/berthmq/berth/internal/sharestate"
)

// handlerFunc serves one API.
type handlerFunc func(b *Broker, ctx context.Context, req *server.Request) (server.Reply, error)

type api struct {
	min, max int16
	fn       handlerFunc
}

var apis = map[int16]api{}

// register is called from each API file's init.
func register(key, min, max int16, fn handlerFunc) {
	if _, dup := apis[key]; dup {
		panic(fmt.Sprintf("API key %d registered twice", key))
	}
	if kmsg.RequestForKey(key) == nil {
		panic(fmt.Sprintf("API key %d unknown to kmsg", key))
	}
	if r := kmsg.RequestForKey(key); max > r.MaxVersion() {
		panic(fmt.Sprintf("API key %d: max %d beyond kmsg's %d", key, max, r.MaxVersion()))
	}
	apis[key] = api{min: min, max: max, fn: fn}
}

// APIRange is one served API for docs and ApiVersions.
type APIRange struct {
	Key      int16
	Name     string
	Min, Max int16
}

// Served lists every Kafka API served, by key (Berth's own: Extensions).
func Served() []APIRange {
	var out []APIRange
	for k, a := range apis {
		if _, berth := berthAPIs[k]; berth { // listed by Extensions
			continue
		}
		out = append(out, APIRange{Key: k, Name: kmsg.NameForKey(k), Min: a.min, Max: a.max})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Berth's API keys are not kmsg's: registerBerth records how to make an
// empty request (the server asks through NewRequest), they are listed in
// ApiVersions (kgo sends no key a broker did not list) but not in Served,
// which lists Kafka's APIs.

// berthAPI is a Berth extension's name and request maker.
type berthAPI struct {
	name   string
	newReq func() kmsg.Request
}

var berthAPIs = map[int16]berthAPI{}

// registerBerth registers a Berth extension API (keys from 32000 on).
func registerBerth(key int16, name string, min, max int16, newReq func() kmsg.Request, fn handlerFunc) {
	if _, dup := apis[key]; dup || kmsg.RequestForKey(key) != nil || key < 32000 {
		panic(fmt.Sprintf("Berth API key %d collides with a Kafka key or is registered twice", key))
	}
	if r := newReq(); r.Key() != key || max > r.MaxVersion() {
		panic(fmt.Sprintf("Berth API key %d: request type has key %d, max %d", key, r.Key(), r.MaxVersion()))
	}
	berthAPIs[key] = berthAPI{name: name, newReq: newReq}
	apis[key] = api{min: min, max: max, fn: fn}
}

// Extensions lists Berth's own APIs, by key.
func Extensions() []APIRange {
	var out []APIRange
	for k, e := range berthAPIs {
		a := apis[k]
		out = append(out, APIRange{Key: k, Name: e.name, Min: a.min, Max: a.max})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// NewRequest implements server.RequestMaker: an empty request of a Berth
// API key, else kmsg's.
func (b *Broker) NewRequest(key int16) kmsg.Request {
	if e, ok := berthAPIs[key]; ok {
		return e.newReq()
	}
	return kmsg.RequestForKey(key)
}

// ExtensionKeys implements server.RequestMaker: the Berth API keys.
func (b *Broker) ExtensionKeys() []int16 {
	var out []int16
	for _, a := range Extensions() {
		out = append(out, a.Key)
	}
	return out
}

// Config is what the handlers need from the node.
type Config struct {
	NodeID         int32
	AdvertisedHost string
	AdvertisedPort int32
	Broker         *config.Config
	Controller     *metadata.Controller
	Replicas       *replica.Manager
	Groups         *group.Coordinator
	// Shares holds the share-partitions this node leads and the share
	// sessions (ShareFetch, ShareAcknowledge).
	Shares *sharepart.Registry
	// ShareStates is the share coordinator of the __share_group_state
	// partitions this node leads (ReadShareGroupState,
	// WriteShareGroupState); nil answers COORDINATOR_NOT_AVAILABLE.
	ShareStates *sharestate.Coordinator
	// Txns is the transaction coordinator of the __transaction_state
	// partitions this node leads; nil answers COORDINATOR_NOT_AVAILABLE.
	Txns TxnCoordinator
	// Peers carries requests to other brokers (a partition leader asking
	// a transaction coordinator, txn_verify.go).
	Peers *peer.Pool
	// Elector runs ElectLeaders on the active controller (the node's
	// *cluster.Supervisor). Nil: ElectLeaders is answered NOT_CONTROLLER.
	Elector Elector
	// Propose commits metadata records through the quorum and applies the
	// resulting image to this node (its replicas and coordinators) before
	// it returns, so a client may use a topic it just created. Nil: the
	// records are committed and applied to Replicas only.
	Propose func(ctx context.Context, recs ...metadata.Record) error
	// AwaitLoaded, if set, returns once this node's coordinator of
	// partition p of an internal topic (__consumer_offsets,
	// __share_group_state, __transaction_state) has loaded it, or when
	// ctx ends; at once if this node does not lead p. FindCoordinator
	// calls it before it names this node.
	AwaitLoaded func(ctx context.Context, topic string, p int32)
	// Shutdowns serves ControlledShutdown on the active controller; nil
	// answers NOT_CONTROLLER.
	Shutdowns ShutdownController
	// Reassigner serves AlterPartitionReassignments on the active
	// controller; nil answers NOT_CONTROLLER.
	Reassigner Reassigner
	// Topics creates the internal topics (FindCoordinator) and checks the
	// live brokers for a default replication factor; nil: one of the
	// handler's own, proposing through it.
	Topics *cluster.Topics
	// ProducerIDs hands out producer ids (InitProducerId); the node's,
	// shared with its transaction coordinator. Nil: one of the handler's own.
	ProducerIDs *metadata.ProducerIDs
	// Authorizer decides every request's actions (authorize.go); nil
	// allows everything, as Kafka with no authorizer.class.name.
	Authorizer auth.Authorizer
	// Auditor takes the audit trail's events; nil drops them.
	Auditor auth.Auditor
	Logger  *slog.Logger

	// Quotas measures the client quotas (quota.go) and ClientMetrics
	// counts per principal; nil: made from the broker settings.
	Quotas        *auth.Quotas
	ClientMetrics *auth.ClientMetrics
	// SASL serves SaslHandshake and SaslAuthenticate (sasl.go); nil: no
	// SASL listener.
	SASL *SASLConfig
	// Schemas checks produced records against the schema registry on
	// topics with confluent.*.schema.validation (schema_gate.go); nil:
	// no check.
	Schemas SchemaGate
}

// Broker implements server.Handler.
type Broker struct {
	Config
	log *slog.Logger

	intercept      atomic.Pointer[Intercept]     // SetIntercept's hook; nil: none
	testPrincipals atomic.Pointer[PrincipalHook] // SetTestPrincipals' hook; nil: none

	denials [kmsg.ACLResourceTypeUser + 1]atomic.Int64 // by resource type (authorize.go)
	// authzOn and auditOn say whether an authorizer and an audit trail
	// are configured, fixed in New: the per-request paths skip their work
	// when they are not.
	authzOn, auditOn bool
}

// Intercept is a fault hook for tests (SetIntercept): it runs before a
// request with API key key is served, and may delay it, or drop it by
// returning an error, which closes the connection as a lost link would.
type Intercept func(ctx context.Context, key int16) error

// SetIntercept installs fn as the fault hook run before every request
// this node serves (nil removes it). Only tests install one.
func (b *Broker) SetIntercept(fn Intercept) {
	if fn == nil {
		b.intercept.Store(nil)
		return
	}
	b.intercept.Store(&fn)
}

// New makes the request handler of one node.
func New(cfg Config) *Broker {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	b := &Broker{Config: cfg, log: cfg.Logger}
	if b.Topics == nil {
		b.Topics = &cluster.Topics{Setting: func(name string) string { return b.Broker.Get(name) },
			Image: b.image, Propose: b.propose, Logger: b.log}
	}
	if b.ProducerIDs == nil {
		b.ProducerIDs = metadata.NewProducerIDs(b.Controller)
	}
	if b.Authorizer == nil {
		b.Authorizer = auth.AllowAll{}
	}
	if b.Auditor == nil {
		b.Auditor = auth.NopAuditor{}
	}
	b.authzOn = auth.Enabled(b.Authorizer)
	_, noAudit := b.Auditor.(auth.NopAuditor)
	b.auditOn = !noAudit
	b.quotaDefaults()
	if b.SASL == nil {
		b.SASL = &SASLConfig{}
	}
	return b
}

// SetAuditor installs the audit trail's auditor (before the node serves
// requests: the audit writer starts after the handler is made).
func (b *Broker) SetAuditor(a auth.Auditor) {
	b.Auditor = a
	_, noAudit := a.(auth.NopAuditor)
	b.auditOn = a != nil && !noAudit
}

// Supported implements server.Handler.
func (b *Broker) Supported(key int16) (int16, int16, bool) {
	a, ok := apis[key]
	return a.min, a.max, ok
}

// Handle implements server.Handler.
func (b *Broker) Handle(ctx context.Context, req *server.Request) (server.Reply, error) {
	a, ok := apis[req.Key]
	if !ok {
		return nil, fmt.Errorf("API key %d not served", req.Key)
	}
	if f := b.intercept.Load(); f != nil {
		if err := (*f)(ctx, req.Key); err != nil {
			return nil, err
		}
	}
	if err := b.saslGate(req); err != nil {
		return nil, err
	}
	b.applyTestPrincipal(req)
	r, err := b.withQuotas(ctx, req, a.fn) // quota.go
	return b.auditReply(req, r), err       // audit.go
}

// now answers a response at once.
func now(r kmsg.Response) server.Reply { return func() kmsg.Response { return r } }

// authzNotComputed is Kafka's AuthorizedOperations for "not provided"
// (INT32_MIN), what every key answers while there are no ACLs.
const authzNotComputed = -2147483648

// image is the current metadata image.
func (b *Broker) image() *metadata.Image { return b.Controller.Image() }

// propose writes metadata records and brings local replicas in line with
// the result before returning, so a created topic can be produced to as
// soon as CreateTopics answers.
func (b *Broker) propose(ctx context.Context, recs ...metadata.Record) error {
	if b.Propose != nil {
		return b.Propose(ctx, recs...)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := b.Controller.Propose(ctx, recs...); err != nil {
		return err
	}
	return b.Replicas.Apply(b.image())
}

// brokerValue returns the effective value of a broker setting: a dynamic
// cluster-wide override from the metadata log, else the static config.
func (b *Broker) brokerValue(im *metadata.Image, name string) string {
	if v, ok := im.BrokerConfigs[name]; ok {
		return v
	}
	return b.Broker.Get(name)
}
