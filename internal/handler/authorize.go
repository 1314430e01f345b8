package handler

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

// Resource types and operations, short, for the key files' checks.
const (
	rTopic   = kmsg.ACLResourceTypeTopic
	rGroup   = kmsg.ACLResourceTypeGroup
	rCluster = kmsg.ACLResourceTypeCluster
	rTxnID   = kmsg.ACLResourceTypeTransactionalId

	opRead            = kmsg.ACLOperationRead
	opWrite           = kmsg.ACLOperationWrite
	opCreate          = kmsg.ACLOperationCreate
	opDelete          = kmsg.ACLOperationDelete
	opAlter           = kmsg.ACLOperationAlter
	opDescribe        = kmsg.ACLOperationDescribe
	opClusterAction   = kmsg.ACLOperationClusterAction
	opDescribeConfigs = kmsg.ACLOperationDescribeConfigs
	opAlterConfigs    = kmsg.ACLOperationAlterConfigs
	opIdempotentWrite = kmsg.ACLOperationIdempotentWrite
)

// clusterName is the CLUSTER resource's one name.
const clusterName = metadata.ClusterResourceName

// authorized reports whether the request's principal may do op on the
// resource typ/name. Every key file asks it before it acts, as Kafka's
// KafkaApis does for that key (docs/compatibility.md lists the checks). A
// denial is logged at debug, counted (berth_authorization_denials_total)
// and audited; an allowed change (CREATE, DELETE, ALTER, ALTER_CONFIGS)
// is audited too.
func (b *Broker) authorized(req *server.Request, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) bool {
	if !auth.Enabled(b.Authorizer) {
		return true // no authorizer: nothing to ask, log or count
	}
	ok := b.Authorizer.Authorize(b.action(req, op, typ, name))
	if !ok {
		b.denied(req, op, typ, name)
	} else if op == opCreate || op == opDelete || op == opAlter || op == opAlterConfigs {
		b.audit(req, op, typ, name, true, "")
	}
	return ok
}

// mayQuietly is authorized without logging, counting or auditing a
// denial: for filtering (Metadata listing every topic, ListGroups) and
// authorized_operations, as Kafka's logIfDenied=false.
func (b *Broker) mayQuietly(req *server.Request, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) bool {
	if !auth.Enabled(b.Authorizer) {
		return true
	}
	return b.Authorizer.Authorize(b.action(req, op, typ, name))
}

func (b *Broker) action(req *server.Request, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) auth.Action {
	return auth.Action{Principal: req.Conn.Principal(), Host: req.Conn.Host(), Op: op, Type: typ, Name: name}
}

// authorizedCluster is authorized on the CLUSTER resource.
func (b *Broker) authorizedCluster(req *server.Request, op kmsg.ACLOperation) bool {
	return b.authorized(req, op, rCluster, clusterName)
}

// authorizedByType is Kafka's authorizeByResourceType: may the principal
// do op on some resource of type typ (auth.TypeAuthorizer).
func (b *Broker) authorizedByType(req *server.Request, op kmsg.ACLOperation, typ kmsg.ACLResourceType) bool {
	if ta, ok := b.Authorizer.(auth.TypeAuthorizer); ok {
		return ta.AuthorizeByResourceType(req.Conn.Principal(), req.Conn.Host(), op, typ)
	}
	return b.mayQuietly(req, op, typ, "hardcode")
}

// idempotentWriteAllowed: IDEMPOTENT_WRITE on the cluster, or (Kafka's
// KIP-679 relaxation) WRITE on any topic or any transactional id.
func (b *Broker) idempotentWriteAllowed(req *server.Request) bool {
	if b.mayQuietly(req, opIdempotentWrite, rCluster, clusterName) ||
		b.authorizedByType(req, opWrite, rTopic) || b.authorizedByType(req, opWrite, rTxnID) {
		return true
	}
	b.denied(req, opIdempotentWrite, rCluster, clusterName)
	return false
}

// authorizedOps is an authorized_operations bit field: bit op set for
// each operation of the resource type the principal may do (Kafka's
// Utils.to32BitField of the allowed ones).
func (b *Broker) authorizedOps(req *server.Request, typ kmsg.ACLResourceType, name string) int32 {
	var bits int32
	for _, op := range metadata.ACLOperations[typ] {
		if b.mayQuietly(req, op, typ, name) {
			bits |= 1 << op
		}
	}
	return bits
}

