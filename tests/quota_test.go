package tests

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/batch"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// quotaPrincipals gives a connection whose client id is "user-NAME" the
// principal User:NAME (the test-only hook: no SASL needed).
func quotaPrincipals(n *tc.Node) {
	n.TestPrincipals(func(clientID string) (auth.Principal, bool) {
		if name, ok := strings.CutPrefix(clientID, "user-"); ok {
			return auth.User(name), true
		}
		return auth.Principal{}, false
	})
}

func userEntity(name string) kadm.ClientQuotaEntity {
	return kadm.ClientQuotaEntity{{Type: "user", Name: &name}}
}

func setQuotas(t *testing.T, adm *kadm.Client, e kadm.ClientQuotaEntity, kv ...any) {
	t.Helper()
	var ops []kadm.AlterClientQuotaOp
	for i := 0; i < len(kv); i += 2 {
		ops = append(ops, kadm.AlterClientQuotaOp{Key: kv[i].(string), Value: kv[i+1].(float64)})
	}
	res, err := adm.AlterClientQuotas(context.Background(), []kadm.AlterClientQuotaEntry{{Entity: e, Ops: ops}})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("AlterClientQuotas %v: %v %+v", e, err, res)
	}
}

// DescribeClientQuotas and AlterClientQuotas through kadm, with Kafka's
// matching and validation.
func TestClientQuotasAdmin(t *testing.T) {
	n := tc.Start(t)
	adm := tc.Admin(t, n.Addr())
	ctx := ctxT(t, 30*time.Second)
	alice, app, ip := "alice", "app", "10.1.2.3"
	userApp := kadm.ClientQuotaEntity{{Type: "user", Name: &alice}, {Type: "client-id", Name: &app}}
	userDefault := kadm.ClientQuotaEntity{{Type: "user"}}
	clientDefault := kadm.ClientQuotaEntity{{Type: "client-id"}}
	ipEnt := kadm.ClientQuotaEntity{{Type: "ip", Name: &ip}}

	setQuotas(t, adm, userEntity(alice), "producer_byte_rate", 1048576.0, "producer_record_rate", 5000.0, "violation_action", 1.0)
	setQuotas(t, adm, userApp, "consumer_byte_rate", 2048.0)
	setQuotas(t, adm, userDefault, "max_record_bytes", 65536.0)
	setQuotas(t, adm, clientDefault, "request_percentage", 50.0)
	setQuotas(t, adm, ipEnt, "connection_creation_rate", 10.0)

	// Validation, per entry: each bad entry fails alone.
	bad := []kadm.AlterClientQuotaEntry{
		{Entity: ipEnt, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
		{Entity: userEntity("x"), Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 1}}},
		{Entity: userEntity("x"), Ops: []kadm.AlterClientQuotaOp{{Key: "no_such_quota", Value: 1}}},
		{Entity: userEntity("x"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: -5}}},
		{Entity: userEntity("x"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1.5}}},
		{Entity: userEntity("x"), Ops: []kadm.AlterClientQuotaOp{{Key: "violation_action", Value: 2}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip"}, {Type: "user"}}, Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user"}, {Type: "user"}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "group"}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: strp("not-an-ip")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 1}}},
		{Entity: userEntity("x"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}, {Key: "producer_byte_rate", Remove: true}}},
		{Entity: userEntity("good"), Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 12.5}}},
	}
	res, err := adm.AlterClientQuotas(ctx, bad)
	if err != nil || len(res) != len(bad) {
		t.Fatalf("bad entries: %v %d", err, len(res))
	}
	for i, r := range res[:len(res)-1] {
		if !errors.Is(r.Err, kerr.InvalidRequest) {
			t.Errorf("entry %d %v: %v (%s), want INVALID_REQUEST", i, bad[i].Entity, r.Err, r.ErrMessage)
		}
	}
	if res[len(res)-1].Err != nil {
		t.Fatalf("the good entry beside bad ones: %v", res[len(res)-1].Err)
	}
	// validate_only writes nothing.
	if res, err := adm.ValidateAlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: userEntity("dry"),
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}}}); err != nil || res[0].Err != nil {
		t.Fatalf("validate only: %v %+v", err, res)
	}

	describe := func(strict bool, comps ...kadm.DescribeClientQuotaComponent) map[string]map[string]float64 {
		t.Helper()
		qs, err := adm.DescribeClientQuotas(ctx, strict, comps)
		if err != nil {
			t.Fatalf("describe %+v: %v", comps, err)
		}
		out := map[string]map[string]float64{}
		for _, q := range qs {
			vals := map[string]float64{}
			for _, v := range q.Values {
				vals[v.Key] = v.Value
			}
			out[q.Entity.String()] = vals
		}
		return out
	}
	exact := func(typ, name string) kadm.DescribeClientQuotaComponent {
		return kadm.DescribeClientQuotaComponent{Type: typ, MatchName: &name, MatchType: 0}
	}
	anyOf := func(typ string) kadm.DescribeClientQuotaComponent {
		return kadm.DescribeClientQuotaComponent{Type: typ, MatchType: 2}
	}
	dflt := func(typ string) kadm.DescribeClientQuotaComponent {
		return kadm.DescribeClientQuotaComponent{Type: typ, MatchType: 1}
	}
	// user=alice, not strict: alice alone and alice with app.
	got := describe(false, exact("user", "alice"))
	if len(got) != 2 || got["{user=alice}"]["producer_record_rate"] != 5000 || got["{user=alice}"]["violation_action"] != 1 ||
		got["{user=alice, client-id=app}"]["consumer_byte_rate"] != 2048 {
		t.Fatalf("user=alice: %v", got)
	}
	if got := describe(true, exact("user", "alice")); len(got) != 1 || got["{user=alice}"] == nil {
		t.Fatalf("user=alice strict: %v", got)
	}
	if got := describe(true, dflt("user")); len(got) != 1 || got["{user=<default>}"]["max_record_bytes"] != 65536 {
		t.Fatalf("user default strict: %v", got)
	}
	// ANY user: alice, alice/app, <default>, good.
	if got := describe(false, anyOf("user")); len(got) != 4 {
		t.Fatalf("any user: %v", got)
	}
	if got := describe(true, anyOf("user"), anyOf("client-id")); len(got) != 1 || got["{user=alice, client-id=app}"] == nil {
		t.Fatalf("any user and client strict: %v", got)
	}
	if got := describe(false, anyOf("ip")); len(got) != 1 || got["{ip=10.1.2.3}"]["connection_creation_rate"] != 10 {
		t.Fatalf("ip: %v", got)
	}
	// IP entities are stored in the form connections are matched by.
	setQuotas(t, adm, kadm.ClientQuotaEntity{{Type: "ip", Name: strp("::FFFF:10.9.9.9")}}, "connection_creation_rate", 3.0)
	if got := describe(true, exact("ip", "10.9.9.9")); got["{ip=10.9.9.9}"]["connection_creation_rate"] != 3 {
		t.Fatalf("mapped IPv6 address: %v", got)
	}
	if got := describe(false); len(got) != 7 {
		t.Fatalf("everything: %v", got)
	}
	if got := describe(false, exact("user", "dry")); len(got) != 0 {
		t.Fatalf("validate-only entity stored: %v", got)
	}
	for _, comps := range [][]kadm.DescribeClientQuotaComponent{
		{anyOf("ip"), anyOf("user")}, {anyOf("user"), exact("user", "x")}, {anyOf("group")},
	} {
		if _, err := adm.DescribeClientQuotas(ctx, false, comps); !errors.Is(err, kerr.InvalidRequest) {
			t.Errorf("filter %+v: %v, want INVALID_REQUEST", comps, err)
		}
	}
	// Remove values; an entity left with none disappears.
	if res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: userApp,
		Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Remove: true}}}}); err != nil || res[0].Err != nil {
		t.Fatalf("remove: %v %+v", err, res)
	}
	if got := describe(false, exact("user", "alice")); len(got) != 1 {
		t.Fatalf("after remove: %v", got)
	}
	// They survive a restart (metadata log).
	dir := n.Dir
	n.Close()
	n = tc.StartIn(t, dir)
	adm = tc.Admin(t, n.Addr())
	if got := describe(false, exact("user", "alice")); got["{user=alice}"]["producer_byte_rate"] != 1048576 {
		t.Fatalf("after restart: %v", got)
	}
}

