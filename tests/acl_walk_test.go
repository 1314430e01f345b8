package tests

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/handler"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
	"github.com/berthmq/berth/pkg/berthmsg"
)

// walkNames are the real resources the walk's requests name.
type walkNames struct {
	topic, group, shareGroup, txnID, clusterID string
	topicID                                    [16]byte
}

// walkCase is one API key's request as a principal with no ACLs sends
// it, and what must come back: want, an authorization error in every
// error field that is set (at least one), or check for the keys that
// answer without refusing (lists that hide, ApiVersions).
type walkCase struct {
	req   func(w walkNames) kmsg.Request
	want  *kerr.Error
	check func(resp kmsg.Response) error
}

var (
	topicAuth   = kerr.TopicAuthorizationFailed
	groupAuth   = kerr.GroupAuthorizationFailed
	clusterAuth = kerr.ClusterAuthorizationFailed
	txnAuth     = kerr.TransactionalIDAuthorizationFailed
)

func sp(s string) *string { return &s }

// walkCases has an entry for every served key (TestACLWalkCoversEveryKey).
var walkCases = map[int16]walkCase{
	0: {want: topicAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrProduceRequest()
		r.Acks, r.TimeoutMillis = -1, 5000
		r.Topics = []kmsg.ProduceRequestTopic{{Topic: w.topic, TopicID: w.topicID,
			Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: makeBatch(-1, -1, -1, 1)}}}}
		return r
	}},
	1: {want: topicAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrFetchRequest()
		r.ReplicaID, r.MaxWaitMillis, r.MinBytes, r.MaxBytes, r.SessionEpoch = -1, 100, 1, 1<<20, -1
		r.ReplicaState.ID = -1
		p := kmsg.NewFetchRequestTopicPartition()
		p.PartitionMaxBytes = 1 << 20
		r.Topics = []kmsg.FetchRequestTopic{{Topic: w.topic, TopicID: w.topicID, Partitions: []kmsg.FetchRequestTopicPartition{p}}}
		return r
	}},
	2: {want: topicAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrListOffsetsRequest()
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Timestamp = -1
		r.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: w.topic, Partitions: []kmsg.ListOffsetsRequestTopicPartition{p}}}
		return r
	}},
	3: {req: func(walkNames) kmsg.Request { return kmsg.NewPtrMetadataRequest() }, // all topics
		check: func(resp kmsg.Response) error {
			if ts := resp.(*kmsg.MetadataResponse).Topics; len(ts) > 0 {
				return fmt.Errorf("Metadata for all topics shows %d topics to a principal who may describe none", len(ts))
			}
			return nil
		}},
	7: {want: clusterAuth, req: func(walkNames) kmsg.Request {
		r := kmsg.NewPtrControlledShutdownRequest()
		r.BrokerID, r.BrokerEpoch = 1, -1
		return r
	}},
	8: {want: groupAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Group, r.Generation = w.group, -1
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Offset = 1
		r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: w.topic, TopicID: w.topicID, Partitions: []kmsg.OffsetCommitRequestTopicPartition{p}}}
		return r
	}},
	9: {want: groupAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Group = w.group
		r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: w.topic, Partitions: []int32{0}}}
		r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: w.group,
			Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: w.topic, TopicID: w.topicID, Partitions: []int32{0}}}}}
		return r
	}},
	10: {want: groupAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.CoordinatorKey, r.CoordinatorKeys = w.group, []string{w.group}
		return r
	}},
	11: {want: groupAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrJoinGroupRequest()
		r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis, r.ProtocolType = w.group, 10000, 10000, "consumer"
		r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
		return r
	}},
	12: {want: groupAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrHeartbeatRequest()
		r.Group, r.Generation, r.MemberID = w.group, 1, "m"
		return r
	}},
	13: {want: groupAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrLeaveGroupRequest()
		r.Group, r.MemberID = w.group, "m"
		r.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
		return r
	}},
	14: {want: groupAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrSyncGroupRequest()
		r.Group, r.Generation, r.MemberID = w.group, 1, "m"
		return r
	}},
	15: {want: groupAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrDescribeGroupsRequest()
		r.Groups, r.IncludeAuthorizedOperations = []string{w.group}, true
		return r
	}},
	16: {req: func(walkNames) kmsg.Request { return kmsg.NewPtrListGroupsRequest() },
		check: func(resp kmsg.Response) error {
			if gs := resp.(*kmsg.ListGroupsResponse).Groups; len(gs) > 0 {
				return fmt.Errorf("ListGroups shows %v to a principal who may describe none", gs)
			}
			return nil
		}},
	18: {req: func(walkNames) kmsg.Request { return kmsg.NewPtrApiVersionsRequest() },
		check: func(resp kmsg.Response) error { return kerr.ErrorForCode(resp.(*kmsg.ApiVersionsResponse).ErrorCode) }},
	19: {want: topicAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrCreateTopicsRequest()
		r.TimeoutMillis = 5000
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = w.topic+"-new", 1, 1
		r.Topics = []kmsg.CreateTopicsRequestTopic{t}
		return r
	}},
	20: {want: topicAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrDeleteTopicsRequest()
		r.TimeoutMillis = 5000
		r.TopicNames = []string{w.topic}
		r.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: sp(w.topic)}}
		return r
	}},
	21: {want: topicAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrDeleteRecordsRequest()
		r.TimeoutMillis = 5000
		r.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: w.topic, Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 1}}}}
		return r
	}},
	22: {want: clusterAuth, req: func(walkNames) kmsg.Request { // idempotent: no WRITE anywhere
		r := kmsg.NewPtrInitProducerIDRequest()
		r.TransactionTimeoutMillis, r.ProducerID, r.ProducerEpoch = -1, -1, -1
		return r
	}},
	23: {want: topicAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrOffsetForLeaderEpochRequest()
		r.ReplicaID = -1
		p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		p.CurrentLeaderEpoch, p.LeaderEpoch = -1, 0
		r.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: w.topic, Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{p}}}
		return r
	}},
	24: {want: clusterAuth, req: func(w walkNames) kmsg.Request { // v4+, the broker form, is what kgo sends at the top version
		r := kmsg.NewPtrAddPartitionsToTxnRequest()
		r.TransactionalID = w.txnID
		r.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: w.topic, Partitions: []int32{0}}}
		r.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{{TransactionalID: w.txnID,
			Topics: []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: w.topic, Partitions: []int32{0}}}}}
		return r
	}},
	25: {want: txnAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrAddOffsetsToTxnRequest()
		r.TransactionalID, r.Group = w.txnID, w.group
		return r
	}},
	26: {want: txnAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrEndTxnRequest()
		r.TransactionalID, r.Commit = w.txnID, false
		return r
	}},
	27: {want: clusterAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrWriteTxnMarkersRequest()
		r.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: 0, Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: w.topic, Partitions: []int32{0}}}}}
		return r
	}},
	28: {want: txnAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrTxnOffsetCommitRequest()
		r.TransactionalID, r.Group, r.Generation = w.txnID, w.group, -1
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Offset = 1
		r.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: w.topic, TopicID: w.topicID, Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{p}}}
		return r
	}},
	29: {want: clusterAuth, req: func(walkNames) kmsg.Request {
		r := kmsg.NewPtrDescribeACLsRequest()
		r.ResourceType, r.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		r.Operation, r.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		return r
	}},
	30: {want: clusterAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrCreateACLsRequest()
		r.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: w.topic,
			ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:nobody", Host: "*",
			Operation: kmsg.ACLOperationAll, PermissionType: kmsg.ACLPermissionTypeAllow}}
		return r
	}},
	31: {want: clusterAuth, req: func(walkNames) kmsg.Request {
		r := kmsg.NewPtrDeleteACLsRequest()
		r.Filters = []kmsg.DeleteACLsRequestFilter{{ResourceType: kmsg.ACLResourceTypeAny, ResourcePatternType: kmsg.ACLResourcePatternTypeAny,
			Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny}}
		return r
	}},
	32: {want: topicAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrDescribeConfigsRequest()
		r.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: w.topic}}
		return r
	}},
	33: {want: topicAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrAlterConfigsRequest()
		r.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: w.topic,
			Configs: []kmsg.AlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: sp("1000")}}}}
		return r
	}},
	35: {want: clusterAuth, req: func(walkNames) kmsg.Request { return kmsg.NewPtrDescribeLogDirsRequest() }},
	37: {want: topicAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrCreatePartitionsRequest()
		r.TimeoutMillis = 5000
		r.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: w.topic, Count: 3}}
		return r
	}},
	42: {want: groupAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrDeleteGroupsRequest()
		r.Groups = []string{w.group, w.shareGroup}
		return r
	}},
	43: {want: clusterAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrElectLeadersRequest()
		r.TimeoutMillis = 5000
		r.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: w.topic, Partitions: []int32{0}}}
		return r
	}},
	44: {want: topicAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: w.topic,
			Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: sp("1000")}}}}
		return r
	}},
	45: {want: clusterAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		r.TimeoutMillis = 5000
		r.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: w.topic,
			Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: 0, Replicas: []int32{1}}}}}
		return r
	}},
	46: {want: clusterAuth, req: func(walkNames) kmsg.Request { return kmsg.NewPtrListPartitionReassignmentsRequest() }},
	47: {want: groupAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = w.group
		r.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: w.topic, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
		return r
	}},
	55: {want: clusterAuth, req: func(walkNames) kmsg.Request {
		r := kmsg.NewPtrDescribeQuorumRequest()
		r.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
		return r
	}},
	60: {req: func(walkNames) kmsg.Request {
		r := kmsg.NewPtrDescribeClusterRequest()
		r.IncludeClusterAuthorizedOperations = true
		return r
	}, check: func(resp kmsg.Response) error {
		if ops := resp.(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations; ops != 0 {
			return fmt.Errorf("DescribeCluster's authorized operations are %b for a principal with no ACLs, want none", ops)
		}
		return nil
	}},
	61: {want: topicAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrDescribeProducersRequest()
		r.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: w.topic, Partitions: []int32{0}}}
		return r
	}},
	65: {want: txnAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrDescribeTransactionsRequest()
		r.TransactionalIDs = []string{w.txnID}
		return r
	}},
	66: {req: func(walkNames) kmsg.Request { return kmsg.NewPtrListTransactionsRequest() },
		check: func(resp kmsg.Response) error {
			if ts := resp.(*kmsg.ListTransactionsResponse).TransactionStates; len(ts) > 0 {
				return fmt.Errorf("ListTransactions shows %v to a principal who may describe none", ts)
			}
			return nil
		}},
	68: {want: groupAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Group, r.RebalanceTimeoutMillis, r.SubscribedTopicNames = w.group+"-848", 10000, []string{w.topic}
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return r
	}},
	69: {want: groupAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrConsumerGroupDescribeRequest()
		r.Groups = []string{w.group}
		return r
	}},
	76: {want: groupAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrShareGroupHeartbeatRequest()
		r.GroupID, r.MemberID, r.SubscribedTopicNames = w.shareGroup, "walker-0000000000000", []string{w.topic}
		return r
	}},
	77: {want: groupAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrShareGroupDescribeRequest()
		r.GroupIDs = []string{w.shareGroup}
		return r
	}},
	78: {want: groupAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrShareFetchRequest()
		r.GroupID, r.MemberID = sp(w.shareGroup), sp("walker")
		r.MaxWaitMillis, r.MinBytes, r.MaxBytes, r.MaxRecords, r.BatchSize = 100, 1, 1<<20, 10, 10
		r.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: w.topicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}}}
		return r
	}},
	79: {want: groupAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrShareAcknowledgeRequest()
		r.GroupID, r.MemberID, r.ShareSessionEpoch = sp(w.shareGroup), sp("walker"), 1
		r.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: w.topicID, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{{Partition: 0,
			AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{1}}}}}}}
		return r
	}},
	80: {want: clusterAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrAddRaftVoterRequest()
		r.ClusterID, r.VoterID, r.TimeoutMillis = sp(w.clusterID), 7, 5000
		r.Listeners = []kmsg.AddRaftVoterRequestListener{{Name: "CONTROLLER", Host: "127.0.0.1", Port: 1}}
		return r
	}},
	81: {want: clusterAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrRemoveRaftVoterRequest()
		r.ClusterID, r.VoterID = sp(w.clusterID), 1
		return r
	}},
	83: {want: clusterAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrInitializeShareGroupStateRequest()
		r.GroupID = w.shareGroup
		r.Topics = []kmsg.InitializeShareGroupStateRequestTopic{{TopicID: w.topicID,
			Partitions: []kmsg.InitializeShareGroupStateRequestTopicPartition{{Partition: 0, StartOffset: 0}}}}
		return r
	}},
	84: {want: clusterAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrReadShareGroupStateRequest()
		r.GroupID = w.shareGroup
		r.Topics = []kmsg.ReadShareGroupStateRequestTopic{{TopicID: w.topicID,
			Partitions: []kmsg.ReadShareGroupStateRequestTopicPartition{{Partition: 0}}}}
		return r
	}},
	85: {want: clusterAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrWriteShareGroupStateRequest()
		r.GroupID = w.shareGroup
		r.Topics = []kmsg.WriteShareGroupStateRequestTopic{{TopicID: w.topicID,
			Partitions: []kmsg.WriteShareGroupStateRequestTopicPartition{{Partition: 0, StartOffset: 2}}}}
		return r
	}},
	86: {want: clusterAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrDeleteShareGroupStateRequest()
		r.GroupID = w.shareGroup
		r.Topics = []kmsg.DeleteShareGroupStateRequestTopic{{TopicID: w.topicID,
			Partitions: []kmsg.DeleteShareGroupStateRequestTopicPartition{{Partition: 0}}}}
		return r
	}},
	90: {want: groupAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		r.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: w.shareGroup,
			Topics: []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: w.topic, Partitions: []int32{0}}}}}
		return r
	}},
	91: {want: groupAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		r.GroupID = w.shareGroup
		r.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: w.topic,
			Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: 0}}}}
		return r
	}},
	92: {want: groupAuth, req: func(w walkNames) kmsg.Request {
		r := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
		r.GroupID = w.shareGroup
		r.Topics = []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: w.topic}}
		return r
	}},
	// Keys served on the other branches of issue 14 (SASL, quotas, SCRAM
	// users): their cases are here so the walk covers them once merged.
	17: {req: func(walkNames) kmsg.Request {
		r := kmsg.NewPtrSASLHandshakeRequest()
		r.Mechanism = "PLAIN"
		return r
	}, check: notAuthorizationRefused},
	36: {req: func(walkNames) kmsg.Request {
		r := kmsg.NewPtrSASLAuthenticateRequest()
		r.SASLAuthBytes = []byte("\x00nobody\x00wrong")
		return r
	}, check: notAuthorizationRefused},
	48: {want: clusterAuth, req: func(walkNames) kmsg.Request {
		r := kmsg.NewPtrDescribeClientQuotasRequest()
		r.Components = []kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: kmsg.QuotasMatchTypeAny}}
		return r
	}},
	49: {want: clusterAuth, req: func(walkNames) kmsg.Request {
		r := kmsg.NewPtrAlterClientQuotasRequest()
		r.Entries = []kmsg.AlterClientQuotasRequestEntry{{Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: sp("nobody")}},
			Ops: []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1e9}}}}
		return r
	}},
	50: {want: clusterAuth, req: func(walkNames) kmsg.Request { return kmsg.NewPtrDescribeUserSCRAMCredentialsRequest() }},
	51: {want: clusterAuth, req: func(walkNames) kmsg.Request {
		r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		r.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "admin", Mechanism: 1}}
		return r
	}},
	berthmsg.AnnotateShareRecordsKey: {want: groupAuth, req: func(w walkNames) kmsg.Request {
		r := berthmsg.NewAnnotateShareRecordsRequest()
		r.GroupID, r.MemberID = w.shareGroup, "walker"
		r.Topics = []berthmsg.AnnotateShareRecordsTopic{{TopicID: w.topicID,
			Partitions: []berthmsg.AnnotateShareRecordsPartition{{Partition: 0, FirstOffset: 0, LastOffset: 0, ErrorText: "x"}}}}
		return r
	}},
	berthmsg.ForgetShareGroupKey: {want: clusterAuth, req: func(w walkNames) kmsg.Request {
		r := berthmsg.NewForgetShareGroupRequest()
		r.GroupID = w.shareGroup
		return r
	}},
}

