"""Consume-transform-produce with transactions in confluent-kafka-python.

usage: confluent_txn_ctp.py BOOTSTRAP IN OUT GROUP TXN_ID BATCH [PAUSE_AT [ABORT_EVERY]]

Reads IN in consumer group GROUP (read_committed, no auto commit) and, per
poll of at most BATCH records, writes "out-<value>" to the same partition
of OUT and the consumer's positions to the transaction
(send_offsets_to_transaction), then commits. An abortable error aborts the
transaction and rewinds to the committed offsets; a retriable one retries;
a fatal one exits 2 (a new run with the same transactional id fences this
one and goes on from the committed offsets). A revoke aborts the open
transaction: the next assignment starts from the committed offsets.

Prints "committed N" (records committed by this run so far) after each
commit, and "done N" once every assigned partition's position is at its
high watermark with no transaction open. With PAUSE_AT, the first
transaction that takes the run to PAUSE_AT records is flushed (its records
are in the output partitions' logs, the transaction open), "paused N" is
printed and the script waits for a line on stdin before committing it: the
test does its fault there (0: no pause). With ABORT_EVERY, every
ABORT_EVERY-th transaction is flushed and then aborted on purpose, and the
consumer rewound to the committed offsets.
"""
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

bootstrap, in_topic, out_topic, group, txn_id, batch = sys.argv[1:7]
batch = int(batch)
pause_at = int(sys.argv[7]) if len(sys.argv) > 7 else 0
abort_every = int(sys.argv[8]) if len(sys.argv) > 8 else 0
txns = 0
deadline = time.time() + 50


def log(*a):
    print(*a, flush=True)


consumer = Consumer({
    "bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
    "enable.auto.commit": False, "auto.offset.reset": "earliest",
    "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
})
producer = Producer({
    "bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 30000,
    "linger.ms": 5,
})
# gen counts rebalance callbacks: a poll that ran one may return records
# from before or after it, so its batch is dropped and the positions rewound.
state = {"open": False, "pending": 0, "total": 0, "gen": 0}


def abort():
    if state["open"]:
        producer.abort_transaction(30)
        state["open"] = False
    state["pending"] = 0


def on_assign(c, parts):
    state["gen"] += 1


def on_revoke(c, parts):
    # The next owner (maybe this consumer again) starts from the committed
    # offsets: what this transaction consumed must not be committed.
    state["gen"] += 1
    if state["open"]:
        log("revoked %d partitions: aborting" % len(parts))
    abort()


def rewind():
    parts = consumer.assignment()
    if not parts:
        return
    for tp in consumer.committed(parts, timeout=30):
        off = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
        consumer.seek(TopicPartition(tp.topic, tp.partition, off))


def commit():
    while True:
        try:
            pos = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
            producer.send_offsets_to_transaction(pos, consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            state["open"] = False
            state["total"] += state["pending"]
            state["pending"] = 0
            log("committed", state["total"])
            return
        except KafkaException as e:
            err = e.args[0]
            if err.retriable() and time.time() < deadline:
                log("retrying the commit:", err)
                continue
            if err.txn_requires_abort():
                log("aborting:", err)
                abort()
                rewind()
                return
            raise


def done():
    parts = consumer.assignment()
    if not parts or state["open"]:
        return False
    committed = {(tp.topic, tp.partition): tp.offset for tp in consumer.committed(parts, timeout=30)}
    for tp in consumer.position(parts):
        pos = tp.offset if tp.offset >= 0 else committed.get((tp.topic, tp.partition), -1)
        _, high = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
        if pos < high:
            return False
    return True


try:
    producer.init_transactions(30)
    consumer.subscribe([in_topic], on_assign=on_assign, on_revoke=on_revoke)
    while True:
        if time.time() > deadline:
            sys.exit("timed out: committed %d records" % state["total"])
        gen = state["gen"]
        msgs = consumer.consume(num_messages=batch, timeout=0.5)
        if msgs and state["gen"] != gen:
            log("rebalanced during the poll: dropping %d records, rewinding" % len(msgs))
            abort()
            rewind()
            continue
        if not msgs:
            if done():
                break
            continue
        for m in msgs:
            if m.error():
                raise KafkaException(m.error())
            if not state["open"]:
                producer.begin_transaction()
                state["open"] = True
            producer.produce(out_topic, key=m.key(), value=b"out-" + m.value(), partition=m.partition())
            state["pending"] += 1
        txns += 1
        if abort_every and txns % abort_every == 0:
            producer.flush(30)
            log("aborting %d records on purpose" % state["pending"])
            abort()
            rewind()
            continue
        if pause_at and state["total"] + state["pending"] >= pause_at:
            pause_at = 0
            producer.flush(30)
            log("paused", state["total"] + state["pending"])
            sys.stdin.readline()
        try:
            commit()
        except KafkaException as e:
            log("fatal:", e.args[0])
            sys.exit(2)
    log("done", state["total"])
finally:
    consumer.close()
    producer.flush(5)
