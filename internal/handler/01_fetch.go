package handler

// Fetch, versions 4-18 (v0-3 return message formats v0/v1). MinBytes,
// MaxBytes, MaxWaitMillis long polling (the wait happens on the
// connection's write loop, so it blocks nothing else), partition max bytes
// with KIP-74's at-least-one-batch rule, the isolation level field, current
// leader epoch fencing (v9+) and topic ids (v13+). Fetch sessions (KIP-227):
// Berth creates none and answers as a Kafka broker whose session cache has
// no room. A full fetch (SessionEpoch 0, INITIAL, or -1, FINAL, and every
// fetch before v7) is answered with every partition it asks for and
// SessionID 0, which tells the client to keep sending full requests; the
// SessionID it names does not matter (Kafka closes that session, we have
// none to close: kafka-go sends -1). Any other epoch is an incremental fetch
// in a session this broker never gave out: FETCH_SESSION_ID_NOT_FOUND with
// no topics, as Kafka answers an unknown id (INVALID_FETCH_SESSION_EPOCH
// needs a session that exists). Consumers never see records beyond
// the high watermark (not yet durable on every in-sync replica). A fetch
// with a replica id (ReplicaID before v15, ReplicaState after) is a
// follower's: it reads up to the log end offset and its fetch offset tells
// the leader how far the follower's log reaches (replication.go in
// internal/replica). isolation_level=1 (read_committed) reads up to the
// last stable offset and lists the aborted transactions overlapping the
// records returned; LastStableOffset is
// the LSO at either level, as in Kafka. Not honoured yet: fetching from
// followers (KIP-392).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(1, 4, 18, (*Broker).fetch) }

func (b *Broker) fetch(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.FetchRequest)
	conn := req.Conn
	r, denied := b.fetchDenied(req, r)
	return func() kmsg.Response {
		resp := b.fetchLongPoll(r, conn)
		resp.Topics = append(resp.Topics, denied...)
		return fetchResponse{resp}
	}, nil
}

// fetchDenied checks a fetch: a follower's (a replica id) needs
// CLUSTER_ACTION on the cluster, a consumer's READ on each topic. It
// returns the request without the refused topics (answered at once when
// there are any, as any partition error is) and their answers,
// TOPIC_AUTHORIZATION_FAILED on every partition.
func (b *Broker) fetchDenied(req *server.Request, r *kmsg.FetchRequest) (*kmsg.FetchRequest, []kmsg.FetchResponseTopic) {
	if !b.authzOn {
		return r, nil
	}
	replicaID := r.ReplicaID
	if r.Version >= 15 {
		replicaID = r.ReplicaState.ID
	}
	follower := replicaID >= 0
	if follower && b.authorizedCluster(req, opClusterAction) {
		return r, nil
	}
	im := b.image()
	var denied []kmsg.FetchResponseTopic
	var allowed []kmsg.FetchRequestTopic
	for _, rt := range r.Topics {
		if !follower && !b.topicDenied(req, im, opRead, rt.Topic, rt.TopicID, r.Version >= 13) {
			allowed = append(allowed, rt)
			continue
		}
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, kerr.TopicAuthorizationFailed.Code
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset, sp.PreferredReadReplica = -1, -1, -1, -1
			sp.RecordBatches = []byte{} // librdkafka rejects a null record set, errors included
			st.Partitions = append(st.Partitions, sp)
		}
		denied = append(denied, st)
	}
	if denied == nil {
		return r, nil
	}
	rest := *r
	rest.Topics, rest.MaxWaitMillis = allowed, 0
	return &rest, denied
}

// incrementalFetch reports whether r continues a fetch session (KIP-227):
// from v7 on, any epoch but 0 (INITIAL, a full fetch that opens a session)
// and -1 (FINAL, a sessionless full fetch).
func incrementalFetch(r *kmsg.FetchRequest) bool {
	return r.Version >= 7 && r.SessionEpoch != 0 && r.SessionEpoch != -1
}

