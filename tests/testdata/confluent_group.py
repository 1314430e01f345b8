"""Consume a topic in a consumer group with confluent-kafka-python and commit.

usage: confluent_group.py BOOTSTRAP TOPIC GROUP COUNT
Prints 'ok N' after reading COUNT records (from the committed position).
"""
import sys
from confluent_kafka import Consumer

bootstrap, topic, group, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": 6000})
c.subscribe([topic])
seen = 0
while seen < count:
    m = c.poll(30)
    if m is None:
        sys.exit("timed out after %d records" % seen)
    if m.error():
        sys.exit("consume error: %s" % m.error())
    seen += 1
    c.commit(message=m, asynchronous=False)
c.close()
print("ok", seen)
