// Package worker runs jobs from a Berth work queue (a Kafka share group,
// KIP-932) with a handler function, on top of franz-go's share consumer:
//
//	w, err := worker.New(func(ctx context.Context, r *kgo.Record) error {
//		if err := bookCarrier(ctx, r.Value); err != nil {
//			if errors.Is(err, errBadAddress) {
//				return worker.Permanent(err) // no retry: parked in the DLQ with this text
//			}
//			return err // released: retried after the broker's backoff
//		}
//		return nil // accepted: done
//	}, worker.Options{Group: "shippers", Topics: []string{"shipment-jobs"}, Concurrency: 8},
//		kgo.SeedBrokers("localhost:9092"))
//	if err != nil { ... }
//	err = w.Run(ctx) // until ctx is cancelled
//
// For each record the worker runs the handler and then acknowledges the
// record:
//
//   - nil: ACCEPT. The job is done and never delivered again.
//   - an error: RELEASE. The broker delivers the job again (to this worker
//     or another) after its retry backoff, which grows with the delivery
//     count (Record.DeliveryCount); at the group's delivery limit it is
//     parked in the group's dead-letter topic instead.
//   - an error wrapped by Permanent: REJECT. The job is not retried and is
//     parked in the dead-letter topic at once.
//   - a panic: recovered and treated as an error (RELEASE), with the stack
//     as the error text.
//
// Before a RELEASE or REJECT the worker sends the error's text to the
// partition leader (Berth's BerthAnnotateShareRecords request), so the
// dead-letter record carries it in the header
// __dlq.errors.berth.client.error. Against a broker other than Berth the
// text is dropped and everything else works.
//
// While a handler runs, the worker renews the job's acquisition lock
// (RENEW, KIP-1222) every Options.RenewEvery, so a long job is not given
// to another worker. A lease cannot tell a slow worker from a dead one,
// though: a worker that stalls past its lock (a long GC pause, a frozen
// VM) loses the job to another. Delivery is at least once; handlers must
// be idempotent, keyed by the job's ID.
//
// The worker polls up to Concurrency records at a time and runs them in
// parallel; kgo accepts every record of a poll that is not acknowledged
// by the next poll, so the worker polls again only once every handler of
// the poll has returned. One slow job therefore holds its worker's other
// slots until it ends: run several workers (processes, or Worker values)
// for throughput with uneven job durations.
//
// When the context given to Run is cancelled the worker stops taking
// jobs, gives running handlers Options.ShutdownGrace to finish, then
// cancels their context and RELEASEs the jobs they have not finished, so
// another worker gets them without waiting for the lock to expire. It
// sends every acknowledgement and leaves the group before Run returns.
package worker
