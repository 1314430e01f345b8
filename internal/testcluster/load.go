package testcluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Load is a set of concurrent keyed producers (kgo: idempotent, acks=all,
// retrying until acknowledged) writing to one topic and recording every
// acknowledgement and failure in a History.
type Load struct {
	h      *History
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	cls    []*kgo.Client
	once   sync.Once
}

// StartLoad runs producers goroutines, each with its own client and keys
// keys of its own ("p<producer>k<key>"), each producing about rate
// records a second in random key order drawn from h.Seed.
func StartLoad(t testing.TB, h *History, seeds []string, topic string, producers, keys, rate int) *Load {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &Load{h: h, ctx: ctx, cancel: cancel}
	for w := range producers {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond),
			kgo.MaxBufferedRecords(200), kgo.RequestTimeoutOverhead(5*time.Second),
			kgo.ProduceRequestTimeout(5*time.Second),
			kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
			kgo.MetadataMinAge(250*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		l.cls = append(l.cls, cl)
		rng := rand.New(rand.NewPCG(uint64(h.Seed), uint64(w)))
		l.wg.Add(1)
		go l.produce(ctx, cl, rng, w, keys, rate)
	}
	t.Cleanup(l.Close)
	return l
}

func (l *Load) produce(ctx context.Context, cl *kgo.Client, rng *rand.Rand, w, keys, rate int) {
	defer l.wg.Done()
	seq := make([]int, keys)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		k := rng.IntN(keys)
		seq[k]++
		key := fmt.Sprintf("p%dk%d", w, k)
		val := fmt.Sprintf("%s-%d", key, seq[k])
		// The record's own context never expires: an idempotent producer
		// keeps retrying until the record is acknowledged or the client
		// closes, so a record fails only when it is given up on.
		sent := time.Now()
		cl.Produce(context.Background(), &kgo.Record{Key: []byte(key), Value: []byte(val)}, func(r *kgo.Record, err error) {
			if err != nil {
				l.h.Failure(Failed{Key: key, Value: val, Err: err.Error(), At: time.Now()})
				return
			}
			l.h.Ack(Acked{Key: key, Value: val, Partition: r.Partition, Offset: r.Offset, At: time.Now(), Sent: sent})
		})
	}
}

// Stop stops producing and waits up to within for buffered records to be
// acknowledged; records still unacknowledged then fail with the client
// closed.
func (l *Load) Stop(within time.Duration) {
	if l.ctx.Err() != nil {
		return
	}
	l.cancel()
	l.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var wg sync.WaitGroup
	for _, cl := range l.cls {
		wg.Go(func() { cl.Flush(ctx) })
	}
	wg.Wait()
	l.Close()
}

// Close stops producing at once (idempotent).
func (l *Load) Close() {
	l.once.Do(func() {
		l.cancel()
		l.wg.Wait()
		for _, cl := range l.cls {
			cl.Close()
		}
	})
}

// ConsumeAll reads every partition of topic from its start to its high
// watermark, as the cluster reports it now, and returns the records.
func ConsumeAll(ctx context.Context, seeds []string, topic string) ([]Consumed, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	if err := ends.Error(); err != nil {
		return nil, err
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	return ConsumeTo(ctx, seeds, topic, want)
}

// ConsumeTo reads the given partitions of topic from their start up to
// (not including) the given end offsets.
func ConsumeTo(ctx context.Context, seeds []string, topic string, ends map[int32]int64) ([]Consumed, error) {
	want := map[int32]int64{}
	parts := map[int32]kgo.Offset{}
	for p, end := range ends {
		if end > 0 {
			want[p] = end
			parts[p] = kgo.NewOffset().AtStart()
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	var out []Consumed
	next := map[int32]int64{}
	for len(want) > 0 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, fmt.Errorf("reading %s: %w; still to read (partition: next/end): %v / %v", topic, ctx.Err(), next, want)
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !kgoRetriable(err) {
				ferr = fmt.Errorf("partition %d: %w", p, err)
			}
		})
		if ferr != nil {
			return out, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			if _, ok := want[r.Partition]; !ok {
				return
			}
			out = append(out, Consumed{Key: string(r.Key), Value: string(r.Value), Partition: r.Partition, Offset: r.Offset})
			next[r.Partition] = r.Offset + 1
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
		})
	}
	return out, nil
}

func kgoRetriable(err error) bool {
	var re interface{ IsRetriable() bool }
	return errors.As(err, &re) && re.IsRetriable()
}
