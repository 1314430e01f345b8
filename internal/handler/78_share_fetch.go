package handler

// ShareFetch (key 78), versions 0-2: share consumers (KIP-932) acquire
// records under a lock and piggyback acknowledgements. Share sessions
// (ShareSessionEpoch 0 opens, -1 closes, otherwise the next epoch;
// partitions added by listing them, removed by ForgottenTopicsData) are
// kept per (group, member) in internal/sharepart; the member must be in
// the share group when this node is its coordinator (UNKNOWN_MEMBER_ID
// otherwise). Piggybacked acknowledgements are applied first, then every
// partition of the session is read from where its share-partition hands
// out records next, up to the high watermark (the last stable offset for
// a group with share.isolation.level=read_committed, which archives the
// records of aborted transactions instead; markers are archived at either
// level), and acquired: the response
// carries the batches holding acquired records and AcquiredRecords
// (first, last, delivery count), at most MaxRecords records (v1+;
// ShareAcquireMode's record limit is always strict), in AcquiredRecords
// entries of at most BatchSize records (v1+). It long-polls like Fetch
// for MaxWaitMillis until something is acquired (new data in the log, a
// release, an expired lock or an ended backoff wakes it); MinBytes is
// read as "at least one record", since acquired records cannot be put
// back to wait for more. v2's IsRenewAck (KIP-1222) applies RENEW
// acknowledgements and fetches nothing.
//
// Share-partition state runs on the partition leader and every change
// (acquisitions with their delivery counts included) is durable in
// __share_group_state before the response (internal/sharepart,
// internal/sharestate); when it cannot be made durable the partition
// answers COORDINATOR_NOT_AVAILABLE and nothing is handed out. Not honoured: releasing a
// session's records when its connection closes (they are released when
// the session is closed or the member leaves, else when their locks
// expire), SHARE_SESSION_LIMIT_REACHED (no session limit).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/share"
	"github.com/berthmq/berth/internal/sharepart"
)

func init() { register(78, 0, 2, (*Broker).shareFetch) }

// defaultShareMaxRecords is v0's record limit (it has no MaxRecords).
const defaultShareMaxRecords = 500

func (b *Broker) shareFetch(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.ShareFetchRequest)
	resp := r.ResponseKind().(*kmsg.ShareFetchResponse)
	if b.Shares == nil { // a handler built without share-partitions (tests)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return now(resp), nil
	}
	if b.groupDenied(req, opRead, deref(r.GroupID)) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return now(resp), nil
	}
	r = b.shareFetchDenied(req, r, resp)
	fail := func(err error) (server.Reply, error) {
		resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
		return now(resp), nil
	}
	group, member := deref(r.GroupID), deref(r.MemberID)
	resp.AcquisitionLockTimeoutMillis = int32(b.Shares.LockDuration(group).Milliseconds())
	hasAcks := false
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			hasAcks = hasAcks || len(p.AcknowledgementBatches) > 0
		}
	}
	switch {
	case group == "" || member == "":
		return fail(kerr.InvalidRequest)
	case r.ShareSessionEpoch == 0 && hasAcks:
		return fail(kerr.InvalidRequest)
	}
	if r.ShareSessionEpoch != -1 {
		if err := b.shareMemberCheck(group, member); err != nil {
			return fail(err)
		}
	}
	var add, forget []sharepart.SessionPartition
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			add = append(add, sharepart.SessionPartition{TopicID: t.TopicID, Partition: p.Partition})
		}
	}
	for _, t := range r.ForgottenTopicsData {
		for _, p := range t.Partitions {
			forget = append(forget, sharepart.SessionPartition{TopicID: t.TopicID, Partition: p})
		}
	}
	parts, closed, err := b.Shares.Sessions.Fetch(group, member, r.ShareSessionEpoch, add, forget)
	if err != nil {
		return fail(err)
	}

	// The response's partitions: each requested one, then the session's.
	im := b.image()
	type slot struct{ t, p int }
	slots := map[sharepart.SessionPartition]slot{}
	at := func(tp sharepart.SessionPartition) *kmsg.ShareFetchResponseTopicPartition {
		if s, ok := slots[tp]; ok {
			return &resp.Topics[s.t].Partitions[s.p]
		}
		ti := -1
		for i := range resp.Topics {
			if resp.Topics[i].TopicID == tp.TopicID {
				ti = i
			}
		}
		if ti < 0 {
			rt := kmsg.NewShareFetchResponseTopic()
			rt.TopicID = tp.TopicID
			resp.Topics = append(resp.Topics, rt)
			ti = len(resp.Topics) - 1
		}
		sp := kmsg.NewShareFetchResponseTopicPartition()
		sp.Partition = tp.Partition
		sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = -1, -1
		sp.Records = []byte{}
		resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, sp)
		slots[tp] = slot{ti, len(resp.Topics[ti].Partitions) - 1}
		return &resp.Topics[ti].Partitions[len(resp.Topics[ti].Partitions)-1]
	}
	if b.authzOn {
		// Every partition of the session, not only those this request
		// names: READ may have been revoked since they joined it, or the
		// session (keyed by group and member) be used by another principal.
		kept := make([]sharepart.SessionPartition, 0, len(parts))
		for _, tp := range parts {
			if t := im.TopicByID(tp.TopicID); t != nil && !b.authorized(req, opRead, rTopic, t.Name) {
				at(tp).ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			kept = append(kept, tp)
		}
		parts = kept
	}
	// Acknowledgements first.
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			sp := at(sharepart.SessionPartition{TopicID: t.TopicID, Partition: p.Partition})
			if len(p.AcknowledgementBatches) == 0 {
				continue
			}
			bs := make([]ackBatch, len(p.AcknowledgementBatches))
			for i, a := range p.AcknowledgementBatches {
				bs[i] = ackBatch{a.FirstOffset, a.LastOffset, a.AcknowledgeTypes}
			}
			if err := b.ackShare(im, group, member, t.TopicID, p.Partition, bs, r.Version >= 2 && r.IsRenewAck); err != nil {
				sp.AcknowledgeErrorCode, sp.AcknowledgeErrorMessage = code(err), errMsg(err)
			}
		}
	}
	if closed {
		// A closed session gives back what the member still holds.
		b.Shares.MembersGone(group, []string{member})
		fillShareFetchLeaders(im, resp)
		shareFetchHintsOn(im, listenerOf(req), resp)
		return now(resp), nil
	}
	if r.Version >= 2 && r.IsRenewAck {
		fillShareFetchLeaders(im, resp)
		shareFetchHintsOn(im, listenerOf(req), resp)
		return now(resp), nil
	}
	for _, tp := range parts {
		at(tp)
	}
	conn := req.Conn
	return func() kmsg.Response {
		b.shareLongPoll(r, conn, group, member, parts, at, resp)
		return resp
	}, nil
}

