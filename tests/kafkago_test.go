package tests

// segmentio/kafka-go against Berth: its Client (Produce, Fetch v11 as a
// sessionless full fetch: SessionID -1, SessionEpoch -1), its Writer and
// partition Reader (Fetch v10 over a Conn), and its consumer group Reader.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// kafkaGoClient is a kafka-go Client with its own transport, whose idle
// connections are closed at cleanup.
func kafkaGoClient(t *testing.T, addr string) *kafka.Client {
	t.Helper()
	tr := &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &kafka.Client{Addr: kafka.TCP(addr), Timeout: 30 * time.Second, Transport: tr}
}

// kafkaGoRecords makes n records with distinct keys, values and a header.
func kafkaGoRecords(n int) []kafka.Record {
	recs := make([]kafka.Record, n)
	for i := range recs {
		recs[i] = kafka.Record{
			Key:     kafka.NewBytes(fmt.Appendf(nil, "k%d", i)),
			Value:   kafka.NewBytes(fmt.Appendf(nil, "value %d", i)),
			Headers: []kafka.Header{{Key: "h", Value: fmt.Appendf(nil, "%d", i)}},
		}
	}
	return recs
}

// readKafkaGoRecords drains a record set into offset-ordered keys and values.
func readKafkaGoRecords(t *testing.T, rr kafka.RecordReader) (offsets []int64, keys, values []string) {
	t.Helper()
	for {
		r, err := rr.ReadRecord()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("reading records: %v", err)
		}
		offsets = append(offsets, r.Offset)
		keys, values = append(keys, kafkaGoBytes(t, r.Key)), append(values, kafkaGoBytes(t, r.Value))
	}
}

// kafkaGoBytes reads a record's key or value ("" when null).
func kafkaGoBytes(t *testing.T, b kafka.Bytes) string {
	t.Helper()
	if b == nil {
		return ""
	}
	defer b.Close()
	v, err := io.ReadAll(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(v)
}

// kafka-go's Client.Fetch sends SessionID -1 and SessionEpoch -1 (KIP-227's
// FINAL_EPOCH: a sessionless full fetch). Berth used to take any non-zero
// session id for an unknown session and answer with no topics, which
// kafka-go reports as "topic not found". Each codec, right after a produce.
func TestKafkaGoClientFetch(t *testing.T) {
	n := tc.Start(t)
	codecs := map[string]kafka.Compression{
		"none": compress.None, "gzip": kafka.Gzip, "snappy": kafka.Snappy, "lz4": kafka.Lz4, "zstd": kafka.Zstd,
	}
	// The topics exist before the client caches its first metadata.
	for name := range codecs {
		tc.CreateTopic(t, n.Addr(), "kafkago-fetch-"+name, 1, nil)
	}
	cl := kafkaGoClient(t, n.Addr())
	ctx := ctxT(t, 60*time.Second)
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "kafkago-fetch-" + name
			pr, err := cl.Produce(ctx, &kafka.ProduceRequest{
				Topic: topic, RequiredAcks: kafka.RequireAll,
				Records: kafka.NewRecordReader(kafkaGoRecords(10)...), Compression: codec,
			})
			if err != nil {
				t.Fatal(err)
			}
			if pr.Error != nil || pr.BaseOffset != 0 {
				t.Fatalf("produce: error %v, base offset %d", pr.Error, pr.BaseOffset)
			}
			res, err := cl.Fetch(ctx, &kafka.FetchRequest{
				Topic: topic, Partition: 0, Offset: 0,
				MinBytes: 1, MaxBytes: 64 << 10, MaxWait: 100 * time.Millisecond,
			})
			if err != nil {
				t.Fatalf("fetch: %v", err)
			}
			if res.Error != nil || res.Topic != topic || res.Partition != 0 || res.HighWatermark != 10 {
				t.Fatalf("fetch answered topic %q partition %d high watermark %d error %v; want %q 0 10 none",
					res.Topic, res.Partition, res.HighWatermark, res.Error, topic)
			}
			offsets, keys, values := readKafkaGoRecords(t, res.Records)
			if len(offsets) != 10 {
				t.Fatalf("fetched %d records, want 10", len(offsets))
			}
			for i := range offsets {
				if offsets[i] != int64(i) || keys[i] != fmt.Sprintf("k%d", i) || values[i] != fmt.Sprintf("value %d", i) {
					t.Fatalf("record %d: offset %d key %q value %q", i, offsets[i], keys[i], values[i])
				}
			}
		})
	}
}

