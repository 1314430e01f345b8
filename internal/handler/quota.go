package handler

// Client quota enforcement, as Kafka's ClientQuotaManager does it, around
// every key's handler (withQuotas, called from Handle):
//
//   - Produce: producer_byte_rate and Berth's producer_record_rate are
//     recorded; over quota, the request is served and answered at once
//     with throttle_time_ms, and the connection is muted for that long
//     (KIP-219: its read loop reads nothing more). With the reject action
//     (the entity's violation_action=1 or quota.violation.action=reject)
//     nothing is appended: every partition gets THROTTLING_QUOTA_EXCEEDED
//     and throttle_time_ms says when to retry. Berth's max_record_bytes
//     refuses a partition's batch holding a larger record with
//     MESSAGE_TOO_LARGE.
//   - Fetch (consumers, not followers): consumer_byte_rate is recorded
//     once the response is read; over quota the data is dropped, the
//     response carries no records and throttle_time_ms (as Kafka answers),
//     and the connection is muted.
//   - CreateTopics, CreatePartitions, DeleteTopics: controller_mutation_rate
//     counts partitions created or deleted; once over, the versions that
//     know THROTTLING_QUOTA_EXCEEDED (KIP-599: v6+, v3+, v5+) are refused
//     with it, older ones are served and throttled.
//   - ShareFetch: counted against consumer_byte_rate and throttled, never
//     answered empty (its records are acquired for the consumer).
//   - Every request but ApiVersions, SASL and the broker-to-broker keys
//     (WriteTxnMarkers, the share state APIs, follower fetches): request_percentage, the
//     handler's own time (the synchronous part on the read loop) as a
//     percentage of one thread.
//
// Nothing waits in a goroutine: the throttle is the connection's mute.