// notAuthorizationRefused is the check of the keys every principal may
// send (authentication): whatever they answer, it is no authorization
// failure.
func notAuthorizationRefused(resp kmsg.Response) error {
	var codes []int16
	errorCodes(reflect.ValueOf(resp), &codes)
	for _, c := range codes {
		switch c {
		case topicAuth.Code, groupAuth.Code, clusterAuth.Code, txnAuth.Code:
			return fmt.Errorf("answered %s, an authorization failure, to a key every principal may send", kerr.ErrorForCode(c))
		}
	}
	return nil
}

// A key registered without a walk case fails here: the walk must cover
// every API the broker serves.
func TestACLWalkCoversEveryKey(t *testing.T) {
	for _, a := range append(handler.Served(), handler.Extensions()...) {
		if _, ok := walkCases[a.Key]; !ok {
			t.Errorf("API key %d (%s) is served but has no case in walkCases: add the request a principal with no ACLs sends, and what it must get", a.Key, a.Name)
		}
	}
}

// errorCodes collects every ErrorCode field of a response, at any depth.
func errorCodes(v reflect.Value, out *[]int16) {
	errorFields(v, out, nil)
}

// errorMessages collects every non-empty ErrorMessage field of a
// response, at any depth.
func errorMessages(v reflect.Value, out *[]string) {
	errorFields(v, nil, out)
}

