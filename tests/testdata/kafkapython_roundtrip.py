"""Produce and consume through kafka-python.

usage: kafkapython_roundtrip.py BOOTSTRAP TOPIC COUNT
"""
import sys
from kafka import KafkaProducer, KafkaConsumer, TopicPartition

bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type="gzip")
futs = [p.send(topic, key=b"k", value=("v%d" % i).encode(), headers=[("h", b"1")], partition=0) for i in range(count)]
for f in futs:
    f.get(timeout=30)
p.close()
c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=30000)
tp = TopicPartition(topic, 0)
c.assign([tp])
c.seek_to_beginning(tp)
seen = 0
for m in c:
    if m.value.decode() != "v%d" % seen or m.key != b"k":
        sys.exit("record %d: %r %r" % (seen, m.key, m.value))
    seen += 1
    if seen == count:
        break
c.close()
if seen != count:
    sys.exit("read %d of %d" % (seen, count))
print("ok", seen)