import (
	"context"
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

// quotaReq is one request as the quotas see it.
type quotaReq struct {
	b    *Broker
	req  *server.Request
	im   *metadata.Image
	user string // the principal's name: Kafka's user entity
	pc   *auth.PrincipalCounters
}

// withQuotas serves req through fn under the client quotas.
func (b *Broker) withQuotas(ctx context.Context, req *server.Request, fn handlerFunc) (server.Reply, error) {
	if b.Quotas == nil || req.Conn == nil {
		return fn(b, ctx, req)
	}
	p := req.Conn.Principal()
	q := &quotaReq{b: b, req: req, im: b.image(), user: p.Name, pc: b.ClientMetrics.For(p)}
	switch req.Key {
	case 0:
		return q.produce(ctx, fn)
	case 1:
		return q.fetch(ctx, fn)
	case 19, 20, 37:
		return q.mutation(ctx, fn)
	case 78:
		return q.shareFetch(ctx, fn)
	case 17, 18, 36: // ApiVersions and SASL: never throttled, as in Kafka
		return fn(b, ctx, req)
	case 27, 83, 84, 85, 86: // between brokers (CLUSTER_ACTION): exempt, as in Kafka
		return fn(b, ctx, req)
	}
	return q.timed(ctx, fn, 0, "")
}

func (q *quotaReq) resolve(key string) (auth.QuotaMatch, bool) {
	return auth.ResolveQuota(q.im, q.user, q.req.ClientID, key)
}

// timed runs fn, records its time against request_percentage and answers
// with the larger of that throttle and thr (for quota).
func (q *quotaReq) timed(ctx context.Context, fn handlerFunc, thr time.Duration, quota string) (server.Reply, error) {
	if thr == 0 && len(q.im.ClientQuotas) == 0 {
		return fn(q.b, ctx, q.req) // no quota at all: no clock read
	}
	start := time.Now()
	reply, err := fn(q.b, ctx, q.req)
	if err != nil {
		return reply, err
	}
	if m, ok := q.resolve(auth.QuotaRequestPercentage); ok {
		el := time.Since(start)
		// Bounded by one window, as Kafka bounds request-time throttles.
		if t := q.b.Quotas.RecordBounded(m.Sensor, m.Value, el.Seconds()*100, q.b.Quotas.Window()); t > 0 {
			q.pc.Throttled(auth.QuotaRequestPercentage, int64(t))
			q.req.Conn.Mute(t)
			reply = withThrottle(reply, t)
		}
	}
	if thr > 0 {
		q.pc.Throttled(quota, int64(thr))
		q.req.Conn.Mute(thr)
		reply = withThrottle(reply, thr)
	}
	return reply, nil
}

// withThrottle makes reply's response carry at least t as throttle_time_ms.
func withThrottle(reply server.Reply, t time.Duration) server.Reply {
	if reply == nil {
		return nil
	}
	ms := int32(min(t.Milliseconds(), 1<<31-1))
	if ms == 0 {
		ms = 1
	}
	return func() kmsg.Response {
		resp := reply()
		if tr, ok := resp.(kmsg.ThrottleResponse); ok {
			if cur, _ := tr.Throttle(); cur < ms {
				if st, ok := resp.(kmsg.SetThrottleResponse); ok {
					st.SetThrottle(ms)
				}
			}
		}
		return resp
	}
}

// violationReject reports whether a produce over quota is rejected
// rather than throttled: the entity's violation_action, else
// quota.violation.action.
func (q *quotaReq) violationReject() bool {
	if m, ok := q.resolve(auth.QuotaViolationAction); ok {
		return m.Value == auth.ActionReject
	}
	return q.b.brokerValue(q.im, "quota.violation.action") == "reject"
}

// produceSizes returns the bytes and records of a partition's record set
// (records counted from the batch headers).
func produceSizes(recs []byte) (bytes, records int64) {
	bytes = int64(len(recs))
	for len(recs) >= batch.HeaderSize {
		h := batch.DecodeHeader(recs)
		records += int64(binary.BigEndian.Uint32(recs[batch.HeaderSize-4:]))
		n := h.Size()
		if n <= 0 || n > len(recs) {
			break
		}
		recs = recs[n:]
	}
	return bytes, records
}

// maxRecordSize is the largest record in a record set, as encoded
// (uncompressed): what max_record_bytes limits.
func maxRecordSize(recs []byte, scratch *batch.Scratch) int64 {
	var largest int64
	for len(recs) >= batch.HeaderSize {
		h, err := batch.ParseHeader(recs)
		if err != nil || h.Size() > len(recs) || h.Size() < batch.HeaderSize {
			return largest // Append refuses it anyway
		}
		body := recs[batch.HeaderSize:h.Size()]
		if h.Codec() != batch.CodecNone {
			if body, err = scratch.Decompress(h.Codec(), body); err != nil {
				return largest
			}
		}
		for len(body) > 0 {
			l, n := binary.Varint(body)
			if n <= 0 || l < 0 || int64(len(body)-n) < l {
				break
			}
			largest = max(largest, l)
			body = body[n+int(l):]
		}
		recs = recs[h.Size():]
	}
	return largest
}

type produceRefusal struct {
	topic   string
	id      [16]byte
	part    int32
	errCode int16
}

func (q *quotaReq) produce(ctx context.Context, fn handlerFunc) (server.Reply, error) {
	r := q.req.Body.(*kmsg.ProduceRequest)
	var tooLarge []produceRefusal
	if m, ok := q.resolve(auth.QuotaMaxRecordBytes); ok {
		scratch := batch.GetScratch()
		for ti := range r.Topics {
			rt := &r.Topics[ti]
			kept := rt.Partitions[:0]
			for _, rp := range rt.Partitions {
				if maxRecordSize(rp.Records, scratch) > int64(m.Value) {
					tooLarge = append(tooLarge, produceRefusal{rt.Topic, rt.TopicID, rp.Partition, kerr.MessageTooLarge.Code})
					continue
				}
				kept = append(kept, rp)
			}
			rt.Partitions = kept
		}
		batch.PutScratch(scratch)
		for range tooLarge {
			q.pc.Rejected(auth.QuotaMaxRecordBytes)
		}
	}
	var bytes, records int64
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			by, rc := produceSizes(rp.Records)
			bytes, records = bytes+by, records+rc
		}
	}
	var thr time.Duration
	var over string
	type recorded struct {
		k auth.SensorKey
		v float64
	}
	var done []recorded
	for _, s := range [...]struct {
		key string
		v   int64
	}{{auth.QuotaProducerByteRate, bytes}, {auth.QuotaProducerRecordRate, records}} {
		m, ok := q.resolve(s.key)
		if !ok {
			continue
		}
		t := q.b.Quotas.Record(m.Sensor, m.Value, float64(s.v))
		done = append(done, recorded{m.Sensor, float64(s.v)})
		if t > thr {
			thr, over = t, s.key
		}
	}
	if thr > 0 && q.violationReject() {
		for _, d := range done {
			q.b.Quotas.Unrecord(d.k, d.v)
		}
		q.pc.Rejected(over)
		q.req.Conn.Mute(thr)
		if r.Acks == 0 {
			return nil, nil
		}
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				tooLarge = append(tooLarge, produceRefusal{rt.Topic, rt.TopicID, rp.Partition, kerr.ThrottlingQuotaExceeded.Code})
			}
		}
		addRefusals(resp, tooLarge)
		return withThrottle(now(resp), thr), nil
	}
	reply, err := q.timed(ctx, fn, thr, over)
	if err != nil {
		return reply, err
	}
	pc := q.pc
	if reply == nil { // acks=0: no answer to look at
		pc.BytesIn.Add(bytes)
		pc.RecordsIn.Add(records)
		return nil, nil
	}
	// The response lists the request's topics and partitions in order
	// (00_produce.go); refusals are added after them.
	return func() kmsg.Response {
		resp := reply()
		pr, ok := resp.(*kmsg.ProduceResponse)
		if !ok {
			return resp
		}
		for i := range min(len(pr.Topics), len(r.Topics)) {
			st, rt := &pr.Topics[i], &r.Topics[i]
			for j := range min(len(st.Partitions), len(rt.Partitions)) {
				if st.Partitions[j].ErrorCode == 0 {
					by, rc := produceSizes(rt.Partitions[j].Records)
					pc.BytesIn.Add(by)
					pc.RecordsIn.Add(rc)
				}
			}
		}
		addRefusals(pr, tooLarge)
		return pr
	}, nil
}