// produceReq is a Produce request of one batch of count records of size
// bytes each to each of the partitions.
func produceReq(topic string, count, size int, parts ...int32) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for _, p := range parts {
		kvs := make([]batch.KV, count)
		for i := range kvs {
			kvs[i] = batch.KV{Value: make([]byte, size)}
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, batch.Build(kvs, time.Now().UnixMilli())
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func produceAs(t *testing.T, cl *kgo.Client, req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	t.Helper()
	// kgo sends Produce v13, which names topics by id.
	for i := range req.Topics {
		req.Topics[i].TopicID = topicID(t, cl, req.Topics[i].Topic)
	}
	resp, err := tc.DirectRequest(ctxT(t, 30*time.Second), cl, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.ProduceResponse)
}

func topicID(t *testing.T, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = strp(topic)
	md.Topics = append(md.Topics, mt)
	mresp, err := md.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil || len(mresp.Topics) != 1 {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	return mresp.Topics[0].TopicID
}

func partitionEnd(t *testing.T, adm *kadm.Client, topic string, p int32) int64 {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctxT(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := ends.Lookup(topic, p)
	return o.Offset
}

func scrapeMetrics(t *testing.T, n *tc.Node) string {
	t.Helper()
	resp, err := http.Get("http://" + n.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// Enforcement, one principal per quota: produce throttled and rejected,
// max_record_bytes, fetch over quota answered empty, controller
// mutations refused (KIP-599), request time, connections per ip.
func TestClientQuotasEnforced(t *testing.T) {
	// Two 1 s windows: a rate is measured over 1-2 s, so the test is fast.
	n := tc.Start(t, tc.With("quota.window.num", "2"))
	quotaPrincipals(n)
	adm := tc.Admin(t, n.Addr())
	tc.CreateTopic(t, n.Addr(), "q", 2, nil)
	client := func(user string) *kgo.Client { return tc.Client(t, n.Addr(), kgo.ClientID("user-"+user)) }

	t.Run("produce throttled", func(t *testing.T) {
		setQuotas(t, adm, userEntity("thr"), "producer_byte_rate", 10000.0)
		cl := client("thr")
		before := partitionEnd(t, adm, "q", 0)
		resp := produceAs(t, cl, produceReq("q", 20, 1000, 0)) // ~20 KB: twice a second's quota
		if resp.ThrottleMillis <= 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("over quota: throttle %d ms, error %d; want throttled and appended", resp.ThrottleMillis, resp.Topics[0].Partitions[0].ErrorCode)
		}
		if end := partitionEnd(t, adm, "q", 0); end != before+20 {
			t.Fatalf("throttled produce appended %d records, want 20", end-before)
		}
	})
	t.Run("produce rejected", func(t *testing.T) {
		setQuotas(t, adm, userEntity("rej"), "producer_record_rate", 100.0, "violation_action", 1.0)
		cl := client("rej")
		if resp := produceAs(t, cl, produceReq("q", 50, 10, 0)); resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("within quota: %+v", resp)
		}
		before := partitionEnd(t, adm, "q", 0)
		resp := produceAs(t, cl, produceReq("q", 500, 10, 0, 1))
		if resp.ThrottleMillis <= 0 {
			t.Fatal("rejected produce without a retry hint (throttle_time_ms)")
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
				t.Fatalf("partition %d: error %d, want THROTTLING_QUOTA_EXCEEDED", p.Partition, p.ErrorCode)
			}
		}
		if end := partitionEnd(t, adm, "q", 0); end != before {
			t.Fatalf("rejected produce appended %d records", end-before)
		}
		m := scrapeMetrics(t, n)
		if !strings.Contains(m, `berth_client_rejected_requests_total{principal="User:rej",reason="producer_record_rate"} 1`) {
			t.Fatalf("metrics lack the rejection:\n%s", grepLines(m, "berth_client_"))
		}
	})
	t.Run("broker default reject", func(t *testing.T) {
		if err := alterBroker(adm, "quota.violation.action", "reject"); err != nil {
			t.Fatal(err)
		}
		defer alterBroker(adm, "quota.violation.action", "throttle")
		setQuotas(t, adm, userEntity("dflt"), "producer_byte_rate", 1000.0)
		resp := produceAs(t, client("dflt"), produceReq("q", 10, 1000, 0))
		if resp.Topics[0].Partitions[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
			t.Fatalf("quota.violation.action=reject: error %d", resp.Topics[0].Partitions[0].ErrorCode)
		}
	})
	t.Run("max_record_bytes", func(t *testing.T) {
		setQuotas(t, adm, userEntity("big"), "max_record_bytes", 1000.0)
		cl := client("big")
		req := produceReq("q", 1, 2000, 0)
		small := produceReq("q", 3, 100, 1)
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, small.Topics[0].Partitions...)
		resp := produceAs(t, cl, req)
		codes := map[int32]int16{}
		for _, p := range resp.Topics[0].Partitions {
			codes[p.Partition] = p.ErrorCode
		}
		if codes[0] != kerr.MessageTooLarge.Code || codes[1] != 0 || len(codes) != 2 {
			t.Fatalf("codes %v: want partition 0 MESSAGE_TOO_LARGE, partition 1 appended", codes)
		}
	})
	t.Run("max_record_bytes compressed", func(t *testing.T) {
		// The limit is on the record as encoded before compression: 2000
		// zero bytes compress to almost nothing and are still refused.
		cl := tc.Client(t, n.Addr(), kgo.ClientID("user-big"), kgo.ProducerBatchCompression(kgo.GzipCompression()),
			kgo.DefaultProduceTopic("q"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		err := cl.ProduceSync(ctxT(t, 10*time.Second), &kgo.Record{Value: make([]byte, 2000)}).FirstErr()
		if !errors.Is(err, kerr.MessageTooLarge) {
			t.Fatalf("compressed 2000-byte record at max_record_bytes=1000: %v, want MESSAGE_TOO_LARGE", err)
		}
		if err := cl.ProduceSync(ctxT(t, 10*time.Second), &kgo.Record{Value: make([]byte, 900)}).FirstErr(); err != nil {
			t.Fatalf("900-byte record: %v", err)
		}
	})
	t.Run("fetch over quota", func(t *testing.T) {
		tc.CreateTopic(t, n.Addr(), "qf", 1, nil)
		if resp := produceAs(t, client("writer"), produceReq("qf", 30, 1000, 0)); resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatal("seeding qf failed")
		}
		setQuotas(t, adm, userEntity("slow"), "consumer_byte_rate", 4000.0)
		cl := client("slow")
		fetch := func(off int64) *kmsg.FetchResponse {
			req := kmsg.NewPtrFetchRequest()
			req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.Version = -1, 100, 10<<20, 12
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = "qf", topicID(t, cl, "qf")
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.FetchOffset, rp.PartitionMaxBytes = off, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := tc.DirectRequest(ctxT(t, 10*time.Second), cl, req)
			if err != nil {
				t.Fatal(err)
			}
			return resp.(*kmsg.FetchResponse)
		}
		// The batch (~30 KB) is more than the window allows (4 KB/s over 1 s):
		// the read is capped at one batch (KIP-74) and then answered empty
		// with the throttle time, as Kafka answers a fetch over quota.
		resp := fetch(0)
		if resp.ThrottleMillis <= 0 || len(resp.Topics[0].Partitions[0].RecordBatches) != 0 {
			t.Fatalf("fetch over quota: throttle %d, %d bytes of records", resp.ThrottleMillis, len(resp.Topics[0].Partitions[0].RecordBatches))
		}
		// A principal without a consumer quota reads it all.
		other := client("free")
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes, req.Version = -1, 10<<20, 12
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "qf", topicID(t, other, "qf")
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		r2, err := tc.DirectRequest(ctxT(t, 10*time.Second), other, req)
		if err != nil || len(r2.(*kmsg.FetchResponse).Topics[0].Partitions[0].RecordBatches) == 0 || r2.(*kmsg.FetchResponse).ThrottleMillis != 0 {
			t.Fatalf("unlimited fetch: %v", err)
		}
	})
	t.Run("controller mutations", func(t *testing.T) {
		setQuotas(t, adm, userEntity("ops"), "controller_mutation_rate", 2.0)
		create := func(name string, parts int32) *kmsg.CreateTopicsResponse {
			// A new connection each time: kgo waits out a throttle on the
			// connection that got it, as KIP-219 asks, and by then the
			// two 1 s windows would have forgotten the burst.
			cl := client("ops")
			req := kmsg.NewPtrCreateTopicsRequest()
			req.Version, req.TimeoutMillis = 7, 10000
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, parts, 1
			req.Topics = append(req.Topics, rt)
			resp, err := tc.DirectRequest(ctxT(t, 30*time.Second), cl, req)
			if err != nil {
				t.Fatal(err)
			}
			return resp.(*kmsg.CreateTopicsResponse)
		}
		// Under quota: created, and 8 partitions put it over: throttled.
		if r := create("m1", 8); r.Topics[0].ErrorCode != 0 || r.ThrottleMillis <= 0 {
			t.Fatalf("first create: error %d throttle %d", r.Topics[0].ErrorCode, r.ThrottleMillis)
		}
		// Over quota: refused with THROTTLING_QUOTA_EXCEEDED (v6+).
		if r := create("m2", 1); r.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || r.ThrottleMillis <= 0 {
			t.Fatalf("second create: error %d throttle %d", r.Topics[0].ErrorCode, r.ThrottleMillis)
		}
		if td, _ := adm.ListTopics(ctxT(t, 10*time.Second), "m2"); td["m2"].Err == nil {
			t.Fatal("refused create made the topic")
		}
	})
	t.Run("request_percentage", func(t *testing.T) {
		setQuotas(t, adm, userEntity("busy"), "request_percentage", 0.0001)
		cl := client("busy")
		var throttled int32
		for i := 0; i < 20 && throttled == 0; i++ {
			resp, err := tc.DirectRequest(ctxT(t, 10*time.Second), cl, kmsg.NewPtrMetadataRequest())
			if err != nil {
				t.Fatal(err)
			}
			throttled = resp.(*kmsg.MetadataResponse).ThrottleMillis
		}
		if throttled <= 0 {
			t.Fatal("no Metadata answer throttled at a tiny request_percentage")
		}
	})
	t.Run("connection_creation_rate", func(t *testing.T) {
		setQuotas(t, adm, kadm.ClientQuotaEntity{{Type: "ip", Name: strp("127.0.0.1")}}, "connection_creation_rate", 2.0)
		defer adm.AlterClientQuotas(context.Background(), []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: strp("127.0.0.1")}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Remove: true}}}})
		closed := 0
		for i := 0; i < 8; i++ {
			c, err := net.Dial("tcp", n.Addr())
			if err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			_, err = c.Read(make([]byte, 1))
			var ne net.Error
			if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
				closed++
			}
			c.Close()
		}
		if closed < 4 {
			t.Fatalf("%d of 8 connections in a burst refused at 2/s, want most", closed)
		}
		if !strings.Contains(scrapeMetrics(t, n), "berth_server_connections_refused_total") {
			t.Fatal("no refused-connections metric")
		}
	})
	m := scrapeMetrics(t, n)
	for _, want := range []string{
		`berth_client_throttle_seconds_total{principal="User:thr",quota="producer_byte_rate"}`,
		`berth_client_throttle_seconds_total{principal="User:slow",quota="consumer_byte_rate"}`,
		`berth_client_rejected_requests_total{principal="User:big",reason="max_record_bytes"} 2`,
		`berth_client_rejected_requests_total{principal="User:ops",reason="controller_mutation_rate"} 1`,
		`berth_client_records_in_total{principal="User:writer"} 30`,
		`berth_client_bytes_out_total{principal="User:free"}`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "berth_client_"))
		}
	}
}