// opsIf is authorizedOps when the client asked for them (include), else
// Kafka's "not provided".
func (b *Broker) opsIf(include bool, req *server.Request, typ kmsg.ACLResourceType, name string) int32 {
	if !include {
		return authzNotComputed
	}
	return b.authorizedOps(req, typ, name)
}

// denied logs, counts and audits one refused action.
func (b *Broker) denied(req *server.Request, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) {
	if int(typ) >= 0 && int(typ) < len(b.denials) {
		b.denials[typ].Add(1)
	}
	b.log.Debug("authorization denied", "principal", req.Conn.Principal().String(), "host", req.Conn.Host(),
		"api", kmsg.NameForKey(req.Key), "operation", op.String(), "resource_type", typ.String(), "resource", name)
	b.audit(req, op, typ, name, false, authErrorFor(typ).Message)
}

func (b *Broker) audit(req *server.Request, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string, allowed bool, why string) {
	e := auth.Event{Kind: "authorization", Operation: op.String(), ResourceType: typ.String(), ResourceName: name, Allowed: allowed, Error: why}
	if be, ok := berthAPIs[req.Key]; ok {
		e.Method = be.name
	}
	b.auditRequest(req, e) // audit.go: time, principal, address, listener, client id
}

// authErrorFor is the Kafka error of a denial on a resource type.
func authErrorFor(typ kmsg.ACLResourceType) *kerr.Error {
	switch typ {
	case rTopic:
		return kerr.TopicAuthorizationFailed
	case rGroup:
		return kerr.GroupAuthorizationFailed
	case rTxnID:
		return kerr.TransactionalIDAuthorizationFailed
	case kmsg.ACLResourceTypeDelegationToken:
		return kerr.DelegationTokenAuthorizationFailed
	}
	return kerr.ClusterAuthorizationFailed
}

// Denials returns the authorization denials so far, indexed by
// kmsg.ACLResourceType (TOPIC, GROUP, CLUSTER, ...).
func (b *Broker) Denials() map[kmsg.ACLResourceType]int64 {
	out := map[kmsg.ACLResourceType]int64{}
	for typ := rTopic; int(typ) < len(b.denials); typ++ {
		out[typ] = b.denials[typ].Load()
	}
	return out
}

// topicDenied reports whether op on the topic (by name, or by id when
// byID) is refused, logging the denial. A topic id the image does not
// know is not refused here: the lookup answers UNKNOWN_TOPIC_ID.
func (b *Broker) topicDenied(req *server.Request, im *metadata.Image, op kmsg.ACLOperation, name string, id [16]byte, byID bool) bool {
	if !b.authzOn {
		return false
	}
	if byID {
		t := im.TopicByID(id)
		if t == nil {
			return false
		}
		name = t.Name
	}
	return !b.authorized(req, op, rTopic, name)
}

// lookupTopicFor is lookupTopic after the check of op on the topic:
// TOPIC_AUTHORIZATION_FAILED comes first, also for a topic that does not
// exist, so that a principal learns no names it may not use (Kafka's
// order).
func (b *Broker) lookupTopicFor(req *server.Request, im *metadata.Image, op kmsg.ACLOperation, name string, id [16]byte, byID bool) (*metadata.Topic, error) {
	if b.topicDenied(req, im, op, name, id, byID) {
		return nil, kerr.TopicAuthorizationFailed
	}
	return lookupTopic(im, name, id, byID)
}

// configDenied checks op (DESCRIBE_CONFIGS, ALTER_CONFIGS) on a config
// resource: a topic (TOPIC_AUTHORIZATION_FAILED), the brokers (the
// CLUSTER resource, CLUSTER_AUTHORIZATION_FAILED) or a group
// (GROUP_AUTHORIZATION_FAILED). Other types are left to the handler.
func (b *Broker) configDenied(req *server.Request, op kmsg.ACLOperation, typ kmsg.ConfigResourceType, name string) error {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if !b.authorized(req, op, rTopic, name) {
			return kerr.TopicAuthorizationFailed
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		if !b.authorizedCluster(req, op) {
			return kerr.ClusterAuthorizationFailed
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !b.authorized(req, op, rGroup, name) {
			return kerr.GroupAuthorizationFailed
		}
	}
	return nil
}