// addRefusals adds refused partitions to a produce response.
func addRefusals(resp *kmsg.ProduceResponse, refs []produceRefusal) {
	for _, f := range refs {
		sp := kmsg.NewProduceResponseTopicPartition()
		sp.Partition, sp.ErrorCode = f.part, f.errCode
		sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
		i := 0
		for i < len(resp.Topics) && (resp.Topics[i].Topic != f.topic || resp.Topics[i].TopicID != f.id) {
			i++
		}
		if i == len(resp.Topics) {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = f.topic, f.id
			resp.Topics = append(resp.Topics, st)
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, sp)
	}
}

func (q *quotaReq) fetch(ctx context.Context, fn handlerFunc) (server.Reply, error) {
	r := q.req.Body.(*kmsg.FetchRequest)
	replicaID := r.ReplicaID
	if r.Version >= 15 {
		replicaID = r.ReplicaState.ID
	}
	if replicaID >= 0 { // a follower: replication is not a client
		return fn(q.b, ctx, q.req)
	}
	m, limited := q.resolve(auth.QuotaConsumerByteRate)
	if limited {
		// As Kafka: a fetch never asks for more than the quota allows
		// over the window, so one large read cannot stay over it for ever.
		if w := int64(m.Value * q.b.Quotas.MinSpan().Seconds()); w < int64(r.MaxBytes) || r.MaxBytes <= 0 {
			r.MaxBytes = int32(max(1, min(w, 1<<31-1)))
		}
	}
	reply, err := q.timed(ctx, fn, 0, "")
	if err != nil || reply == nil {
		return reply, err
	}
	conn, pc, quotas := q.req.Conn, q.pc, q.b.Quotas
	return func() kmsg.Response {
		resp := reply()
		fr, ok := resp.(fetchResponse)
		if !ok || fr.FetchResponse == nil {
			return resp
		}
		var bytes, records int64
		for _, t := range fr.Topics {
			for _, p := range t.Partitions {
				by, rc := produceSizes(p.RecordBatches)
				bytes, records = bytes+by, records+rc
			}
		}
		if limited {
			if t := quotas.Record(m.Sensor, m.Value, float64(bytes)); t > 0 {
				// Kafka's answer to a fetch over quota: no data, the
				// throttle time, the connection muted.
				quotas.Unrecord(m.Sensor, float64(bytes))
				for i := range fr.Topics {
					for j := range fr.Topics[i].Partitions {
						fr.Topics[i].Partitions[j].RecordBatches = []byte{}
					}
				}
				ms := int32(min(t.Milliseconds(), 1<<31-1))
				fr.ThrottleMillis = max(fr.ThrottleMillis, max(ms, 1))
				conn.Mute(t)
				pc.Throttled(auth.QuotaConsumerByteRate, int64(t))
				return fr
			}
		}
		pc.BytesOut.Add(bytes)
		pc.RecordsOut.Add(records)
		return fr
	}, nil
}

