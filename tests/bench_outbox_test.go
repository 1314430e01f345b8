package tests

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	tc "github.com/berthmq/berth/internal/testcluster"
	"github.com/berthmq/berth/pkg/inbox"
	"github.com/berthmq/berth/pkg/outbox"
)

// BenchmarkOutboxRelay is the relay's throughput: b.N rows of 1 KiB over
// 1,000 keys are in the outbox (committed 1,000 per transaction before
// the timer starts), then 1 or 4 relays publish them to a topic of 8
// partitions on one node (fsync before ack); it reports rows/s until the
// outbox is drained. BenchmarkOutboxDirectProduce is the same records
// produced directly, in batches of the relay's size, for the ratio.
func BenchmarkOutboxRelay(b *testing.B) {
	for _, d := range outboxDBs {
		for _, relays := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/relays=%d", d.name, relays), func(b *testing.B) {
				ctx, db, n, ob := outboxBench(b, d)
				fillOutbox(b, ctx, db, ob, b.N)
				rctx, stop := context.WithCancel(ctx)
				var wg sync.WaitGroup
				var rs []*outbox.Relay
				for i := range relays {
					r, err := ob.NewRelay(db, outbox.RelayOptions{ID: fmt.Sprint("r", i), Idle: 5 * time.Millisecond,
						Producer: []kgo.Opt{kgo.SeedBrokers(n.Addr())}})
					if err != nil {
						b.Fatal(err)
					}
					rs = append(rs, r)
				}
				b.ResetTimer()
				start := time.Now()
				for _, r := range rs {
					wg.Add(1)
					go func() { defer wg.Done(); r.Run(rctx) }()
				}
				for {
					st, err := rs[0].Stats(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if st.Unsent == 0 {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
				el := time.Since(start)
				b.StopTimer()
				stop()
				wg.Wait()
				for _, r := range rs {
					r.Close()
				}
				b.ReportMetric(float64(b.N)/el.Seconds(), "rows/s")
			})
		}
	}
}

