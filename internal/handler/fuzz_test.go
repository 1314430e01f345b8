package handler_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/handler"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// quietTB drops the broker's log lines: a fuzz run logs a warning for
// every malformed request, and a fuzz test keeps its log in memory.
type quietTB struct{ testing.TB }

func (quietTB) Log(...any)          {}
func (quietTB) Logf(string, ...any) {}

const fuzzTopic = "fuzz"

// fuzzSeeds are valid requests for every served key at its max version,
// plus requests that name the fuzz topic so mutations reach the code
// behind the topic lookups.
func fuzzSeeds() []kmsg.Request {
	var out []kmsg.Request
	for _, a := range handler.Served() {
		r := kmsg.RequestForKey(a.Key)
		r.SetVersion(a.Max)
		out = append(out, r)
	}
	topic := fuzzTopic

	produce := kmsg.NewPtrProduceRequest()
	produce.Version, produce.Acks, produce.TimeoutMillis = 9, -1, 1000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = validBatch()
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	out = append(out, produce)

	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.MaxWaitMillis, fetch.MaxBytes = 12, 0, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	out = append(out, fetch)

	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 7
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp, lp.CurrentLeaderEpoch = -3, -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	out = append(out, lo)

	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = &topic
	md.Topics = append(md.Topics, mt)
	out = append(out, md)

	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Version, ct.ValidateOnly = 7, true
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "fuzz2", -1, -1
	ca := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ca.Partition, ca.Replicas = 0, []int32{1}
	ctt.ReplicaAssignment = append(ctt.ReplicaAssignment, ca)
	ct.Topics = append(ct.Topics, ctt)
	out = append(out, ct)

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version, cp.ValidateOnly = 3, true
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = topic, 3
	cp.Topics = append(cp.Topics, cpt)
	out = append(out, cp)

	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.Version = 2
	drt := kmsg.NewDeleteRecordsRequestTopic()
	drt.Topic = topic
	drp := kmsg.NewDeleteRecordsRequestTopicPartition()
	drp.Offset = 0
	drt.Partitions = append(drt.Partitions, drp)
	dr.Topics = append(dr.Topics, drt)
	out = append(out, dr)

	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.Version = 4
	oet := kmsg.NewOffsetForLeaderEpochRequestTopic()
	oet.Topic = topic
	oep := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	oep.CurrentLeaderEpoch, oep.LeaderEpoch = -1, 0
	oet.Partitions = append(oet.Partitions, oep)
	oe.Topics = append(oe.Topics, oet)
	out = append(out, oe)

	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Version = 4
	dcr := kmsg.NewDescribeConfigsRequestResource()
	dcr.ResourceType, dcr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	dc.Resources = append(dc.Resources, dcr)
	out = append(out, dc)

	ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ia.Version, ia.ValidateOnly = 1, true
	iar := kmsg.NewIncrementalAlterConfigsRequestResource()
	iar.ResourceType, iar.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	iac := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	v := "delete,compact"
	iac.Name, iac.Op, iac.Value = "cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, &v
	iar.Configs = append(iar.Configs, iac)
	ia.Resources = append(ia.Resources, iar)
	out = append(out, ia)
	out = append(out, quotaFuzzSeeds()...)
	return out
}

// validBatch is one uncompressed record, as a producer sends it.
func validBatch() []byte {
	r := kmsg.Record{Value: []byte("v")}
	r.Length = int32(len(r.AppendTo(nil)) - 1)
	b := kmsg.RecordBatch{Magic: 2, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: r.AppendTo(nil)}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32c(out[21:]))
	return out
}

// served is the key and version range an input's apiKey byte selects.
func served(sel byte) handler.APIRange {
	all := handler.Served()
	return all[int(sel)%len(all)]
}

// fuzzArgs turns a request into the fuzz arguments that reproduce it.
func fuzzArgs(r kmsg.Request) (byte, byte, []byte) {
	for i, a := range handler.Served() {
		if a.Key == r.Key() {
			return byte(i), byte(r.GetVersion() - a.Min), r.AppendTo(nil)
		}
	}
	panic(fmt.Sprintf("key %d not served", r.Key()))
}

