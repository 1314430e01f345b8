package handler

// BerthAnnotateShareRecords (key 32000, Berth's own), version 0
// (flexible): a share-group member attaches its error text to records it
// holds, just before it REJECTs them, so the dead-letter record carries
// the text in __dlq.errors.berth.client.error (stock Kafka clients cannot
// send text with an acknowledgement). Sent to the partition leader like
// ShareAcknowledge, outside any share session. Request level:
// INVALID_REQUEST for a blank group or member, UNKNOWN_MEMBER_ID when this
// node coordinates the group and the member is not in it. Per partition:
// INVALID_RECORD_STATE when a record of the range is not acquired by the
// member under a live lock (nothing changes), INVALID_REQUEST for a
// reversed range, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_ID. The wire type
// is pkg/berthmsg (docs/compatibility.md, "Berth extensions").
//
// Berth's API keys are not kmsg's: registerBerth records how to make an
// empty request (the server asks through NewRequest), they are listed in
// ApiVersions (kgo sends no key a broker did not list) but not in Served,
// which lists Kafka's APIs.

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/share"
	"github.com/berthmq/berth/pkg/berthmsg"
)

func init() {
	registerBerth(berthmsg.AnnotateShareRecordsKey, berthmsg.AnnotateShareRecordsName, 0, 0,
		func() kmsg.Request { return berthmsg.NewAnnotateShareRecordsRequest() }, (*Broker).annotateShareRecords)
}

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

func (b *Broker) annotateShareRecords(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*berthmsg.AnnotateShareRecordsRequest)
	resp := r.ResponseKind().(*berthmsg.AnnotateShareRecordsResponse)
	fail := func(err error) (server.Reply, error) {
		resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
		return now(resp), nil
	}
	switch {
	case b.Shares == nil: // a handler built without share-partitions (tests)
		return fail(kerr.UnknownServerError)
	case r.GroupID == "" || r.MemberID == "":
		return fail(kerr.InvalidRequest)
	}
	if err := b.shareMemberCheck(r.GroupID, r.MemberID); err != nil {
		return fail(err)
	}
	im := b.image()
	for _, t := range r.Topics {
		rt := berthmsg.AnnotateShareRecordsResponseTopic{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			rp := berthmsg.AnnotateShareRecordsResponsePartition{Partition: p.Partition}
			err := func() error {
				if _, _, err := b.sharePartition(im, t.TopicID, p.Partition); err != nil {
					return err
				}
				k := share.Key{Group: r.GroupID, TopicID: t.TopicID, Partition: p.Partition}
				return b.Shares.Annotate(k, r.MemberID, p.FirstOffset, p.LastOffset, p.ErrorText)
			}()
			rp.ErrorCode, rp.ErrorMessage = code(err), errMsg(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return now(resp), nil
}