// shareFetch counts a share consumer's bytes and records out and holds it
// to consumer_byte_rate by throttling only: the records it was given are
// acquired for it (locked) and are never dropped from the answer.
func (q *quotaReq) shareFetch(ctx context.Context, fn handlerFunc) (server.Reply, error) {
	reply, err := q.timed(ctx, fn, 0, "")
	if err != nil || reply == nil {
		return reply, err
	}
	m, limited := q.resolve(auth.QuotaConsumerByteRate)
	conn, pc, quotas := q.req.Conn, q.pc, q.b.Quotas
	return func() kmsg.Response {
		resp := reply()
		sr, ok := resp.(*kmsg.ShareFetchResponse)
		if !ok {
			return resp
		}
		var bytes, records int64
		for _, t := range sr.Topics {
			for _, p := range t.Partitions {
				bytes += int64(len(p.Records))
				for _, a := range p.AcquiredRecords {
					records += a.LastOffset - a.FirstOffset + 1
				}
			}
		}
		pc.BytesOut.Add(bytes)
		pc.RecordsOut.Add(records)
		if limited && bytes > 0 {
			if t := quotas.Record(m.Sensor, m.Value, float64(bytes)); t > 0 {
				sr.ThrottleMillis = max(sr.ThrottleMillis, int32(max(1, min(t.Milliseconds(), 1<<31-1))))
				conn.Mute(t)
				pc.Throttled(auth.QuotaConsumerByteRate, int64(t))
			}
		}
		return sr
	}, nil
}

// strictMutation reports whether the request's version knows
// THROTTLING_QUOTA_EXCEEDED (KIP-599).
func strictMutation(key, version int16) bool {
	switch key {
	case 19:
		return version >= 6
	case 20:
		return version >= 5
	case 37:
		return version >= 3
	}
	return false
}

func (q *quotaReq) mutation(ctx context.Context, fn handlerFunc) (server.Reply, error) {
	m, ok := q.resolve(auth.QuotaControllerMutationRate)
	if !ok {
		return q.timed(ctx, fn, 0, "")
	}
	if t := q.b.Quotas.Throttle(m.Sensor, m.Value); t > 0 && strictMutation(q.req.Key, q.req.Version) {
		q.pc.Rejected(auth.QuotaControllerMutationRate)
		q.req.Conn.Mute(t)
		return withThrottle(now(mutationRefused(q.req.Body)), t), nil
	}
	pre := q.im
	reply, err := q.timed(ctx, fn, 0, "")
	if err != nil {
		return reply, err
	}
	post := q.b.image()
	var n int
	switch r := q.req.Body.(type) {
	case *kmsg.CreateTopicsRequest:
		if r.ValidateOnly {
			return reply, nil
		}
		for _, t := range r.Topics {
			if pre.Topic(t.Topic) == nil {
				if pt := post.Topic(t.Topic); pt != nil {
					n += len(pt.Partitions)
				}
			}
		}
	case *kmsg.CreatePartitionsRequest:
		if r.ValidateOnly {
			return reply, nil
		}
		for _, t := range r.Topics {
			if a, b := pre.Topic(t.Topic), post.Topic(t.Topic); a != nil && b != nil {
				n += max(0, len(b.Partitions)-len(a.Partitions))
			}
		}
	case *kmsg.DeleteTopicsRequest:
		for _, t := range pre.Topics {
			if post.Topic(t.Name) == nil {
				n += len(t.Partitions)
			}
		}
	}
	if n == 0 {
		return reply, nil
	}
	if t := q.b.Quotas.Record(m.Sensor, m.Value, float64(n)); t > 0 {
		q.pc.Throttled(auth.QuotaControllerMutationRate, int64(t))
		q.req.Conn.Mute(t)
		reply = withThrottle(reply, t)
	}
	return reply, nil
}