func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func alterBroker(adm *kadm.Client, name, value string) error {
	res, err := adm.AlterBrokerConfigs(context.Background(), []kadm.AlterConfig{{Name: name, Value: &value}})
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("%s=%s: %w", name, value, r.Err)
		}
	}
	return nil
}

// max.connection.creation.rate makes accepting wait: connections over the
// rate are served late, not refused.
func TestMaxConnectionCreationRate(t *testing.T) {
	n := tc.Start(t, tc.With("quota.window.num", "2"), tc.With("max.connection.creation.rate", "2"))
	apiVersions := []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff}
	start := time.Now()
	for i := 0; i < 5; i++ {
		c, err := net.Dial("tcp", n.Addr())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Write(apiVersions); err != nil {
			t.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			t.Fatalf("connection %d not served: %v", i, err)
		}
		c.Close()
	}
	// 5 connections at 2/s over a 1 s span: the last ones wait.
	if el := time.Since(start); el < time.Second {
		t.Fatalf("5 connections at max.connection.creation.rate=2 served in %v", el)
	}
}

// A kgo consumer under consumer_byte_rate reads everything, at about its
// quota: over it, fetches come back empty with a throttle time, and kgo
// fetches again once it has passed.
func TestConsumerByteRateWithKgo(t *testing.T) {
	n := tc.Start(t, tc.With("quota.window.num", "2"))
	quotaPrincipals(n)
	adm := tc.Admin(t, n.Addr())
	tc.CreateTopic(t, n.Addr(), "reads", 1, nil)
	w := tc.Client(t, n.Addr(), kgo.ClientID("user-writer"), kgo.DefaultProduceTopic("reads"), kgo.ProducerBatchMaxBytes(16<<10))
	const records, size, quota = 300, 1000, 100_000.0 // ~300 KB at 100 KB/s
	var recs []*kgo.Record
	for i := 0; i < records; i++ {
		v := make([]byte, size)
		_, _ = rand.Read(v) // incompressible: quotas count bytes as sent
		recs = append(recs, &kgo.Record{Value: v})
	}
	if err := w.ProduceSync(ctxT(t, 30*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	setQuotas(t, adm, userEntity("reader"), "consumer_byte_rate", quota)
	var throttled atomic.Int64
	start := time.Now()
	got := consumeN(t, n.Addr(), "reads", records, kgo.ClientID("user-reader"), kgo.FetchMaxBytes(64<<10),
		kgo.WithHooks(throttleHook{&throttled}))
	el := time.Since(start)
	if len(got) != records {
		t.Fatalf("consumed %d of %d", len(got), records)
	}
	rate := float64(records*size) / el.Seconds()
	t.Logf("consumed %d KB in %v: %.0f KB/s against a quota of %.0f KB/s, %d throttles", records*size/1000, el, rate/1000, quota/1000, throttled.Load())
	// The window lets a second's worth through at once; the rest is paced.
	if rate > 1.5*quota || throttled.Load() == 0 {
		t.Fatalf("a 300 KB read at 100 KB/s took %v with %d throttles", el, throttled.Load())
	}
}

// kcat (librdkafka) under producer_byte_rate: every record is delivered,
// paced to about the quota by the throttle times (librdkafka waits them
// out, KIP-219) and the broker's mute. Batches of 16 KiB, so the pacing
// shows: one request holding everything is served at once and throttles
// only what comes after it, as in Kafka.
func TestKcatProducerByteRate(t *testing.T) {
	kcat := need(t, "/usr/bin/kcat")
	n := tc.Start(t, tc.With("quota.window.num", "2"))
	quotaPrincipals(n)
	adm := tc.Admin(t, n.Addr())
	tc.CreateTopic(t, n.Addr(), "kq", 1, nil)
	const lines, quota = 300, 100_000.0 // ~300 KB at 100 KB/s
	var in strings.Builder
	for i := 0; i < lines; i++ {
		b := make([]byte, 500)
		_, _ = rand.Read(b)
		fmt.Fprintf(&in, "%x\n", b)
	}
	setQuotas(t, adm, userEntity("kcat"), "producer_byte_rate", quota)
	start := time.Now()
	run(t, in.String(), kcat, "-P", "-b", n.Addr(), "-t", "kq", "-X", "client.id=user-kcat", "-X", "linger.ms=5", "-X", "batch.size=16384")
	el := time.Since(start)
	if end := partitionEnd(t, adm, "kq", 0); end != lines {
		t.Fatalf("%d records delivered, want %d", end, lines)
	}
	rate := float64(lines*1001) / el.Seconds()
	t.Logf("kcat produced %d records in %v: %.0f KB/s against %.0f KB/s", lines, el, rate/1000, quota/1000)
	if rate > 1.5*quota {
		t.Fatalf("kcat produced at %.0f B/s, quota %.0f", rate, quota)
	}
	if m := scrapeMetrics(t, n); !strings.Contains(m, `berth_client_throttle_seconds_total{principal="User:kcat",quota="producer_byte_rate"}`) {
		t.Fatalf("no throttle counted for kcat:\n%s", grepLines(m, "berth_client_throttle"))
	}
}

// A share group consumer (ShareFetch) is counted per principal and held to
// consumer_byte_rate by throttling; the records it acquired are never
// dropped from an answer, so every job arrives once.
func TestShareFetchConsumerByteRate(t *testing.T) {
	n := tc.Start(t, tc.With("quota.window.num", "2"))
	quotaPrincipals(n)
	adm := tc.Admin(t, n.Addr())
	tc.CreateTopic(t, n.Addr(), "sjobs", 1, nil)
	prod := tc.Client(t, n.Addr(), kgo.ClientID("user-writer"), kgo.ProducerBatchMaxBytes(16<<10))
	var throttled atomic.Int64
	cl := shareConsumer(t, n.Addr(), "sq", "sjobs", kgo.ClientID("user-worker"), kgo.ShareMaxRecords(20),
		kgo.WithHooks(throttleHook{&throttled}))
	warmShare(t, prod, cl, "sjobs")
	const jobs, size, quota = 150, 1000, 50_000.0 // ~150 KB at 50 KB/s
	setQuotas(t, adm, userEntity("worker"), "consumer_byte_rate", quota)
	var recs []*kgo.Record
	for i := 0; i < jobs; i++ {
		v := make([]byte, size)
		_, _ = rand.Read(v)
		recs = append(recs, &kgo.Record{Topic: "sjobs", Key: []byte(fmt.Sprint(i)), Value: v})
	}
	produceSync(t, prod, recs...)
	start := time.Now()
	seen := map[string]bool{}
	ctx := ctxT(t, 60*time.Second)
	for len(seen) < jobs && ctx.Err() == nil {
		for _, r := range pollFor(t, cl, 2*time.Second) {
			if string(r.Key) != "warm" {
				seen[string(r.Key)] = true
			}
			r.Ack(kgo.AckAccept)
		}
	}
	el := time.Since(start)
	if len(seen) != jobs {
		t.Fatalf("%d of %d jobs received", len(seen), jobs)
	}
	rate := float64(jobs*size) / el.Seconds()
	t.Logf("share consumer read %d jobs in %v: %.0f KB/s against %.0f KB/s, %d throttles", jobs, el, rate/1000, quota/1000, throttled.Load())
	if throttled.Load() == 0 || rate > 2*quota {
		t.Fatalf("share consumer at %.0f B/s with %d throttles, quota %.0f", rate, throttled.Load(), quota)
	}
	if m := scrapeMetrics(t, n); !strings.Contains(m, `berth_client_records_out_total{principal="User:worker"}`) ||
		!strings.Contains(m, `berth_client_throttle_seconds_total{principal="User:worker",quota="consumer_byte_rate"}`) {
		t.Fatalf("share consumer not counted:\n%s", grepLines(m, "berth_client_"))
	}
}
