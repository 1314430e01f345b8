"""Produce and consume through confluent-kafka-python (librdkafka).

usage: confluent_roundtrip.py BOOTSTRAP TOPIC CODEC COUNT
Prints 'ok N' after reading back every record with its key and headers.
"""
import sys
from confluent_kafka import Producer, Consumer, TopicPartition, OFFSET_BEGINNING

bootstrap, topic, codec, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
errors = []
p = Producer({"bootstrap.servers": bootstrap, "compression.codec": codec,
              "enable.idempotence": True, "acks": "all"})
for i in range(count):
    p.produce(topic, key=("k%d" % (i % 5)).encode(), value=("v%d" % i).encode(),
              headers=[("h", ("x%d" % i).encode())], partition=0,
              on_delivery=lambda err, msg: err and errors.append(err))
left = p.flush(30)
if left or errors:
    sys.exit("produce failed: %d unflushed, errors %s" % (left, errors[:3]))

c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
seen = 0
while seen < count:
    m = c.poll(30)
    if m is None:
        sys.exit("timed out after %d records" % seen)
    if m.error():
        sys.exit("consume error: %s" % m.error())
    want = "v%d" % seen
    if m.value().decode() != want or m.key().decode() != "k%d" % (seen % 5) or dict(m.headers() or [])["h"] != ("x%d" % seen).encode():
        sys.exit("record %d: key %r value %r headers %r" % (seen, m.key(), m.value(), m.headers()))
    seen += 1
c.close()
print("ok", seen)