// FuzzRequests sends arbitrary bodies of every served API and version to a
// real broker over TCP. Whatever the bytes, the broker answers the request
// (with a response that decodes at that version) or closes that
// connection, never panics, never hangs the connection, and keeps serving:
// after each input a fresh connection must get ApiVersions answered.
//
// The broker is started once per process (fuzzing runs this function body
// once in each worker), with one topic the seeds name.
func FuzzRequests(f *testing.F) {
	for _, r := range fuzzSeeds() {
		k, v, b := fuzzArgs(r)
		f.Add(k, v, b)
	}
	n := tc.Start(quietTB{f})
	tc.CreateTopic(quietTB{f}, n.Addr(), fuzzTopic, 2, nil)
	addr := n.Addr()

	f.Fuzz(func(t *testing.T, sel, ver byte, body []byte) {
		api := served(sel)
		version := api.Min + int16(int(ver)%int(api.Max-api.Min+1))
		req := kmsg.RequestForKey(api.Key)
		req.SetVersion(version)
		const corr, probeCorr = 7, 8

		if createsManyPartitions(api.Key, version, body) {
			// Legitimate, but opening thousands of logs takes longer than
			// an input may; it would only slow the search.
			t.Skip("creates more than 100 partitions")
		}

		if api.Key == 1 {
			body = shortPoll(version, body)
		}

		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("broker not accepting: %v", err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		// The fuzzed request, then an ApiVersions: whatever the first is
		// (acks=0 produce gets no answer), the second must be answered
		// after it, unless the broker closes the connection.
		out := frame(api.Key, version, corr, req.IsFlexible(), body)
		out = append(out, frame(18, 0, probeCorr, false, nil)...)
		if _, err := c.Write(out); err != nil {
			t.Fatalf("writing request: %v", err)
		}
		gotCorr, resp, err := readResponse(c)
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err):
			// Closed: only for a body kmsg cannot decode.
			dec := kmsg.RequestForKey(api.Key)
			dec.SetVersion(version)
			if dec.ReadFrom(append([]byte(nil), body...)) == nil {
				t.Fatalf("%s v%d: connection closed on a decodable request", api.Name, version)
			}
		case err != nil:
			t.Fatalf("%s v%d: %v", api.Name, version, err)
		case gotCorr == corr && api.Key == 18:
			// Answered at the version asked, or (an undecodable body) at v0
			// with UNSUPPORTED_VERSION; ApiVersions responses use header v0.
			kr := kmsg.NewPtrApiVersionsResponse()
			kr.Version = version
			if err := kr.ReadFrom(resp); err != nil || kr.ErrorCode != 0 {
				kr = kmsg.NewPtrApiVersionsResponse()
				if err := kr.ReadFrom(resp); err != nil || kr.ErrorCode != 35 || len(kr.ApiKeys) == 0 {
					t.Fatalf("ApiVersions v%d response: error code %d, %v", version, kr.ErrorCode, err)
				}
			}
		case gotCorr == corr:
			if req.IsFlexible() {
				if len(resp) == 0 || resp[0] != 0 {
					t.Fatalf("%s v%d: flexible response without an empty tag section", api.Name, version)
				}
				resp = resp[1:]
			}
			kr := req.ResponseKind()
			kr.SetVersion(version)
			if err := kr.ReadFrom(resp); err != nil {
				t.Fatalf("%s v%d response undecodable: %v", api.Name, version, err)
			}
			if gotCorr, _, err = readResponse(c); err == nil && gotCorr != probeCorr {
				t.Fatalf("second response has correlation id %d", gotCorr)
			}
		case gotCorr == probeCorr:
			if api.Key != 0 {
				t.Fatalf("%s v%d was not answered, the request after it was", api.Name, version)
			}
		default:
			t.Fatalf("response with correlation id %d", gotCorr)
		}
		if err := probe(addr); err != nil {
			t.Fatalf("broker stopped answering after %s v%d: %v", api.Name, version, err)
		}
	})
}

// createsManyPartitions reports whether a CreateTopics or CreatePartitions
// body asks for a topic of more than 100 partitions that the broker would
// create (at most 100000; beyond, it refuses at once).
func createsManyPartitions(key, version int16, body []byte) bool {
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	if req.ReadFrom(append([]byte(nil), body...)) != nil {
		return false
	}
	var counts []int32
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		for _, t := range r.Topics {
			counts = append(counts, max(t.NumPartitions, int32(len(t.ReplicaAssignment))))
		}
	case *kmsg.CreatePartitionsRequest:
		for _, t := range r.Topics {
			counts = append(counts, t.Count)
		}
	}
	for _, n := range counts {
		if n > 100 && n <= 100000 {
			return true
		}
	}
	return false
}

