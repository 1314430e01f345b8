// Package outbox is a transactional outbox for Kafka (and Berth): an
// application writes its business rows and the events they cause in one
// local database transaction, and a relay publishes the events afterwards,
// so an event is durable the instant its business change is, and no
// change commits without its event (the dual-write bug).
//
// # Writing
//
// Create the tables once (Outbox.Migrate), then, inside the transaction
// that changes the business rows, add the events:
//
//	tx, _ := db.BeginTx(ctx, nil)
//	tx.ExecContext(ctx, `INSERT INTO orders ...`)
//	ob.Add(ctx, tx, outbox.Message{Topic: "orders", Key: []byte("order:HC-2048"), Value: payload})
//	tx.Commit()
//
// Every message gets an event-id header (pkg/event; a UUIDv7 unless the
// message names its own), which consumers deduplicate on (pkg/inbox).
//
// # Relaying
//
// A Relay reads unsent rows in insertion order, publishes them with an
// idempotent producer (acks=all) keyed as each row says, and marks them
// sent only after the broker acknowledged them. Several relays may run
// against one database: rows are spread over shards by a hash of their
// key, and a shard is relayed by one relay at a time (on PostgreSQL the
// relay locks its shards' rows of berth_outbox_shards with FOR UPDATE SKIP
// LOCKED for the round; on SQLite it takes a lease on them), so the events
// of one key are published in the order they were added.
//
// # What it guarantees, and what it does not
//
//   - Nothing is lost: a row is marked sent only after its record was
//     acknowledged by every in-sync replica.
//   - Duplicates happen, by design: a relay that crashes (or loses its
//     claim) between publishing and marking publishes again, or another
//     relay does. Consumers deduplicate on the event id (pkg/inbox).
//   - Order per key is the order of the rows' ids, which is the order of
//     their commits only if transactions that add events for one key are
//     serialized (they update the same business row first, as an order
//     service updates its order). A duplicate may arrive after later
//     events of its key; an inbox drops it.
//   - The outbox is local to one database: an event about rows in two
//     databases needs one outbox each, and a call to an external service
//     inside the transaction is not covered (give it its own idempotency
//     key).
package outbox