// shareLongPoll acquires records of the session's partitions into resp,
// waiting up to MaxWaitMillis for something to acquire (longpoll.go).
func (b *Broker) shareLongPoll(r *kmsg.ShareFetchRequest, conn *server.Conn, group, member string, parts []sharepart.SessionPartition,
	at func(sharepart.SessionPartition) *kmsg.ShareFetchResponseTopicPartition, resp *kmsg.ShareFetchResponse) {
	var bufs [][]byte
	conn.AfterEncode(func() {
		for _, b := range bufs {
			server.PutBuf(b)
		}
	})
	alloc := func(n int) []byte {
		buf := server.GetBuf(n)
		bufs = append(bufs, buf)
		return buf
	}
	var im *metadata.Image
	if longPoll(conn, r.MaxWaitMillis, b.Shares.Changed, func() (bool, []*replica.Partition) {
		im = b.image()
		got, errs, watched := b.readShare(im, r, group, member, parts, at, alloc)
		return got || errs, watched
	}) {
		fillShareFetchLeaders(im, resp)
		shareFetchHintsOn(im, connListener(conn), resp)
	}
}

// readShare acquires from every session partition once. It reports
// whether anything was acquired, whether a partition had an error, and
// the partitions to watch for new data.
func (b *Broker) readShare(im *metadata.Image, r *kmsg.ShareFetchRequest, group, member string, parts []sharepart.SessionPartition,
	at func(sharepart.SessionPartition) *kmsg.ShareFetchResponseTopicPartition, alloc func(int) []byte) (got, errs bool, watched []*replica.Partition) {
	budget := int(r.MaxBytes)
	if budget <= 0 {
		budget = 50 << 20
	}
	records := defaultShareMaxRecords
	if r.Version >= 1 {
		records = int(r.MaxRecords)
	}
	for _, tp := range parts {
		sp := at(tp)
		sp.ErrorCode, sp.ErrorMessage = 0, nil
		t, p, err := b.sharePartition(im, tp.TopicID, tp.Partition)
		if err != nil {
			sp.ErrorCode, sp.ErrorMessage = code(err), errMsg(err)
			errs = true
			continue
		}
		watched = append(watched, p)
		if budget <= 0 || records <= 0 {
			continue
		}
		f, err := b.Shares.Acquire(share.Key{Group: group, TopicID: tp.TopicID, Partition: tp.Partition}, t.Name, member, p, int32(min(budget, 1<<31-1)), records, alloc)
		if err != nil {
			sp.ErrorCode, sp.ErrorMessage = code(err), errMsg(err)
			errs = true
			continue
		}
		if len(f.Acquired) == 0 {
			continue
		}
		got = true
		sp.Records = f.Records
		budget -= len(f.Records)
		for _, a := range f.Acquired {
			records -= int(a.Last - a.First + 1)
			for first := a.First; first <= a.Last; {
				last := a.Last
				if r.Version >= 1 && r.BatchSize > 0 {
					last = min(last, first+int64(r.BatchSize)-1)
				}
				ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
				ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = first, last, int16(a.DeliveryCount)
				sp.AcquiredRecords = append(sp.AcquiredRecords, ar)
				first = last + 1
			}
		}
	}
	return got, errs, watched
}

// fillShareFetchLeaders names the current leader of every partition
// answered NOT_LEADER_OR_FOLLOWER, with its endpoint.
func fillShareFetchLeaders(im *metadata.Image, resp *kmsg.ShareFetchResponse) {
	eps := endpoints{im: im}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.ErrorCode != kerr.NotLeaderForPartition.Code && p.AcknowledgeErrorCode != kerr.NotLeaderForPartition.Code {
				continue
			}
			if leader, epoch, ok := leaderOf(im, "", t.TopicID, p.Partition); ok && leader >= 0 {
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leader, epoch
				eps.add(leader)
			}
		}
	}
	for _, b := range eps.list {
		resp.NodeEndpoints = append(resp.NodeEndpoints, kmsg.ShareFetchResponseNodeEndpoint{NodeID: b.ID, Host: b.Host, Port: b.Port, Rack: rackPtr(b.Rack)})
	}
}
