# A confluent-kafka-python (librdkafka) transactional producer: commits
# c0-c4, writes and aborts x0-x4, commits c5-c9. Prints "ok" when every call worked.
import sys

from confluent_kafka import Producer

bootstrap, topic = sys.argv[1], sys.argv[2]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "py-txn", "transaction.timeout.ms": 60000})
p.init_transactions(30)


def txn(values, commit):
    p.begin_transaction()
    for v in values:
        p.produce(topic, value=v.encode())
    if commit:
        p.commit_transaction(30)
    else:
        p.flush(30)  # written, then aborted (abort alone drops unsent records)
        p.abort_transaction(30)


txn(["c%d" % i for i in range(5)], True)
txn(["x%d" % i for i in range(5)], False)
txn(["c%d" % i for i in range(5, 10)], True)
print("ok")