// fetchLongPoll answers a fetch once MinBytes are there, an error shows
// or MaxWaitMillis pass (longpoll.go).
func (b *Broker) fetchLongPoll(r *kmsg.FetchRequest, conn *server.Conn) *kmsg.FetchResponse {
	if incrementalFetch(r) {
		// We never hand out session ids, so any session is unknown.
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp
	}
	var bufs [][]byte
	release := func() {
		for _, b := range bufs {
			server.PutBuf(b)
		}
		bufs = bufs[:0]
	}
	// The response's record buffers go back to the pool once encoded.
	defer conn.AfterEncode(release)
	var resp *kmsg.FetchResponse
	longPoll(conn, r.MaxWaitMillis, nil, func() (bool, []*replica.Partition) {
		release() // a read we are not answering with
		read, n, parts, errs := b.readFetch(r, &bufs)
		resp = read
		return n >= int(r.MinBytes) || n > 0 && r.MinBytes <= 0 || errs, parts
	})
	fetchHintsOn(b.image(), connListener(conn), resp)
	return resp
}

// readFetch reads every requested partition once. It returns the response,
// the record bytes in it, the partitions read and whether any partition
// had an error (which makes the fetch answer at once, as Kafka does).
func (b *Broker) readFetch(r *kmsg.FetchRequest, bufs *[][]byte) (*kmsg.FetchResponse, int, []*replica.Partition, bool) {
	alloc := func(n int) []byte {
		buf := server.GetBuf(n)
		*bufs = append(*bufs, buf)
		return buf
	}
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	im := b.image()
	replicaID := r.ReplicaID
	if r.Version >= 15 {
		replicaID = r.ReplicaState.ID
	}
	budget := int(r.MaxBytes)
	if budget <= 0 {
		budget = 50 << 20
	}
	total := 0
	hadErr := false
	var parts []*replica.Partition
	resp.Topics = make([]kmsg.FetchResponseTopic, 0, len(r.Topics))
	for _, rt := range r.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		t, terr := lookupTopic(im, rt.Topic, rt.TopicID, r.Version >= 13)
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			sp := &st.Partitions[i]
			*sp = kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			sp.PreferredReadReplica = -1
			sp.RecordBatches = []byte{} // librdkafka rejects a null record set, errors included
			if terr != nil {
				sp.ErrorCode = code(terr)
				hadErr = true
				continue
			}
			p, err := b.partition(t, rp.Partition)
			if err == nil {
				err = p.CheckEpoch(rp.CurrentLeaderEpoch)
			}
			if err != nil {
				sp.ErrorCode = code(err)
				hadErr = true
				continue
			}
			parts = append(parts, p)
			max := rp.PartitionMaxBytes
			if rem := budget - total; int(max) > rem {
				max = int32(rem)
			}
			var res replica.ReadResult
			switch {
			case replicaID >= 0:
				res, err = p.ReadReplica(replicaID, rp.FetchOffset, max, alloc)
				res.LastStableOffset = res.HighWatermark
			case r.IsolationLevel == 1:
				res, err = p.ReadCommitted(rp.FetchOffset, max, total == 0, alloc)
			default:
				res, err = p.Read(rp.FetchOffset, max, total == 0, alloc)
			}
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = res.HighWatermark, res.LastStableOffset, res.LogStartOffset
			if err != nil {
				sp.ErrorCode = code(err)
				hadErr = true
				continue
			}
			if r.IsolationLevel == 1 && replicaID < 0 {
				sp.AbortedTransactions = make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, len(res.Aborted))
				for k, a := range res.Aborted {
					sp.AbortedTransactions[k] = kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					sp.AbortedTransactions[k].ProducerID, sp.AbortedTransactions[k].FirstOffset = a.ProducerID, a.FirstOffset
				}
			}
			sp.RecordBatches = res.Records
			if sp.RecordBatches == nil {
				sp.RecordBatches = []byte{} // librdkafka rejects a null record set
			}
			total += len(res.Records)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if hadErr {
		fillFetchLeaders(im, resp)
	}
	return resp, total, parts, hadErr
}
