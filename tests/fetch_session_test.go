package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// Berth holds no fetch sessions (KIP-227), so it answers as a Kafka broker
// whose session cache has no room: a full fetch (SessionEpoch 0, INITIAL, or
// -1, FINAL) is answered with every requested partition and SessionID 0,
// whatever SessionID it names (Kafka closes that session; we have none to
// close); an incremental fetch (any other epoch) names a session this broker
// never gave out and gets FETCH_SESSION_ID_NOT_FOUND with no topics.
// kafka-go's Client.Fetch sends SessionID -1 with epoch -1, which Berth used
// to refuse.
func TestFetchSessionFieldCombinations(t *testing.T) {
	n := tc.Start(t)
	const topic = "fetch-sessions"
	tc.CreateTopic(t, n.Addr(), topic, 1, nil)
	cl := tc.Client(t, n.Addr())
	produceSync(t, cl, &kgo.Record{Topic: topic, Value: []byte("a")}, &kgo.Record{Topic: topic, Value: []byte("b")})
	ctx := ctxT(t, 30*time.Second)
	topics, err := tc.Admin(t, n.Addr()).ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	id := topics[topic].ID

	cases := []struct {
		name           string
		session, epoch int32
		full           bool
	}{
		{"initial epoch, no session", 0, 0, true},
		{"final epoch, no session (sessionless)", 0, -1, true},
		{"initial epoch, unknown session", 12345, 0, true},
		{"final epoch, session -1 (kafka-go)", -1, -1, true},
		{"final epoch, unknown session", 12345, -1, true},
		{"incremental, unknown session", 12345, 1, false},
		{"incremental, session 0", 0, 1, false},
		{"negative epoch, unknown session", 12345, -2, false},
	}
	for _, v := range []int16{7, 11, 12, 13, 18} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("v%d %s", v, c.name), func(t *testing.T) {
				req := kmsg.NewPtrFetchRequest()
				req.Version = v
				req.ReplicaID = -1
				req.MaxWaitMillis = 100
				req.MinBytes = 1
				req.MaxBytes = 1 << 20
				req.SessionID, req.SessionEpoch = c.session, c.epoch
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic, rt.TopicID = topic, id
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.PartitionMaxBytes = 1 << 20
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				kr, err := tc.DirectRequest(ctx, cl, req)
				if err != nil {
					t.Fatal(err)
				}
				resp := kr.(*kmsg.FetchResponse)
				if resp.SessionID != 0 {
					t.Errorf("response SessionID %d, want 0 (no session created)", resp.SessionID)
				}
				if !c.full {
					if err := kerr.ErrorForCode(resp.ErrorCode); err != kerr.FetchSessionIDNotFound || len(resp.Topics) != 0 {
						t.Fatalf("incremental fetch of a session never given out: error %v, %d topics; want FETCH_SESSION_ID_NOT_FOUND and none", err, len(resp.Topics))
					}
					return
				}
				if resp.ErrorCode != 0 {
					t.Fatalf("full fetch: error %v", kerr.ErrorForCode(resp.ErrorCode))
				}
				if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
					t.Fatalf("full fetch answered %d topics, want the one partition asked for", len(resp.Topics))
				}
				p := resp.Topics[0].Partitions[0]
				if p.ErrorCode != 0 || p.HighWatermark != 2 || len(p.RecordBatches) == 0 {
					t.Fatalf("partition: error %v, high watermark %d, %d record bytes", kerr.ErrorForCode(p.ErrorCode), p.HighWatermark, len(p.RecordBatches))
				}
			})
		}
	}
}