// errorFields walks a response for its ErrorCode (into codes, if not nil)
// and non-empty ErrorMessage (into msgs, if not nil) fields.
func errorFields(v reflect.Value, codes *[]int16, msgs *[]string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			errorFields(v.Elem(), codes, msgs)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			switch {
			case f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16:
				if codes != nil {
					*codes = append(*codes, int16(v.Field(i).Int()))
				}
			case f.Name == "ErrorMessage":
				if m, ok := v.Field(i).Interface().(*string); ok && msgs != nil && m != nil && *m != "" {
					*msgs = append(*msgs, *m)
				}
			default:
				errorFields(v.Field(i), codes, msgs)
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := range v.Len() {
			errorFields(v.Index(i), codes, msgs)
		}
	}
}

// walkState is what a refused request must leave as it was: the metadata
// image (topics, configs, ACLs, groups' configs, producer ids), every
// partition's log start and end (the internal topics hold the group,
// transaction and share state), the group's committed offsets and the
// share group's start offset.
func walkState(t *testing.T, n *tc.Node, adm *kadm.Client, admin *kgo.Client, w walkNames) string {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	im := *n.MetadataImage()
	im.Index = 0
	var b bytes.Buffer
	b.Write(metadata.EncodeImage(&im))
	starts, err := adm.ListStartOffsets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []kadm.ListedOffsets{starts, ends} {
		l.Each(func(o kadm.ListedOffset) { fmt.Fprintf(&b, "\n%s/%d@%d %v", o.Topic, o.Partition, o.Offset, o.Err) })
	}
	offs, err := adm.FetchOffsets(ctx, w.group)
	if err != nil {
		t.Fatal(err)
	}
	offs.Each(func(o kadm.OffsetResponse) { fmt.Fprintf(&b, "\ngroup %s/%d=%d", o.Topic, o.Partition, o.At) })
	share, err := describeShareOffsets(t, admin, w.shareGroup, w.topic, 0)
	fmt.Fprintf(&b, "\nshare %v %v", share, err)
	return b.String()
}