// kafka-go's Client produces snappy batches and reads them back with
// Client.Fetch from where the last fetch ended, in order and complete.
func TestKafkaGoClientProduceAndConsume(t *testing.T) {
	n := tc.Start(t)
	cl := kafkaGoClient(t, n.Addr())
	ctx := ctxT(t, 60*time.Second)
	const topic, batches, perBatch = "kafkago-pc", 20, 100
	tc.CreateTopic(t, n.Addr(), topic, 1, nil)
	value := func(i int) []byte { return bytes.Repeat(fmt.Appendf(nil, "%06d", i), 1+i%40) }
	for b := range batches {
		recs := make([]kafka.Record, perBatch)
		for i := range recs {
			recs[i].Value = kafka.NewBytes(value(b*perBatch + i))
		}
		pr, err := cl.Produce(ctx, &kafka.ProduceRequest{
			Topic: topic, RequiredAcks: kafka.RequireAll,
			Records: kafka.NewRecordReader(recs...), Compression: compress.Snappy,
		})
		if err != nil {
			t.Fatalf("produce batch %d: %v", b, err)
		}
		if pr.Error != nil {
			t.Fatalf("produce batch %d: %v", b, pr.Error)
		}
		if pr.BaseOffset != int64(b*perBatch) {
			t.Fatalf("batch %d at offset %d, want %d", b, pr.BaseOffset, b*perBatch)
		}
	}
	next := int64(0)
	for next < batches*perBatch {
		res, err := cl.Fetch(ctx, &kafka.FetchRequest{
			Topic: topic, Offset: next, MinBytes: 1, MaxBytes: 16 << 10, MaxWait: 100 * time.Millisecond,
		})
		if err != nil {
			t.Fatalf("fetch at %d: %v", next, err)
		}
		if res.Error != nil {
			t.Fatalf("fetch at %d: %v", next, res.Error)
		}
		offsets, _, values := readKafkaGoRecords(t, res.Records)
		if len(offsets) == 0 {
			t.Fatalf("fetch at %d returned nothing below high watermark %d", next, res.HighWatermark)
		}
		for i, o := range offsets {
			if o < next {
				continue // a batch may start before the offset asked for
			}
			if o != next || values[i] != string(value(int(o))) {
				t.Fatalf("record at offset %d (want %d) has value %.20q", o, next, values[i])
			}
			next++
		}
	}
}

// kafka-go's Writer (gzip, acks=all) and its partition Reader: every
// message back in order.
func TestKafkaGoWriterAndReader(t *testing.T) {
	n := tc.Start(t)
	const topic, count = "kafkago-wr", 200
	tc.CreateTopic(t, n.Addr(), topic, 1, nil)
	ctx := ctxT(t, 60*time.Second)
	tr := &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	w := &kafka.Writer{
		Addr: kafka.TCP(n.Addr()), Topic: topic, Transport: tr,
		RequiredAcks: kafka.RequireAll, Compression: kafka.Gzip, BatchTimeout: time.Millisecond,
	}
	msgs := make([]kafka.Message, count)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("writer: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: []string{n.Addr()}, Topic: topic, MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 100 * time.Millisecond,
	})
	defer r.Close()
	for i := range count {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("reader after %d messages: %v", i, err)
		}
		if m.Offset != int64(i) || string(m.Key) != fmt.Sprintf("k%d", i) || string(m.Value) != fmt.Sprintf("v%d", i) {
			t.Fatalf("message %d: offset %d key %q value %q", i, m.Offset, m.Key, m.Value)
		}
	}
}