// shortPoll caps a decodable Fetch's MaxWaitMillis at 100 ms: a long poll
// on a topic an earlier input created may rightly wait up to 5 minutes.
func shortPoll(version int16, body []byte) []byte {
	r := kmsg.NewPtrFetchRequest()
	r.Version = version
	if r.ReadFrom(append([]byte(nil), body...)) != nil || r.MaxWaitMillis <= 100 {
		return body
	}
	r.MaxWaitMillis = 100
	return r.AppendTo(nil)
}

// frame builds a request frame with client id "fuzz".
func frame(key, version int16, corr int32, flexible bool, body []byte) []byte {
	b := make([]byte, 4, 32+len(body))
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "fuzz"...)
	if flexible {
		b = append(b, 0)
	}
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func readResponse(c net.Conn) (int32, []byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(c, sz[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(sz[:])
	if n < 4 || n > 64<<20 {
		return 0, nil, fmt.Errorf("response frame of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		return 0, nil, fmt.Errorf("reading response body: %w", err)
	}
	return int32(binary.BigEndian.Uint32(b)), b[4:], nil
}

// probe asks for ApiVersions on a fresh connection.
func probe(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "probe", "1"
	if _, err := c.Write(frame(18, 3, 99, true, req.AppendTo(nil))); err != nil {
		return err
	}
	corr, b, err := readResponse(c)
	if err != nil {
		return err
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	if err := resp.ReadFrom(b); err != nil || corr != 99 || resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		return fmt.Errorf("ApiVersions: corr %d, error code %d, %d keys, %v", corr, resp.ErrorCode, len(resp.ApiKeys), err)
	}
	return nil
}

func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && !oe.Timeout()
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// A replica assignment must number its partitions 0..n-1. A partition
// number far past the count once sized an allocation (a client could make
// the broker allocate tens of gigabytes), and a negative one made the
// topic vanish from the response. Both get INVALID_REPLICA_ASSIGNMENT.
// (Found reading the code while FuzzRequests found the CreatePartitions one.)
func TestCreateTopicsAssignmentPartitionOutOfRange(t *testing.T) {
	n := tc.Start(t)
	cl := tc.Client(t, n.Addr())
	for _, part := range []int32{1<<31 - 1, 1, -1} {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version, req.TimeoutMillis = 7, 10000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("assign%d", part), -1, -1
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = part, []int32{1}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		resp, err := req.RequestWith(ctx, cl)
		cancel()
		if err != nil {
			t.Fatalf("partition %d: %v", part, err)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].Topic != rt.Topic {
			t.Fatalf("partition %d: response topics %+v", part, resp.Topics)
		}
		if code := resp.Topics[0].ErrorCode; code != kerr.InvalidReplicaAssignment.Code {
			t.Fatalf("partition %d: error %v, want INVALID_REPLICA_ASSIGNMENT", part, kerr.ErrorForCode(code))
		}
	}
	// A good assignment, listed out of order, still creates the topic.
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis = 7, 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "assigned", -1, -1
	for _, p := range []int32{1, 0} {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, []int32{1}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || resp.Topics[0].NumPartitions != 2 {
		t.Fatalf("manual assignment: %+v, %v", resp, err)
	}
}

// CreatePartitions applies CreateTopics' bound of 100000 partitions; a
// larger count once sized an allocation (2^31-1 asked for ~50 GB and
// killed the broker). (Found by FuzzRequests.)
func TestCreatePartitionsCountBound(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "grow", 1, nil)
	cl := tc.Client(t, n.Addr())
	for _, count := range []int32{1<<31 - 1, 100001} {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.Version, req.TimeoutMillis, req.ValidateOnly = 3, 10000, true
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "grow", count
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		resp, err := req.RequestWith(ctx, cl)
		cancel()
		if err != nil {
			t.Fatalf("count %d: %v", count, err)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.InvalidPartitions.Code {
			t.Fatalf("count %d: %+v, want INVALID_PARTITIONS", count, resp.Topics)
		}
	}
	// Within the bound it still works.
	adm := tc.Admin(t, n.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := adm.CreatePartitions(ctx, 2, "grow")
	if err != nil || res["grow"].Err != nil {
		t.Fatalf("adding 2 partitions: %v %v", err, res["grow"].Err)
	}
}