// The every-key authorization walk: with an authorizer on and a principal
// that has no ACLs and is no super user, every served API key (Kafka's
// and Berth's) with a valid request naming real resources is refused with
// the right authorization error, or answers without showing anything
// (Metadata, ListGroups, ListTransactions, DescribeCluster) or is always
// allowed (ApiVersions); and the whole walk changes nothing.
func TestACLWalkEveryKeyRefusedAndTouchesNothing(t *testing.T) {
	n := startSecured(t)
	ctx := ctxT(t, 120*time.Second)
	admin := as(t, n, "admin")
	adm := kadm.NewClient(admin)
	w := walkNames{topic: "walk", group: "walk-group", shareGroup: "walk-share", txnID: "walk-tx"}

	// Real resources, made by the super user: a topic with records, a
	// group with committed offsets, a share group with state, a
	// transactional id with a committed transaction, and an ACL of
	// someone else's.
	if r, err := adm.CreateTopic(ctx, 1, 1, nil, w.topic); err != nil || r.Err != nil {
		t.Fatalf("create topic: %v %v", err, r.Err)
	}
	produceSync(t, admin, &kgo.Record{Topic: w.topic, Value: []byte("a")}, &kgo.Record{Topic: w.topic, Value: []byte("b")})
	at := kadm.Offsets{}
	at.Add(kadm.Offset{Topic: w.topic, Partition: 0, At: 1, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, w.group, at); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if rs, err := adm.AlterShareGroupOffsets(ctx, w.shareGroup, at); err != nil || rs.Error() != nil {
		t.Fatalf("share group: %v %v", err, rs.Error())
	}
	txp := as(t, n, "admin", kgo.TransactionalID(w.txnID), kgo.DefaultProduceTopic(w.topic))
	if err := txp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceSync(t, txp, &kgo.Record{Value: []byte("tx")})
	if err := txp.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() error { // the markers and CompleteCommit are written after EndTxn answers
		d, err := adm.DescribeTransactions(ctx, w.txnID)
		if err != nil {
			return err
		}
		if s := d[w.txnID].State; s != "CompleteCommit" {
			return fmt.Errorf("transaction state %s", s)
		}
		return nil
	})
	mustCreateACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics(w.topic).Operations(kadm.OpRead))

	td, err := adm.ListTopics(ctx, w.topic)
	if err != nil {
		t.Fatal(err)
	}
	w.topicID = td[w.topic].ID
	w.clusterID = n.MetadataImage().ClusterID
	before := walkState(t, n, adm, admin, w)

	nobody := as(t, n, "nobody", kgo.MaxVersions(berthmsg.WithVersions(nil)))
	keys := append(handler.Served(), handler.Extensions()...)
	for _, a := range keys {
		c, ok := walkCases[a.Key]
		if !ok {
			continue // TestACLWalkCoversEveryKey fails
		}
		resp, err := tc.DirectRequest(ctx, nobody, c.req(w))
		if err != nil {
			t.Errorf("key %d (%s): %v", a.Key, a.Name, err)
			continue
		}
		if c.check != nil {
			if err := c.check(resp); err != nil {
				t.Errorf("key %d (%s): %v", a.Key, a.Name, err)
			}
			continue
		}
		var codes []int16
		errorCodes(reflect.ValueOf(resp), &codes)
		if !slices.Contains(codes, c.want.Code) || slices.ContainsFunc(codes, func(c2 int16) bool { return c2 != 0 && c2 != c.want.Code }) {
			t.Errorf("key %d (%s): error codes %v, want %s (%d) and nothing else", a.Key, a.Name, codes, c.want.Message, c.want.Code)
		}
		// The admin APIs say what the refused principal needs.
		if slices.Contains([]int16{29, 30, 31, 46, 48, 49, 50, 51, 55}, a.Key) {
			var msgs []string
			errorMessages(reflect.ValueOf(resp), &msgs)
			if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, "on the cluster is needed") }) {
				t.Errorf("key %d (%s): error messages %q, want one naming the operation on the cluster that is needed", a.Key, a.Name, msgs)
			}
		}
	}
	if after := walkState(t, n, adm, admin, w); after != before {
		t.Fatalf("the refused requests changed the broker's state:\nbefore %s\nafter  %s", before, after)
	}
}