// kafka-go's consumer group Reader: it joins, reads and commits; a second
// reader of the same group resumes after the committed offsets.
func TestKafkaGoGroupReader(t *testing.T) {
	n := tc.Start(t)
	const topic, group = "kafkago-group", "kafkago-readers"
	tc.CreateTopic(t, n.Addr(), topic, 3, nil)
	ctx := ctxT(t, 60*time.Second)
	tr := &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	w := &kafka.Writer{
		Addr: kafka.TCP(n.Addr()), Topic: topic, Transport: tr,
		RequiredAcks: kafka.RequireAll, Balancer: &kafka.Hash{}, BatchTimeout: time.Millisecond,
	}
	write := func(from, to int) {
		t.Helper()
		var msgs []kafka.Message
		for i := from; i < to; i++ {
			msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%d", i)})
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			t.Fatalf("writer: %v", err)
		}
	}
	read := func(want int) map[string]bool {
		t.Helper()
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers: []string{n.Addr()}, GroupID: group, Topic: topic,
			MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 100 * time.Millisecond,
			StartOffset: kafka.FirstOffset, HeartbeatInterval: 500 * time.Millisecond,
			SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second,
		})
		defer r.Close()
		got := map[string]bool{}
		for len(got) < want {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				t.Fatalf("group reader after %d messages: %v", len(got), err)
			}
			if got[string(m.Value)] {
				t.Fatalf("message %s read twice", m.Value)
			}
			got[string(m.Value)] = true
			if err := r.CommitMessages(ctx, m); err != nil {
				t.Fatalf("commit: %v", err)
			}
		}
		return got
	}
	write(0, 30)
	first := read(30)
	write(30, 40)
	second := read(10)
	for v := range second {
		if first[v] {
			t.Fatalf("second reader re-read committed message %s", v)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// Several kafka-go group Readers join a new group at once on a fresh
// broker. Their FindCoordinator requests race the creation of
// __consumer_offsets; Berth used to name itself coordinator before it had
// begun to load the group's partition and then refuse the JoinGroup with
// NOT_COORDINATOR, on which kafka-go backs off for 5 s
// (JoinGroupBackoff). Every reader must find the coordinator and join
// without an error, and the group read every record.
func TestKafkaGoGroupReadersJoinFreshBroker(t *testing.T) {
	n := tc.Start(t)
	const topic, group, readers, records = "kafkago-fresh", "kafkago-fresh-readers", 4, 40
	tc.CreateTopic(t, n.Addr(), topic, readers, nil)
	ctx := ctxT(t, 60*time.Second)
	tr := &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	w := &kafka.Writer{
		Addr: kafka.TCP(n.Addr()), Topic: topic, Transport: tr,
		RequiredAcks: kafka.RequireAll, Balancer: &kafka.RoundRobin{}, BatchTimeout: time.Millisecond,
	}
	var msgs []kafka.Message
	for i := range records {
		msgs = append(msgs, kafka.Message{Value: fmt.Appendf(nil, "%d", i)})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("writer: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	var (
		mu     sync.Mutex
		errLog []string
		got    = map[string]bool{}
		wg     sync.WaitGroup
	)
	all := make(chan struct{})
	rs := make([]*kafka.Reader, readers)
	for i := range rs {
		rs[i] = kafka.NewReader(kafka.ReaderConfig{
			Brokers: []string{n.Addr()}, GroupID: group, Topic: topic,
			MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 100 * time.Millisecond,
			StartOffset: kafka.FirstOffset, HeartbeatInterval: 200 * time.Millisecond,
			SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second,
			ErrorLogger: kafka.LoggerFunc(func(format string, args ...any) {
				mu.Lock()
				errLog = append(errLog, fmt.Sprintf(format, args...))
				mu.Unlock()
			}),
		})
	}
	for _, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := r.FetchMessage(ctx)
				if err != nil {
					return // closed, or ctx ended: the count below tells
				}
				mu.Lock()
				if got[string(m.Value)] = true; len(got) == records {
					select {
					case <-all:
					default:
						close(all)
					}
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-all:
	case <-ctx.Done():
	}
	for _, r := range rs {
		r.Close()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, l := range errLog {
		if strings.Contains(l, "Failed to join group") || strings.Contains(l, "consumer group coordinator") {
			t.Errorf("a reader did not join at once: %s", l)
		}
	}
	if len(got) != records {
		t.Fatalf("the readers read %d of %d records", len(got), records)
	}
}