// mutationRefused answers a CreateTopics, CreatePartitions or
// DeleteTopics request with THROTTLING_QUOTA_EXCEEDED for every topic.
func mutationRefused(body kmsg.Request) kmsg.Response {
	e := kerr.ThrottlingQuotaExceeded
	msg := "controller_mutation_rate quota exceeded; retry after throttle_time_ms"
	switch r := body.(type) {
	case *kmsg.CreateTopicsRequest:
		resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range r.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode, st.ErrorMessage = t.Topic, e.Code, &msg
			st.NumPartitions, st.ReplicationFactor = -1, -1
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	case *kmsg.CreatePartitionsRequest:
		resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, t := range r.Topics {
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic, st.ErrorCode, st.ErrorMessage = t.Topic, e.Code, &msg
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	case *kmsg.DeleteTopicsRequest:
		resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
		for _, t := range r.Topics {
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic, st.TopicID, st.ErrorCode, st.ErrorMessage = t.Topic, t.TopicID, e.Code, &msg
			resp.Topics = append(resp.Topics, st)
		}
		for _, name := range r.TopicNames { // v0-5
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic, st.ErrorCode, st.ErrorMessage = kmsg.StringPtr(name), e.Code, &msg
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	return body.ResponseKind()
}

// AcceptConnection is server.Config.Accept: the ip's
// connection_creation_rate quota (over it: refused; refused connections
// are not counted) and the broker-wide max.connection.creation.rate
// (over it: accepting waits).
func (b *Broker) AcceptConnection(host string) (time.Duration, bool) {
	if b.Quotas == nil {
		return 0, false
	}
	if im := b.image(); len(im.ClientQuotas) > 0 {
		if a, err := netip.ParseAddr(host); err == nil {
			host = a.Unmap().String()
		}
		if m, ok := auth.ResolveIPQuota(im, host); ok {
			if t := b.Quotas.Record(m.Sensor, m.Value, 1); t > 0 {
				b.Quotas.Unrecord(m.Sensor, 1)
				return 0, true
			}
		}
	}
	if b.Broker == nil {
		return 0, false
	}
	if rate := b.Broker.Int("max.connection.creation.rate"); rate > 0 && rate < 1<<31-1 {
		return b.Quotas.Record(auth.SensorKey{Key: "max.connection.creation.rate"}, float64(rate), 1), false
	}
	return 0, false
}

// quotaDefaults makes the quota sensors and per-principal counters from
// the broker settings when the node gave none.
func (b *Broker) quotaDefaults() {
	n, w, maxP := 11, time.Second, 1000
	if b.Broker != nil {
		n = int(b.Broker.Int("quota.window.num"))
		w = time.Duration(b.Broker.Int("quota.window.size.seconds")) * time.Second
		maxP = int(b.Broker.Int("quota.metrics.max.principals"))
	}
	if b.Quotas == nil {
		b.Quotas = auth.NewQuotas(n, w)
	}
	if b.ClientMetrics == nil {
		b.ClientMetrics = auth.NewClientMetrics(maxP)
	}
}