func BenchmarkOutboxDirectProduce(b *testing.B) {
	n := tc.Start(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if _, err := tc.Admin(b, n.Addr()).CreateTopic(ctx, 8, 1, nil, "orders"); err != nil {
		b.Fatal(err)
	}
	cl := tc.Client(b, n.Addr())
	value := make([]byte, 1024)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i += 500 {
		var recs []*kgo.Record
		for j := i; j < min(b.N, i+500); j++ {
			recs = append(recs, &kgo.Record{Topic: "orders", Key: []byte(fmt.Sprintf("order:%d", j%1000)), Value: value})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "rows/s")
}

// outboxBench is a benchmark's setup: the database, a node with the
// topic orders (8 partitions), the outbox's tables, a 20-minute context.
func outboxBench(b *testing.B, d outboxDB) (context.Context, *sql.DB, *tc.Node, *outbox.Outbox) {
	b.Helper()
	db := d.open(b)
	n := tc.Start(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	b.Cleanup(cancel)
	if _, err := tc.Admin(b, n.Addr()).CreateTopic(ctx, 8, 1, nil, "orders"); err != nil {
		b.Fatal(err)
	}
	ob, err := outbox.New(outbox.Config{Dialect: d.dialect})
	if err != nil {
		b.Fatal(err)
	}
	if err := ob.Migrate(ctx, db); err != nil {
		b.Fatal(err)
	}
	return ctx, db, n, ob
}

func fillOutbox(b *testing.B, ctx context.Context, db *sql.DB, ob *outbox.Outbox, rows int) {
	b.Helper()
	value := make([]byte, 1024)
	for i := 0; i < rows; i += 1000 {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		var msgs []outbox.Message
		for j := i; j < min(rows, i+1000); j++ {
			msgs = append(msgs, outbox.Message{Topic: "orders", Key: []byte(fmt.Sprintf("order:%d", j%1000)), Value: value})
		}
		if _, err := ob.Add(ctx, tx, msgs...); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOrderPipeline is the seeds' order path on each database, b.N
// orders from 8 writers: "direct" commits the order row, then produces
// its event (the dual write the outbox exists to avoid); "outbox" commits
// the order row and its outbox row together while 1 or 4 relays publish.
// It reports orders/s until every event is acknowledged by the broker.
func BenchmarkOrderPipeline(b *testing.B) {
	for _, d := range outboxDBs {
		for _, mode := range []string{"direct", "outbox/relays=1", "outbox/relays=4"} {
			b.Run(d.name+"/"+mode, func(b *testing.B) {
				ctx, db, n, ob := outboxBench(b, d)
				if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, total BIGINT NOT NULL)`); err != nil {
					b.Fatal(err)
				}
				ins := `INSERT INTO orders (id, total) VALUES (?, ?)`
				if d.dialect == outbox.Postgres {
					ins = `INSERT INTO orders (id, total) VALUES ($1, $2)`
				}
				cl := tc.Client(b, n.Addr())
				var rs []*outbox.Relay
				rctx, stop := context.WithCancel(ctx)
				var wg sync.WaitGroup
				if mode != "direct" {
					relays := 1
					if mode == "outbox/relays=4" {
						relays = 4
					}
					for i := range relays {
						r, err := ob.NewRelay(db, outbox.RelayOptions{ID: fmt.Sprint("r", i), Idle: 2 * time.Millisecond,
							Producer: []kgo.Opt{kgo.SeedBrokers(n.Addr())}})
						if err != nil {
							b.Fatal(err)
						}
						rs = append(rs, r)
						wg.Add(1)
						go func() { defer wg.Done(); r.Run(rctx) }()
					}
				}
				value := make([]byte, 1024)
				const writers = 8
				var next atomic.Int64
				b.ResetTimer()
				start := time.Now()
				var ww sync.WaitGroup
				for range writers {
					ww.Add(1)
					go func() {
						defer ww.Done()
						for {
							i := next.Add(1) - 1
							if i >= int64(b.N) {
								return
							}
							id := fmt.Sprintf("HC-%d", i)
							tx, err := db.BeginTx(ctx, nil)
							if err != nil {
								b.Error(err)
								return
							}
							if _, err := tx.ExecContext(ctx, ins, id, i); err != nil {
								b.Error(err)
								tx.Rollback()
								return
							}
							if mode != "direct" {
								if _, err := ob.Add(ctx, tx, outbox.Message{Topic: "orders", Key: []byte("order:" + id), Value: value}); err != nil {
									b.Error(err)
									tx.Rollback()
									return
								}
							}
							if err := tx.Commit(); err != nil {
								b.Error(err)
								return
							}
							if mode == "direct" {
								if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte("order:" + id), Value: value}).FirstErr(); err != nil {
									b.Error(err)
									return
								}
							}
						}
					}()
				}
				ww.Wait()
				for len(rs) > 0 {
					st, err := rs[0].Stats(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if st.Unsent == 0 {
						break
					}
					time.Sleep(2 * time.Millisecond)
				}
				el := time.Since(start)
				b.StopTimer()
				stop()
				wg.Wait()
				for _, r := range rs {
					r.Close()
				}
				b.ReportMetric(float64(b.N)/el.Seconds(), "orders/s")
			})
		}
	}
}

// BenchmarkOrderLatency is the time from an order's commit to its email
// row (a consumer group's inbox transaction on the same database), at a
// paced 200 orders/s, direct (commit, then produce) and through the
// outbox (one relay with its default 50 ms idle poll, and with 5 ms). It
// reports p50 and p99 in ms; b.N is the orders.
func BenchmarkOrderLatency(b *testing.B) {
	for _, d := range outboxDBs {
		for _, mode := range []string{"direct", "outbox/idle=50ms", "outbox/idle=5ms"} {
			b.Run(d.name+"/"+mode, func(b *testing.B) {
				ctx, db, n, ob := outboxBench(b, d)
				ib, _ := inbox.New(inbox.Config{Dialect: d.dialect})
				if err := ib.Migrate(ctx, db); err != nil {
					b.Fatal(err)
				}
				for _, q := range []string{`CREATE TABLE orders (id TEXT PRIMARY KEY, total BIGINT NOT NULL)`, `CREATE TABLE emails (order_id TEXT NOT NULL)`} {
					if _, err := db.ExecContext(ctx, q); err != nil {
						b.Fatal(err)
					}
				}
				ins, email := `INSERT INTO orders (id, total) VALUES (?, ?)`, `INSERT INTO emails (order_id) VALUES (?)`
				if d.dialect == outbox.Postgres {
					ins, email = `INSERT INTO orders (id, total) VALUES ($1, $2)`, `INSERT INTO emails (order_id) VALUES ($1)`
				}
				cl := tc.Client(b, n.Addr())
				rctx, stop := context.WithCancel(ctx)
				var wg sync.WaitGroup
				if mode != "direct" {
					idle := 50 * time.Millisecond
					if mode == "outbox/idle=5ms" {
						idle = 5 * time.Millisecond
					}
					r, err := ob.NewRelay(db, outbox.RelayOptions{Idle: idle, Producer: []kgo.Opt{kgo.SeedBrokers(n.Addr())}})
					if err != nil {
						b.Fatal(err)
					}
					defer r.Close()
					wg.Add(1)
					go func() { defer wg.Done(); r.Run(rctx) }()
				}
				var committed sync.Map // order id -> time.Time
				lat := make(chan time.Duration, b.N)
				consumer := tc.Client(b, n.Addr(), kgo.ConsumerGroup("email-notifier"), kgo.ConsumeTopics("orders"),
					kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
				wg.Add(1)
				go func() {
					defer wg.Done()
					for rctx.Err() == nil {
						fs := consumer.PollFetches(rctx)
						fs.EachRecord(func(r *kgo.Record) {
							id := string(r.Value)
							if _, err := ib.Process(rctx, db, "email-notifier", r, func(tx *sql.Tx) error {
								_, err := tx.ExecContext(rctx, email, id)
								return err
							}); err != nil {
								return
							}
							if t, ok := committed.Load(id); ok {
								lat <- time.Since(t.(time.Time))
							}
						})
						consumer.CommitUncommittedOffsets(rctx)
					}
				}()
				b.ResetTimer()
				tick := time.NewTicker(5 * time.Millisecond) // 200/s
				for i := range b.N {
					<-tick.C
					id := fmt.Sprintf("HC-%d", i)
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := tx.ExecContext(ctx, ins, id, i); err != nil {
						b.Fatal(err)
					}
					if mode != "direct" {
						if _, err := ob.Add(ctx, tx, outbox.Message{Topic: "orders", Key: []byte("order:" + id), Value: []byte(id)}); err != nil {
							b.Fatal(err)
						}
					}
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
					committed.Store(id, time.Now())
					if mode == "direct" {
						if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte("order:" + id), Value: []byte(id)}).FirstErr(); err != nil {
							b.Fatal(err)
						}
					}
				}
				tick.Stop()
				var all []time.Duration
				deadline := time.After(60 * time.Second)
				for len(all) < b.N {
					select {
					case l := <-lat:
						all = append(all, l)
					case <-deadline:
						b.Fatalf("%d of %d email rows after 60 s", len(all), b.N)
					}
				}
				b.StopTimer()
				stop()
				wg.Wait()
				slices.Sort(all)
				b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
			})
		}
	}
}
